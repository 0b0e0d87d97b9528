"""Per-cell summaries: median with a CI, range, spread, outliers, modes and what to do about them.

A cell is one arm on one workload. Seed 000's round three is the model: ten raw values, their
median, range and spread, and a warning when the spread is too wide for the run count.

With two blocks or more the CI of the cell's median is block-level (bracket.stats.blocks: the
mean of log block medians with a t interval on blocks - 1 df, pooled with the within-block noise
when blocks agree); with one block it is a percentile bootstrap of the requests, which covers
request noise only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from bracket.stats import blocks as bl
from bracket.stats import defaults as D
from bracket.stats import findings as F
from bracket.stats._seeds import as_generator
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K
from bracket.stats.modes import bimodal
from bracket.stats.reasons import CiKind, CiMethod

#: Modified z-score above which a value is flagged (Iglewicz & Hoaglin 1993); never dropped.
OUTLIER_Z = 3.5
#: Spread above which seed 000 says five runs will not pin a median.
SPREAD_WARNING = 0.15


@dataclass(frozen=True)
class CellSummary:
    """Summary of one cell's valid runs. Ratios are fractions (0.195 means 19.5 %)."""

    n: int
    median: float
    ci_low: float | None
    ci_high: float | None
    min: float
    max: float
    spread: float
    mean: float
    std: float | None
    outliers: tuple[int, ...]
    runs_needed: int | None
    warnings: tuple[Finding, ...] = field(default=())  # what to do about this cell (bracket.stats.findings)
    confidence: float = D.CONFIDENCE
    n_resamples: int = 0
    ci_method: dict | None = None  # where the CI comes from (bracket.stats.reasons.CiMethod's record)
    seed: int | None = None
    blocks: int | None = None
    center: float | None = None  # exp(mean log block median): the estimate the block-level CI is around
    modes: dict | None = None  # both modes of a bimodal cell (bracket.stats.modes), else None


def _values_iv(values) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"`values` must be one-dimensional, got shape {x.shape}.")
    if x.size == 0:
        raise ValueError(
            "`values` is empty: the cell has no valid runs. Check the invalid reasons in "
            "runs.csv (warmup, cache hit, early stop, error)."
        )
    if not np.all(np.isfinite(x)):
        bad = x[~np.isfinite(x)][:3]
        raise ValueError(f"`values` contains non-finite numbers ({bad.tolist()}); drop or fix those rows.")
    if np.any(x <= 0):
        raise ValueError(f"`values` must be positive rates, got {x[x <= 0][:3].tolist()}.")
    return x


def _confidence_iv(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"`confidence` must lie strictly between 0 and 1, got {confidence!r}.")
    return float(confidence)


def spread(values) -> float:
    """Spread of a cell: (max - min) / median.

    Seed 000: ten runs of DFlash2 at draft budget 12 ranged 56.63-69.30 around a median of 65.02,
    a spread of 19.5 %; without speculation the spread was 0.67 %.
    """
    x = _values_iv(values)
    return float((x.max() - x.min()) / np.median(x))


def median_ci(
    values,
    *,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    rng: np.random.Generator | int | None = None,
) -> tuple[float | None, float | None]:
    """Bootstrap confidence interval of the median (scipy.stats.bootstrap, percentile method).

    Notes
    -----
    The percentile method is used, not BCa: the bootstrap distribution of a median of a few runs
    sits on a handful of order statistics, and BCa's jackknife acceleration is then unstable or
    degenerate (scipy returns NaN with a warning on tied values). In a simulation of lognormal runs
    (bench/design_efficiency.py) the percentile interval covers the true median at close to its
    nominal level from ten runs on. Fewer than two distinct values give no interval (None).

    References
    ----------
    Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13.
    """
    x = _values_iv(values)
    confidence = _confidence_iv(confidence)
    if n_resamples < 100:
        raise ValueError(f"`n_resamples` must be at least 100, got {n_resamples}.")
    if x.size < 2 or np.ptp(x) == 0:
        return (None, None) if x.size < 2 else (float(x[0]), float(x[0]))
    res = stats.bootstrap(
        (x,),
        np.median,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=as_generator(rng),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def robust_sigma(values) -> float:
    """Normal-consistent scale: 1.4826 x median absolute deviation (scipy.stats.median_abs_deviation)."""
    return float(stats.median_abs_deviation(_values_iv(values), scale="normal"))


def runs_needed(values, *, precision: float, confidence: float = D.CONFIDENCE) -> int:
    """Runs that would pin the median to within +/- `precision` (relative) at `confidence`.

    n = (z * 1.2533 * sigma / (precision * median))^2, from the asymptotic standard error of the
    median, 1.2533 sigma / sqrt(n) (normal data; sigma estimated robustly as 1.4826 MAD, falling
    back to the standard deviation when MAD is zero). An estimate to plan the next run, not a
    guarantee: it assumes runs are independent and the spread seen so far is representative.
    """
    x = _values_iv(values)
    if not precision > 0:
        raise ValueError(f"`precision` must be positive, got {precision!r}.")
    z = stats.norm.ppf(0.5 + _confidence_iv(confidence) / 2)
    sigma = robust_sigma(x) or (float(np.std(x, ddof=1)) if x.size > 1 else 0.0)
    n = (z * math.sqrt(math.pi / 2) * sigma / (precision * float(np.median(x)))) ** 2
    return max(int(math.ceil(n)), 1)


def outliers(values, *, threshold: float = OUTLIER_Z) -> tuple[int, ...]:
    """Indices of values whose modified z-score |x - median| / (1.4826 MAD) exceeds `threshold`.

    Iglewicz & Hoaglin (1993) recommend 3.5. A zero MAD (most values tied) flags nothing, as in
    hyperfine. Outliers are reported, never removed.
    """
    x = _values_iv(values)
    sigma = robust_sigma(x)
    if sigma == 0:
        return ()
    z = np.abs(x - np.median(x)) / sigma
    return tuple(int(i) for i in np.flatnonzero(z > threshold))


def summarize(
    values,
    *,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    rng: np.random.Generator | int | None = None,
    spread_warning: float = SPREAD_WARNING,
    precision: float = D.NOISE_THRESHOLD,
    seed: int | None = None,
    blocks=None,
    pool: bool = True,
    unit: str = "requests",
) -> CellSummary:
    """Summarize one cell: n, median + bootstrap CI, min, max, spread, mean, std and warnings.

    Parameters
    ----------
    values : array_like
        The cell's valid decode rates (tokens/s), one per request.
    confidence, n_resamples, rng
        Passed to :func:`median_ci`. `seed` is only recorded (pass the int used to make `rng`).
    spread_warning : float
        Spread above which the run count is said not to pin the median (seed 000: 0.15).
    precision : float
        Relative half-width the median should be pinned to when estimating `runs_needed`.
    blocks : array_like, optional
        Block id of each value. With two blocks or more the CI is block-level (module docstring).
    pool : bool
        Pool block and within-block noise when blocks agree (False: textbook block-level t).
    unit : str
        What one value is, for the method's wording ("requests"; an imported llama-benchy cell above
        concurrency 1 gives one value per run: "runs").

    Returns
    -------
    CellSummary
        `runs_needed` is None unless the spread exceeds `spread_warning`.
    """
    x = _values_iv(values)
    med = float(np.median(x))
    n_blocks = center = None
    ci_method = CiMethod(CiKind.BOOTSTRAP, bootstrap="percentile")
    if blocks is not None:
        b = np.asarray(blocks)
        if b.shape != x.shape:
            raise ValueError(f"`blocks` has {b.size} entries for {x.size} values; give one block id per value.")
        n_blocks = int(np.unique(b).size)
    if n_blocks is not None and n_blocks >= 2:
        tb = bl.block_table(x, b)
        f = bl.fit(tb, np.ones((len(tb), 1)), 0, pool=pool)
        center = float(np.exp(f.estimate))
        lo, hi = (float(np.exp(e)) for e in f.ci(confidence))
        ci_method = f.ci_method
    else:
        lo, hi = median_ci(x, confidence=confidence, n_resamples=n_resamples, rng=rng)
        if n_blocks == 1:
            ci_method = CiMethod(CiKind.ONE_BLOCK, bootstrap="percentile", unit=unit)
    sp = float((x.max() - x.min()) / med)
    two = bimodal(x, None if blocks is None else np.asarray(blocks))
    if two is None:
        out = outliers(x)
    else:  # a whole mode is not a set of outliers: flag only within each mode
        cut = (two.low_median * two.high_median) ** 0.5
        out = tuple(
            sorted(
                int(i)
                for part in (np.flatnonzero(x < cut), np.flatnonzero(x >= cut))
                if part.size >= 3
                for i in part[list(outliers(x[part]))]
            )
        )
    need = runs_needed(x, precision=precision, confidence=confidence) if sp > spread_warning else None
    warns = []
    if x.size < 5:
        warns.append(Finding(K.FEW_RUNS, F.FewRuns(n=int(x.size))))
    if need is not None:
        warns.append(
            Finding(
                K.WIDE_SPREAD,
                F.WideSpread(
                    spread=float(sp), threshold=spread_warning, n=int(x.size), runs_needed=need, precision=precision
                ),
            )
        )
    if two is not None:
        warns.append(
            Finding(
                K.TWO_MODES,
                F.TwoModes(
                    where=two.where,
                    low_n=int(two.low_n),
                    low_median=float(two.low_median),
                    high_n=int(two.high_n),
                    high_median=float(two.high_median),
                ),
            )
        )
    if out:
        warns.append(Finding(K.OUTLIERS, F.Outliers(values=tuple(float(x[i]) for i in out), z=OUTLIER_Z)))
    return CellSummary(
        n=int(x.size),
        median=med,
        ci_low=lo,
        ci_high=hi,
        min=float(x.min()),
        max=float(x.max()),
        spread=sp,
        mean=float(x.mean()),
        std=float(np.std(x, ddof=1)) if x.size > 1 else None,
        outliers=out,
        runs_needed=need,
        warnings=tuple(warns),
        confidence=confidence,
        n_resamples=n_resamples,
        ci_method=ci_method.record(),
        seed=seed,
        blocks=n_blocks,
        center=center,
        modes=None if two is None else dataclasses.asdict(two),
    )
