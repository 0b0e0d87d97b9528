"""Alpha spending: Lan-DeMets O'Brien-Fleming-type boundaries of a group-sequential test.

The boundaries c_k spend alpha by the Lan-DeMets function of O'Brien-Fleming type (Lan & DeMets
1983, Biometrika 70:659-663), computed by recursive numerical integration of the canonical joint
distribution (Armitage, McPherson & Rowe 1969, JRSS A 132:235-244; Jennison & Turnbull 2000,
*Group Sequential Methods with Applications to Clinical Trials*, ch. 19). Used by
bracket.stats.sequential at each comparison's level, which Holm-type recycling may raise.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats


def obf_spending(t, alpha: float):
    """Lan-DeMets O'Brien-Fleming-type alpha spent by information fraction t, both sides together.

    Each side spends 2 - 2 Phi(z_{1 - alpha/4} / sqrt(t)) of its alpha / 2, the convention of
    gsDesign's sfLDOF and ldbounds for a symmetric two-sided design (their published boundaries
    for 5 equal looks at alpha 0.05: 4.877, 3.357, 2.680, 2.290, 2.031).
    """
    t = np.asarray(t, dtype=float)
    z = stats.norm.isf(alpha / 4)
    return 2 * np.where(t > 0, 2 * stats.norm.sf(z / np.sqrt(np.maximum(t, 1e-300))), 0.0)


def _normal_pdf(z: np.ndarray) -> np.ndarray:
    """phi(z) = exp(-z^2 / 2) / sqrt(2 pi): scipy.stats.norm.pdf's formula without its argument checks, which
    cost more than the exponentials on the grid x grid kernel (1601^2 values per look)."""
    z = np.square(z)
    z *= -0.5
    np.exp(z, out=z)
    z /= math.sqrt(2 * math.pi)
    return z


def boundaries(fractions, alpha: float, grid: int = 1601, spending=obf_spending) -> np.ndarray:
    """Two-sided boundaries c_k (z scale) of the Lan-DeMets OBF-type spending at these fractions.

    P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1}) under no effect, Z_k the
    standardised statistic of a Brownian motion observed at times t_k (recursive integration on a
    grid of the score S_k = Z_k sqrt(t_k), densities carried between looks by the normal kernel).
    """
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {list(t)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    spend = np.diff(np.r_[0.0, spending(t, alpha)])
    c = np.empty(t.size)
    c[0] = stats.norm.isf(spend[0] / 2)
    # density of S_1 on the continuation region, on a grid
    b = c[0] * math.sqrt(t[0])
    x = np.linspace(-b, b, grid)
    f = stats.norm.pdf(x, scale=math.sqrt(t[0]))
    for k in range(1, t.size):
        d = math.sqrt(t[k] - t[k - 1])
        w = np.full(grid, (x[1] - x[0]))
        w[[0, -1]] /= 2  # trapezoid weights
        fw = f * w

        def crossing(ck, k=k, d=d, fw=fw, x=x):
            bk = ck * math.sqrt(t[k])
            # P(cross above) + P(cross below): sf(u) = ndtr(-u), cdf = ndtr (scipy.stats.norm's own formulas)
            return float(fw @ (special.ndtr((x - bk) / d) + special.ndtr((-bk - x) / d))) - spend[k]

        if spend[k] <= 0:
            c[k] = math.inf
            continue
        c[k] = optimize.brentq(crossing, 1e-6, 40.0, xtol=1e-9)
        bk = c[k] * math.sqrt(t[k])
        xn = np.linspace(-bk, bk, grid)
        f = _normal_pdf((xn[:, None] - x[None, :]) / d) / d @ fw
        x = xn
    return c


_BOUNDS: dict = {}


def cached_boundaries(fractions: tuple, alpha: float) -> np.ndarray:
    """boundaries() memoised on (fractions, alpha): a look asks for the same ones for every comparison."""
    key = (fractions, round(alpha, 15))
    if key not in _BOUNDS:
        _BOUNDS[key] = boundaries(np.array(fractions), alpha)
    return _BOUNDS[key]
