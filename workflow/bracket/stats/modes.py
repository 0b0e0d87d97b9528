"""Two paths: detect a cell whose runs fall into two separate modes, and give both.

Seed 000 met a configuration with "two stable paths": fresh servers settled into one of two
rates. The median of such a cell depends on how many runs happened to take each path, so it is
unstable, and listing a whole mode as "outliers" hides what happened.

Method: on log rates, the split into a lower and an upper group that maximises the
between-group sum of squares (Otsu's split; each group at least 20 % of the values and two
values), and Ashman's D = (mean_hi - mean_lo) / sqrt((s_lo^2 + s_hi^2) / 2) of that split.
Because the best split of any sample separates its halves, D is large even for one normal
sample; the threshold 3 + 60 / n lies above the 99.9th percentile of D for normal samples of 10,
20 and 40 values (simulated: 7.7, 5.2, 4.1) and near it at 6 (14.2). The modes must also differ
by at least MIN_GAP.

Two places a second mode can live:
- across blocks: some servers settle on one rate, others on another. Judged on the block medians
  (six blocks or more), so ordinary block-to-block noise, which makes runs clump by block, is not
  taken for two modes;
- within blocks: runs of one server alternate between two rates. Judged on the runs
  (MIN_RUNS or more), and reported only when a block holds runs of both modes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 8
MIN_BLOCKS = 6
MIN_GAP = 0.02


@dataclass(frozen=True)
class Modes:
    """Both modes of a bimodal cell: medians, run counts, where they live (within or across blocks)."""

    low_median: float
    high_median: float
    low_n: int
    high_n: int
    ashman_d: float
    threshold: float
    where: str  # "across blocks" | "within blocks" | "unknown blocks"


def threshold(n: int) -> float:
    return 3.0 + 60.0 / n


def _split(y: np.ndarray) -> tuple[float, float] | None:
    """(cut, D) of the best two-group split of log values `y`, or None when too few."""
    x = np.sort(y)
    n = x.size
    g = max(2, math.ceil(0.2 * n))
    best_k, best_ss = None, -1.0
    for k in range(g, n - g + 1):
        ss = k * (x[:k].mean() - x.mean()) ** 2 + (n - k) * (x[k:].mean() - x.mean()) ** 2
        if ss > best_ss:
            best_k, best_ss = k, ss
    if best_k is None:
        return None
    a, b = x[:best_k], x[best_k:]
    s = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    d = (b.mean() - a.mean()) / s if s > 0 else math.inf
    if not (d > threshold(n) and math.expm1(np.median(b) - np.median(a)) >= MIN_GAP):
        return None
    return float((a[-1] + b[0]) / 2), float(d)


def _modes(v: np.ndarray, upper: np.ndarray, d: float, n: int, where: str) -> Modes:
    lo, hi = v[~upper], v[upper]
    return Modes(float(np.median(lo)), float(np.median(hi)), int(lo.size), int(hi.size), d, threshold(n), where)


def bimodal(values, blocks=None) -> Modes | None:
    """Modes if the values form two separate groups (see module docstring), else None."""
    v = np.asarray(values, dtype=float)
    y = np.log(v)
    if blocks is not None:
        b = np.asarray(blocks)
        ids = np.unique(b)
        if ids.size >= MIN_BLOCKS:
            med = np.array([np.median(y[b == k]) for k in ids])
            hit = _split(med)
            if hit:
                up_ids = set(ids[med > hit[0]].tolist())
                return _modes(v, np.array([k in up_ids for k in b]), hit[1], ids.size, "across blocks")
    if v.size < MIN_RUNS:
        return None
    hit = _split(y)
    if not hit:
        return None
    upper = y > hit[0]
    if blocks is None:
        return _modes(v, upper, hit[1], v.size, "unknown blocks")
    if any(len(set(upper[b == k].tolist())) > 1 for k in np.unique(b)):
        return _modes(v, upper, hit[1], v.size, "within blocks")
    return None  # runs clump by block but the block medians are not two modes: block noise


#: Level of the flatness test (`flat_within`): runs that take one normal path have their blocks' means
#: chosen over their medians this often, which costs them nothing (a mean is the better centre of a normal
#: sample); heavy tails never look flat, so a wild run keeps the medians.
FLAT_LEVEL = 0.05
#: Fewest within-block residual degrees of freedom the flatness test runs on.
FLAT_MIN_DF = 20
_FLAT_DRAWS = 4000


@dataclass(frozen=True)
class Flatness:
    """The runs' spread within blocks against one normal path's: the kurtosis of the pooled within-block
    residuals (each block's deviations from its mean, scaled by sqrt(n / (n - 1))), the FLAT_LEVEL quantile of
    that kurtosis for normal runs in blocks of the same sizes, and whether it lies below it."""

    kurtosis: float
    threshold: float
    level: float
    df: int
    flat: bool


def _kurtosis(res: np.ndarray) -> np.ndarray:
    """Pearson's kurtosis along the last axis (3 for a normal sample)."""
    c = res - res.mean(axis=-1, keepdims=True)
    m2 = (c**2).mean(axis=-1)
    return (c**4).mean(axis=-1) / np.where(m2 > 0, m2**2, np.inf)


def _residuals(y: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Within-block residuals of y (blocks in order, of `sizes`), each scaled by sqrt(n / (n - 1))."""
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    n = np.repeat(np.asarray(sizes, dtype=float), sizes)
    means = np.repeat(np.add.reduceat(y, starts, axis=-1) / np.asarray(sizes, dtype=float), sizes, axis=-1)
    return (y - means) * np.sqrt(n / (n - 1))


@functools.lru_cache(maxsize=256)
def flat_threshold(sizes: tuple[int, ...], level: float = FLAT_LEVEL) -> float:
    """The `level` quantile of the within-block residuals' kurtosis for normal runs in blocks of `sizes`, by
    simulation (a fixed seed: the same sizes give the same threshold)."""
    rng = np.random.default_rng([len(sizes), sum(sizes)])
    k = _kurtosis(_residuals(rng.standard_normal((_FLAT_DRAWS, sum(sizes))), sizes))
    return float(np.quantile(k, level))


def flat_within(values, blocks) -> Flatness | None:
    """Whether the runs within blocks spread flatter than one normal path lets them (two paths that overlap:
    modes 8 % apart at a request sd of 1.5-2 % are too close for `bimodal` at 5 runs a block, issue 43, and
    still make the block medians jump with the mix). Blocks of three runs or more; None below FLAT_MIN_DF
    residual degrees of freedom."""
    y = np.log(np.asarray(values, dtype=float))
    b = np.asarray(blocks)
    order = np.argsort(b, kind="stable")
    y, b = y[order], b[order]
    ids, sizes = np.unique(b, return_counts=True)
    keep = np.isin(b, ids[sizes >= 3])
    y, sizes = y[keep], tuple(int(s) for s in sizes[sizes >= 3])
    df = int(sum(sizes) - len(sizes))
    if df < FLAT_MIN_DF:
        return None
    k = float(_kurtosis(_residuals(y, sizes)))
    t = flat_threshold(sizes, FLAT_LEVEL)
    return Flatness(k, t, FLAT_LEVEL, df, bool(k < t))
