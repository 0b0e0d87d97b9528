"""Bootstrap of the ratio of medians between two arms, respecting how the runs were taken.

Requests in one block share a server launch, a thermal state and a cache state, so they are not
independent. When each arm has at least two blocks, the resampling is hierarchical (Davison &
Hinkley 1997, sec. 3.8; Kalibera & Jones 2013): draw blocks with replacement within each arm,
then requests with replacement within each drawn block. With one block per arm there is nothing
to resample at the block level and scipy.stats.bootstrap resamples the requests of each arm
independently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from bracket.stats import defaults as D
from bracket.stats._seeds import as_generator


@dataclass(frozen=True)
class Sample:
    """One arm's valid runs: rate, block id and schedule position of each (same length)."""

    values: np.ndarray
    blocks: np.ndarray
    positions: np.ndarray

    @classmethod
    def of(cls, values, blocks=None, positions=None) -> "Sample":
        v = np.asarray(values, dtype=float)
        if v.ndim != 1 or v.size == 0:
            raise ValueError(f"an arm needs a non-empty 1-D array of values, got shape {v.shape}.")
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError("values must be positive finite rates; drop invalid rows first.")
        b = np.zeros(v.size, dtype=int) if blocks is None else np.asarray(blocks)
        p = np.full(v.size, np.nan) if positions is None else np.asarray(positions, dtype=float)
        if b.shape != v.shape or p.shape != v.shape:
            raise ValueError(f"values, blocks and positions must have the same length ({v.size}, {b.size}, {p.size}).")
        return cls(v, b, p)

    @property
    def n_blocks(self) -> int:
        return int(np.unique(self.blocks).size)

    def position_spread(self) -> float:
        """Sum of squared deviations of positions around their mean; 0 means no time variation."""
        p = self.positions
        return 0.0 if np.isnan(p).any() else float(((p - p.mean()) ** 2).sum())


@dataclass(frozen=True)
class RatioBootstrap:
    """Bootstrap distribution summary of median(candidate) / median(baseline)."""

    ratio: float
    ci_low: float
    ci_high: float
    adjusted_ratio: float | None
    adjusted_ci_low: float | None
    adjusted_ci_high: float | None
    slope: float | None
    method: str
    n_resamples: int
    confidence: float


def _resample_hierarchical(s: Sample, n_resamples: int, rng: np.random.Generator):
    """Return (values, positions), each (n_resamples, m * nmax), NaN where a block is shorter."""
    ids = np.unique(s.blocks)
    groups = [np.flatnonzero(s.blocks == b) for b in ids]
    sizes = np.array([g.size for g in groups])
    nmax = int(sizes.max())
    table = np.full((ids.size, nmax), np.nan)
    pos = np.full((ids.size, nmax), np.nan)
    for i, g in enumerate(groups):
        table[i, : g.size] = s.values[g]
        pos[i, : g.size] = s.positions[g]
    pick = rng.integers(0, ids.size, size=(n_resamples, ids.size))
    n_pick = sizes[pick]
    j = np.floor(rng.random((n_resamples, ids.size, nmax)) * n_pick[..., None]).astype(int)
    keep = np.arange(nmax) < n_pick[..., None]
    vals = np.where(keep, table[pick[..., None], j], np.nan)
    where = np.where(keep, pos[pick[..., None], j], np.nan)
    return vals.reshape(n_resamples, -1), where.reshape(n_resamples, -1)


def within_arm_slope(y: list[np.ndarray], p: list[np.ndarray]) -> np.ndarray:
    """Common slope of y on p with a separate intercept per arm (Frisch-Waugh form of OLS).

    slope = sum_a sum_i (p - mean_a p)(y - mean_a y) / sum_a sum_i (p - mean_a p)^2

    Works on the last axis, NaN-aware, so it runs on every bootstrap replicate at once. Returns
    NaN where no arm has any variation in position (the slope is not identified).
    """
    num = 0.0
    den = 0.0
    for ya, pa in zip(y, p):
        dp = pa - np.nanmean(pa, axis=-1, keepdims=True)
        dy = ya - np.nanmean(ya, axis=-1, keepdims=True)
        num = num + np.nansum(dp * dy, axis=-1)
        den = den + np.nansum(dp * dp, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1.0), np.nan)


def _key(s: Sample) -> bytes:
    return s.values.tobytes() + np.asarray(s.blocks, dtype=float).tobytes() + s.positions.tobytes()


def _log_ratio_stat(a, b, axis=-1):
    return np.log(np.median(b, axis=axis) / np.median(a, axis=axis))


def _percentile_ci(log_ratios: np.ndarray, alpha: float) -> tuple[float, float]:
    """Percentile interval taken on the log scale, so that swapping the arms inverts it exactly."""
    lo, hi = np.quantile(log_ratios, [alpha / 2, 1 - alpha / 2])
    return float(np.exp(lo)), float(np.exp(hi))


def ratio_of_medians(
    baseline: Sample,
    candidate: Sample,
    *,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    rng: np.random.Generator | int | None = None,
) -> RatioBootstrap:
    """Bootstrap CI of median(candidate) / median(baseline), raw and drift-adjusted.

    Parameters
    ----------
    baseline, candidate : Sample
        Valid runs of each arm with block ids and schedule positions.
    confidence : float
        Two-sided level of the percentile intervals.
    n_resamples : int
        Bootstrap replicates.
    rng : Generator or int
        Source of randomness; required, so results can be reproduced.

    Notes
    -----
    Hierarchical when both arms have two or more blocks, else scipy.stats.bootstrap on requests
    (independent samples, percentile method; see `summary.median_ci` for why percentile).

    The drift-adjusted ratio removes a linear trend in time: each rate is divided by
    exp(slope * position), where slope is the common within-arm slope of log(rate) on schedule
    position (`within_arm_slope`), and the ratio of medians is taken on the detrended rates.
    Each replicate re-estimates the slope from its own resampled blocks, so the slope's
    uncertainty enters the interval. A replicate whose drawn blocks leave no arm with two
    positions cannot identify the slope; it uses the slope of the full data (which narrows the
    interval slightly; the share of such replicates is small once arms have three or more blocks).
    The adjusted ratio is None when positions are unknown or no arm was measured at two positions.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must lie strictly between 0 and 1, got {confidence!r}.")
    if n_resamples < 100:
        raise ValueError(f"`n_resamples` must be at least 100, got {n_resamples}.")
    gen = as_generator(rng)
    alpha = 1 - confidence
    ratio = float(np.median(candidate.values) / np.median(baseline.values))
    identified = baseline.position_spread() > 0 or candidate.position_spread() > 0
    slope = None
    adj = None
    if identified:
        y = [np.log(baseline.values), np.log(candidate.values)]
        slope = float(within_arm_slope(y, [baseline.positions, candidate.positions]))
        adj = float(
            np.median(candidate.values * np.exp(-slope * candidate.positions))
            / np.median(baseline.values * np.exp(-slope * baseline.positions))
        )
    # Draw the arms in an order fixed by their data, not their role, so that swapping baseline
    # and candidate gives the same resamples and an exactly inverted interval.
    swapped = _key(baseline) > _key(candidate)
    if baseline.n_blocks >= 2 and candidate.n_blocks >= 2:
        first, second = (candidate, baseline) if swapped else (baseline, candidate)
        draws = [_resample_hierarchical(first, n_resamples, gen), _resample_hierarchical(second, n_resamples, gen)]
        (va, pa), (vb, pb) = draws[::-1] if swapped else draws
        lo, hi = _percentile_ci(np.log(np.nanmedian(vb, axis=1) / np.nanmedian(va, axis=1)), alpha)
        alo = ahi = None
        if identified:
            g = within_arm_slope([np.log(va), np.log(vb)], [pa, pb])
            # HACK: replicates that cannot identify the slope borrow the full-data slope.
            g = np.where(np.isnan(g), slope, g)[:, None]
            adj_r = np.nanmedian(vb * np.exp(-g * pb), axis=1) / np.nanmedian(va * np.exp(-g * pa), axis=1)
            alo, ahi = _percentile_ci(np.log(adj_r), alpha)
        return RatioBootstrap(
            ratio,
            lo,
            hi,
            adj,
            alo,
            ahi,
            slope,
            "hierarchical percentile (blocks, then requests)",
            n_resamples,
            confidence,
        )
    if baseline.values.size < 2 or candidate.values.size < 2:
        raise ValueError(
            f"a ratio CI needs at least 2 runs per arm, got {baseline.values.size} and "
            f"{candidate.values.size}; measure more runs."
        )
    data = (candidate.values, baseline.values) if swapped else (baseline.values, candidate.values)
    res = stats.bootstrap(
        data,
        _log_ratio_stat,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=gen,
    )
    lo, hi = sorted(float(np.exp((-1 if swapped else 1) * q)) for q in res.confidence_interval)
    return RatioBootstrap(
        ratio, lo, hi, adj, None, None, slope, "percentile (requests, independent arms)", n_resamples, confidence
    )
