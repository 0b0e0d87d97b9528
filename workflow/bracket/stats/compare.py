"""A vs B: ratio of medians with a CI, a test, the drift, the noise band and a verdict in words.

Two gates decide, as in criterion.rs: the test must be significant (p < 1 - confidence) and the
whole CI of the ratio must lie outside the noise band [1 / (1 + band), 1 + band], where band is the
measured drift or the stated threshold, whichever is larger. Seed 000: "+0.029 % against 0.751 %
drift" is "no measurable effect".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import statsmodels.api as sm
from scipy import stats
from scipy.special import comb

from bracket.stats.bootstrap import Sample, ratio_of_medians

FASTER, SLOWER, NO_EFFECT = "faster", "slower", "no measurable effect"


@dataclass(frozen=True)
class Comparison:
    """Candidate vs baseline. Ratios are candidate / baseline of decode rate (> 1 is faster)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float | None
    test: str
    drift: float | None
    drift_per_block: float | None
    noise_band: float
    verdict: str
    drift_adjusted_ratio: float | None
    drift_adjusted_ci_low: float | None
    drift_adjusted_ci_high: float | None
    basis: str
    ci_method: str
    n_baseline: int
    n_candidate: int
    blocks_baseline: int
    blocks_candidate: int
    confidence: float
    n_resamples: int
    seed: int | None
    notes: tuple[str, ...]


def verdict(ci_low: float, ci_high: float, p_value: float | None, noise_band: float,
            alpha: float) -> str:
    """"faster" / "slower" only when p < alpha and the whole CI clears the band; else no effect.

    faster: p < alpha and ci_low > 1 + band;  slower: p < alpha and ci_high < 1 / (1 + band).
    The lower edge 1 / (1 + band) (about 1 - band) makes the rule symmetric: swapping the arms
    turns "faster" into "slower" and nothing else.
    """
    if noise_band < 0:
        raise ValueError(f"`noise_band` must be non-negative, got {noise_band!r}.")
    if p_value is None or not p_value < alpha:
        return NO_EFFECT
    if ci_low > 1 + noise_band:
        return FASTER
    if ci_high < 1 / (1 + noise_band):
        return SLOWER
    return NO_EFFECT


def rank_test(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float | None, str]:
    """Two-sided Mann-Whitney U, only when it can reach `alpha` at these sample sizes.

    The smallest attainable two-sided p is 2 / C(n_a + n_b, min(n_a, n_b)) (as asv's
    `is_different` checks); below that the test cannot decide and None is returned.
    Rank-based because speculative decoding's runs have heavy tails (seed 000: 56.63 among
    values near 65).
    """
    p_min = 2.0 / comb(a.size + b.size, min(a.size, b.size))
    if not p_min < alpha:
        return None, (f"Mann-Whitney U not run: with {a.size} and {b.size} runs its smallest p is "
                      f"{p_min:.3g}, which cannot reach {alpha:g}")
    return float(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue), "Mann-Whitney U (two-sided)"


def trend_test(base: Sample, cand: Sample) -> tuple[float, str]:
    """t-test of the arm term in OLS log(rate) = a + b [candidate] + slope * position.

    Effects on decode rate are multiplicative, so the test is on the log scale, and the position
    term removes a linear drift that would otherwise be read as an effect. Requests of one block
    share a server launch and are not independent (Kalibera & Jones), so the standard errors are
    cluster-robust by block with Student t on G - 1 degrees of freedom (G blocks); treating the
    requests as independent makes p-values absurdly small (1e-50 from 12 runs).
    """
    y = np.log(np.concatenate([base.values, cand.values]))
    X = np.column_stack([np.ones(y.size), np.r_[np.zeros(base.values.size), np.ones(cand.values.size)],
                         np.concatenate([base.positions, cand.positions])])
    groups = np.unique(np.concatenate([base.blocks.astype(str), cand.blocks.astype(str)]), return_inverse=True)[1]
    fit = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    return float(fit.pvalues[1]), "OLS t-test on log rate with a linear drift term (block-clustered SE)"


def comparison_drift(round_change_base: float | None, round_change_cand: float | None,
                     reference_change: float | None) -> float | None:
    """The measured drift that sets the noise band of one comparison.

    The larger |first round -> last round| change of the two arms (A/B/A/B: the gap between
    rounds measures drift directly); if neither arm was measured twice, the reference arm's
    first vs last block; None if nothing was measured twice.
    """
    changes = [abs(c) for c in (round_change_base, round_change_cand) if c is not None]
    if changes:
        return max(changes)
    return abs(reference_change) if reference_change is not None else None


def compare(baseline: Sample, candidate: Sample, *, drift: float | None = None,
            noise_threshold: float = 0.01, confidence: float = 0.95, n_resamples: int = 2000,
            rng: np.random.Generator | int | None = None, seed: int | None = None) -> Comparison:
    """Compare candidate with baseline.

    Parameters
    ----------
    baseline, candidate : Sample
        Valid runs with block ids and positions (see `bootstrap.Sample.of`).
    drift : float or None
        Measured drift as a log ratio (see `comparison_drift`); None if unmeasured.
    noise_threshold : float
        Smallest relative effect called real.
    confidence, n_resamples, rng
        Bootstrap settings; alpha of the test is 1 - confidence. `seed` is recorded only.

    Notes
    -----
    When positions vary within an arm the verdict uses the drift-adjusted ratio and its
    hierarchical bootstrap CI, with the OLS trend test; otherwise the raw ratio of medians with
    the Mann-Whitney U test. `basis` says which. With one block per arm nothing separates the
    arms from time, which `notes` says.

    The noise band is max(noise_threshold, measured drift) at the scale the verdict is exposed
    to. On the raw basis that is `drift`, the round-to-round change (seed 000's rule: an effect
    smaller than the gap between rounds is unmeasurable). On the drift-adjusted basis the linear
    trend has been removed, and what is left exposed is the drift between neighbouring blocks,
    |slope| per block: using the round gap there would count the drift twice and make the band
    grow with the number of arms in a round.
    """
    if noise_threshold < 0:
        raise ValueError(f"`noise_threshold` must be non-negative, got {noise_threshold!r}.")
    alpha = 1 - confidence
    boot = ratio_of_medians(baseline, candidate, confidence=confidence, n_resamples=n_resamples, rng=rng)
    notes = []
    if drift is None:
        notes.append("no arm was measured twice, so drift is unknown and the band is the stated "
                     "threshold; interleave the arms (design.kind: abab) to measure it")
    if boot.adjusted_ci_low is not None:
        p, test = trend_test(baseline, candidate)
        lo, hi, basis = boot.adjusted_ci_low, boot.adjusted_ci_high, "drift-adjusted"
        band = max(noise_threshold, abs(boot.slope))
    else:
        p, test = rank_test(baseline.values, candidate.values, alpha)
        lo, hi, basis = boot.ci_low, boot.ci_high, "raw"
        band = max(noise_threshold, abs(drift) if drift is not None and math.isfinite(drift) else 0.0)
        if baseline.n_blocks < 2 or candidate.n_blocks < 2:
            notes.append("one block per arm: time and arm are confounded; drift cannot be told "
                         "from an effect")
    return Comparison(
        ratio=boot.ratio, ci_low=boot.ci_low, ci_high=boot.ci_high, p_value=p, test=test,
        drift=drift, drift_per_block=boot.slope, noise_band=band, verdict=verdict(lo, hi, p, band, alpha),
        drift_adjusted_ratio=boot.adjusted_ratio, drift_adjusted_ci_low=boot.adjusted_ci_low,
        drift_adjusted_ci_high=boot.adjusted_ci_high, basis=basis, ci_method=boot.method,
        n_baseline=int(baseline.values.size), n_candidate=int(candidate.values.size),
        blocks_baseline=baseline.n_blocks, blocks_candidate=candidate.n_blocks,
        confidence=confidence, n_resamples=n_resamples, seed=seed, notes=tuple(notes))
