"""A vs B: the ratio with a block-level CI, a test, the drift, the noise band and a verdict in words.

The block is the unit (bracket.stats.blocks): each block is reduced to its median, and the arm
effect is the coefficient of an OLS fit on log block medians, with a t interval on the blocks'
degrees of freedom (pooled with the within-block noise only when blocks agree).

Two gates decide, as in criterion.rs: the effect must be significant and the whole CI of the
ratio must lie outside the noise band [1 / (1 + band), 1 + band], where band is the measured
drift or the stated threshold, whichever is larger. Both gates are one test here: the p-value of
"the effect lies inside the band" (`p_beyond_band`), which is below alpha exactly when the CI
clears the band. Seed 000: "+0.029 % against 0.751 % drift" is "no measurable effect".

When the data cannot support a verdict (one block per arm, arms confounded with time, no
degrees of freedom left for block noise), the verdict is "undetermined", with the reason and the
rounds that would support one, never "faster" or "slower".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bracket.stats import blocks as bl
from bracket.stats import defaults as D
from bracket.stats.bootstrap import Sample, ratio_of_medians
from bracket.stats.findings import ComparisonModes, Finding
from bracket.stats.findings import FindingKind as K
from bracket.stats.modes import bimodal, flat_within
from bracket.stats.reasons import NO_TEST, Center, CiKind, CiMethod, Goal, SignificanceTest, Undetermined, Why
from bracket.stats.rounds import (  # noqa: F401  (the plan's names, where their readers import them)
    MAX_ROUNDS,
    PLAN_NOISE,
    PLAN_POWER,
    WIDE,
    RoundsPlan,
    abab_variance_factor,
    plan_fields,
    plan_rounds,
    power_at,
    rounds_needed,
    with_rounds,
)
from bracket.stats.steps import StepFit, exposures

FASTER, SLOWER, NO_EFFECT, UNDETERMINED = "faster", "slower", "no measurable effect", "undetermined"
#: Variance inflation of the arm effect by the drift term above which arm and time are confounded
#: (sequential A A B B gives 5; A/B/A/B gives 1.25 at 2 rounds and approaches 1).
CONFOUNDED_VIF = 4.0


@dataclass(frozen=True)
class Comparison:
    """Candidate vs baseline. Ratios are candidate / baseline of decode rate (> 1 is faster).

    One contract for every reader (JSON, CSV, table): ``ci_low`` / ``ci_high`` at ``ci_level`` are
    the interval the verdict rests on (the `basis` fit, at the level multiplicity or the adaptive
    design's boundary leaves it), and ``ratio`` is its centre. Beside "undetermined" with no
    interval of its own they are the basis CI at `confidence`; with one block per arm, where no
    interval can support a verdict, they are None (raw_ci_* then hold the request-level
    bootstrap, which covers request noise only). raw_ratio, raw_ci_low, raw_ci_high: the raw fit (exp of the arm
    coefficient on log block medians, no drift term) at `confidence`, unadjusted.
    drift_adjusted_*: the fit with a linear drift term (position), when identified, at `confidence`.
    """

    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    test: dict  # bracket.stats.reasons.SignificanceTest as a record
    drift: float | None
    drift_per_block: float | None
    noise_band: float
    verdict: str
    drift_adjusted_ratio: float | None
    drift_adjusted_ci_low: float | None
    drift_adjusted_ci_high: float | None
    basis: str
    ci_method: dict  # bracket.stats.reasons.CiMethod as a record
    n_baseline: int
    n_candidate: int
    blocks_baseline: int
    blocks_candidate: int
    confidence: float
    n_resamples: int
    seed: int | None
    notes: tuple[Finding, ...]  # remarks besides the verdict (bracket.stats.findings); the undetermined reason apart
    ratio_of_medians: float = math.nan
    p_beyond_band: float | None = None
    p_adjusted: float | None = None
    multiplicity: dict | None = None
    ci_level: float | None = None
    raw_ratio: float | None = None
    raw_ci_low: float | None = None
    raw_ci_high: float | None = None
    undetermined: dict | None = None  # why no verdict: bracket.stats.reasons.Undetermined as a record
    rounds_needed: int | None = None  # A/B/A/B rounds of the plan (`plan_rounds`)
    rounds_needed_for: float | None = None  # the CI half-width (a fraction) rounds_needed would give
    rounds_needed_power: float | None = None  # the power it is planned for ...
    rounds_needed_effect: float | None = None  # ... at this true ratio ...
    rounds_needed_goal: Goal | None = None  # ... to reach this (bracket.stats.reasons.Goal)
    estimate: float | None = None  # log ratio on the basis
    se: float | None = None
    df: float | None = None
    pooled: bool | None = None
    block_var: float | None = None  # variance of a block median: between-block residual
    within_var: float | None = None  # ... and from within-block noise alone
    thin: dict | None = None  # too few block df (an Undetermined record): undetermined unless the CI clears the band
    vif: float | None = None  # variance inflation of the arm by the drift term (confounding)
    modes: dict | None = None  # {"baseline"/"candidate": bracket.stats.modes.Modes as a dict} when bimodal
    block_statistic: Center | None = None  # what each block is reduced to
    steps: tuple[dict, ...] | None = None  # fits with a level step in place of the drift line (bracket.stats.steps)
    flatness: dict | None = None  # the runs' spread within blocks against one path's (bracket.stats.modes.Flatness)


def verdict(ci_low: float, ci_high: float, p_value: float | None, noise_band: float, alpha: float) -> str:
    """ "faster" / "slower" only when p < alpha and the whole CI clears the band; else no effect.

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


def comparison_drift(
    round_change_base: float | None, round_change_cand: float | None, reference_change: float | None
) -> float | None:
    """The measured drift that sets the noise band of one comparison on the raw basis.

    The larger |first round -> last round| change of the two arms (A/B/A/B: the gap between
    rounds measures drift directly); if neither arm was measured twice, the reference arm's
    first vs last block; None if nothing was measured twice.
    """
    changes = [abs(c) for c in (round_change_base, round_change_cand) if c is not None]
    if changes:
        return max(changes)
    return abs(reference_change) if reference_change is not None else None


def _design(tb: pd.DataFrame, arm: np.ndarray, trend: bool) -> np.ndarray:
    cols = [np.ones(arm.size), arm]
    if trend:
        cols.append(tb["position"].to_numpy(float))
    return np.column_stack(cols)


def clears(lo: float, hi: float, band: float) -> str | None:
    """FASTER / SLOWER when the ratio interval [lo, hi] lies wholly outside the band, else None."""
    if lo > 1 + band:
        return FASTER
    if hi < 1 / (1 + band):
        return SLOWER
    return None


def decide(
    estimate: float | None,
    se: float | None,
    df: float | None,
    band: float,
    level: float,
    structural: object | None,
    thin: object | None,
) -> tuple[str, float | None, float | None]:
    """The verdict and the ratio CI at `level` it rests on.

    `structural` (one block per arm, confounded with time) makes it undetermined whatever the
    data; `thin` (too few degrees of freedom to estimate block noise) only when the CI does not
    clear the band, since a valid t interval that clears it is evidence at any size.
    """
    if structural or estimate is None or se is None or not df:
        return UNDETERMINED, None, None
    q = stats.t.ppf(0.5 + level / 2, df)
    lo, hi = math.exp(estimate - q * se), math.exp(estimate + q * se)
    v = clears(lo, hi, band)
    if v:
        return v, lo, hi
    return (UNDETERMINED if thin or too_wide(lo, hi, band) else NO_EFFECT), lo, hi


def step_decide(
    v: str, lo: float | None, hi: float | None, steps, band: float, level: float
) -> tuple[str, float | None, float | None, Undetermined | None]:
    """The verdict `v` on the drift line's interval [lo, hi], checked against the fits with a level step in its
    place (`steps`: bracket.stats.steps.StepFit or their records) at the same level.

    The interval becomes the union of theirs: "faster"/"slower" stands where the union clears the band on the
    same side, "no measurable effect" where it stays within WIDE x band; otherwise undetermined, with the step
    whose fit decides otherwise (Why.STEP). The verdict, the union and that reason (None where the verdict
    stands or was undetermined already)."""
    if not steps or lo is None or hi is None:
        return v, lo, hi, None
    fits = [StepFit(**f) if isinstance(f, dict) else f for f in steps]
    cis = [f.ci(level) for f in fits]
    if any(ci is None for ci in cis):
        lows, highs = [0.0], [math.inf]
    else:
        lows, highs = [math.exp(ci[0]) for ci in cis], [math.exp(ci[1]) for ci in cis]
    lo_u, hi_u = min([lo, *lows]), max([hi, *highs])
    u = clears(lo_u, hi_u, band)
    if u:
        return u, lo_u, hi_u, None
    if v in (FASTER, SLOWER) or (v == NO_EFFECT and too_wide(lo_u, hi_u, band)):
        # the step whose interval reaches furthest from the line's
        j = max(range(len(fits)), key=lambda i: max(lo - lows[i], highs[i] - hi))
        f = fits[j]
        return (
            UNDETERMINED,
            lo_u,
            hi_u,
            Undetermined(
                Why.STEP,
                at=f.at,
                q=f.q,
                ci_low=float(lo),
                ci_high=float(hi),
                step_ci_low=float(lows[j]),
                step_ci_high=float(highs[j]) if math.isfinite(highs[j]) else None,
                band=float(band),
                wide=WIDE,
            ),
        )
    return v, lo_u, hi_u, None


def too_wide(lo: float, hi: float, band: float) -> bool:
    """The CI reaches past WIDE x the band on either side: an effect that large is still in it.

    "No measurable effect" then would read as evidence of absence (a CI of 1.03-1.92 beside an
    8% band does not rule out +90%); it is "undetermined" instead. "No measurable effect" thus
    means the CI rules out effects beyond WIDE x band both ways.
    """
    return lo < 1 / (1 + WIDE * band) or hi > 1 + WIDE * band


def compare(
    baseline: Sample,
    candidate: Sample,
    *,
    drift: float | None = None,
    noise_threshold: float = D.NOISE_THRESHOLD,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    rng: np.random.Generator | int | None = None,
    seed: int | None = None,
    pool: bool = True,
) -> Comparison:
    """Compare candidate with baseline, the block as the unit.

    Parameters
    ----------
    baseline, candidate : Sample
        Valid runs with block ids and positions (see `bootstrap.Sample.of`). Block ids are taken
        per arm: the same id in both arms names two different blocks.
    drift : float or None
        Measured drift as a log ratio (see `comparison_drift`); sets the band on the raw basis.
    noise_threshold : float
        Smallest relative effect called real.
    confidence : float
        CI level; alpha of the test is 1 - confidence.
    n_resamples, rng
        Used only with one block per arm, for the request-level CI shown beside "undetermined".
    pool : bool
        Pool block-level and within-block noise when blocks agree (bracket.stats.blocks);
        False gives the textbook block-level analysis.

    Notes
    -----
    With two blocks or more per arm the ratio and its CI come from OLS on log block medians:
    raw (arm only, t with blocks - 2 df) and, when positions vary within an arm, drift-adjusted
    (arm + position, blocks - 3 df); the verdict rests on the adjusted one when it exists
    (`basis`). The noise band is max(noise_threshold, measured drift) at the scale the verdict is
    exposed to: on the raw basis the round-to-round change (seed 000's rule), on the adjusted
    basis |drift per block| (the linear trend itself has been removed).

    Undetermined: one block in either arm (block noise unmeasured, arm confounded with time);
    arm confounded with the drift term (variance inflation above CONFOUNDED_VIF, as in a
    sequential design); or one residual degree of freedom without pooling and a CI that does
    not clear the band. `rounds_needed` then says how many A/B/A/B rounds would give a CI of
    +/- max(noise_threshold, |effect| - band), from the block variance measured here.

    The steps: `_counts` (what both paths state), `_one_block_per_arm` (no block-level fit), `_fit_blocks`
    (the block table and its raw and drift-adjusted fits), `_band` (the basis and its noise band),
    `_judge` (the verdict, its interval and the level-step check), `_remarks` (notes), `_assemble`.
    """
    if noise_threshold < 0:
        raise ValueError(f"`noise_threshold` must be non-negative, got {noise_threshold!r}.")
    common = _counts(baseline, candidate, confidence, n_resamples, seed)
    if baseline.n_blocks < 2 or candidate.n_blocks < 2:
        return _one_block_per_arm(baseline, candidate, drift, noise_threshold, confidence, n_resamples, rng, common)
    fits = _fit_blocks(baseline, candidate, pool)
    notes: list[Finding] = []
    basis, band = _band(fits, drift, noise_threshold, notes)
    judged = _judge(fits, band, confidence, pool)
    basis_fit = fits.basis_fit
    block_var = max(basis_fit.between_var or 0.0, basis_fit.within_var or 0.0)
    plan = plan_rounds(block_var, basis_fit.estimate, band, confidence, var_df=basis_fit.df)
    reason = None
    if judged.verdict == UNDETERMINED:
        # kept in `undetermined` alone: notes are the other remarks, so nothing is said twice
        why = judged.structural or judged.step_reason or judged.thin or wide_reason(judged.lo, judged.hi, band)
        reason = with_rounds(why, plan, min(baseline.n_blocks, candidate.n_blocks)).record()
    notes += _remarks(fits)
    return _assemble(fits, judged, basis, band, drift, confidence, tuple(notes), reason, plan, common)


def _counts(baseline: Sample, candidate: Sample, confidence: float, n_resamples: int, seed: int | None) -> dict:
    """The fields every comparison states the same way: its runs, blocks, level, resamples, seed and the
    ratio of the two arms' medians."""
    return dict(
        n_baseline=int(baseline.values.size),
        n_candidate=int(candidate.values.size),
        blocks_baseline=baseline.n_blocks,
        blocks_candidate=candidate.n_blocks,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ratio_of_medians=float(np.median(candidate.values) / np.median(baseline.values)),
    )


def _raw_band(drift: float | None, noise_threshold: float) -> float:
    return max(noise_threshold, abs(drift) if drift is not None and math.isfinite(drift) else 0.0)


def _one_block_per_arm(
    baseline: Sample,
    candidate: Sample,
    drift: float | None,
    noise_threshold: float,
    confidence: float,
    n_resamples: int,
    rng,
    common: dict,
) -> Comparison:
    """One block in an arm: block noise unmeasured, so undetermined, with the request-level bootstrap CI beside it
    and the rounds planned from the within-block noise (a floor of the block variance)."""
    rom = common["ratio_of_medians"]
    n_b, n_c = baseline.n_blocks, candidate.n_blocks
    boot = ratio_of_medians(baseline, candidate, confidence=confidence, n_resamples=n_resamples, rng=rng)
    tb_b = bl.block_table(baseline.values, baseline.blocks)
    tb_c = bl.block_table(candidate.values, candidate.blocks)
    w, _ = bl.within_variance(pd.concat([tb_b, tb_c], ignore_index=True))
    floor = bl.median_variance(w, np.r_[tb_b["n"], tb_c["n"]]) if w else 0.0
    band = _raw_band(drift, noise_threshold)
    plan = plan_rounds(floor, math.log(rom), band, confidence)
    plan = dataclasses.replace(plan, rounds=max(plan.rounds or 3, 3))
    reason = dataclasses.replace(
        with_rounds(
            Undetermined(Why.FEW_BLOCKS, blocks=min(n_b, n_c), arms_short=2 if max(n_b, n_c) < 2 else 1),
            plan,
            min(n_b, n_c),
        ),
        lower_bound=True,
    )
    # No interval supports a verdict here: ci_* stay empty; the request-level CI is the raw one.
    return Comparison(
        ratio=rom,
        ci_low=None,
        ci_high=None,
        ci_level=None,
        raw_ratio=rom,
        raw_ci_low=boot.ci_low,
        raw_ci_high=boot.ci_high,
        p_value=None,
        test=NO_TEST.record(),
        drift=drift,
        drift_per_block=None,
        noise_band=band,
        verdict=UNDETERMINED,
        drift_adjusted_ratio=None,
        drift_adjusted_ci_low=None,
        drift_adjusted_ci_high=None,
        basis="raw",
        ci_method=CiMethod(CiKind.REQUESTS_ONLY, bootstrap=boot.method).record(),
        notes=(),
        undetermined=reason.record(),
        **plan_fields(plan),
        within_var=floor or None,
        **common,
    )


@dataclass(frozen=True)
class _Fits:
    """Both arms' blocks in one table (block `b*` baseline, `c*` candidate) and the fits on them."""

    tb: pd.DataFrame
    arm: np.ndarray  # 1.0 for the candidate's blocks
    pos: np.ndarray  # each block's position in the run order
    within: tuple  # bracket.stats.blocks.within_variance of the table
    modes: dict  # per side, bracket.stats.modes.Modes where its runs take two paths
    flat: object | None  # bracket.stats.modes.Flatness
    two_paths: bool  # blocks reduced to means (runs on two paths inside blocks)
    raw: bl.BlockFit  # arm only
    adj: bl.BlockFit | None  # arm + position, where positions vary within an arm
    slope: float | None  # the drift per block of the adjusted fit

    @property
    def basis_fit(self) -> bl.BlockFit:
        return self.adj if self.adj is not None else self.raw


def _fit_blocks(baseline: Sample, candidate: Sample, pool: bool) -> _Fits:
    """The block table (medians, or means where runs take two paths) and its raw and drift-adjusted fits."""
    modes = {
        name: m
        for name, s in (("baseline", baseline), ("candidate", candidate))
        if (m := bimodal(s.values, s.blocks)) is not None
    }
    keys = np.r_[[f"b{x}" for x in baseline.blocks], [f"c{x}" for x in candidate.blocks]]
    # Two paths too close for `bimodal` at a few runs a block still make medians jump: runs spread flatter
    # within blocks than one normal path lets them (issue 43) take the block means too.
    flat = flat_within(np.r_[baseline.values, candidate.values], keys)
    two_paths = any(m.where == "within blocks" for m in modes.values()) or bool(flat and flat.flat)
    tb = bl.block_table(
        np.r_[baseline.values, candidate.values],
        keys,
        np.r_[baseline.positions, candidate.positions],
        center="mean" if two_paths else "median",
    )
    arm = np.array([k.startswith("c") for k in tb["block"]], dtype=float)
    # Runs on two paths inside blocks: block medians jump between the paths with the mix (false verdicts
    # 9-14 % when blocks agree closely, issue 29), and the MAD sees one path only. Block means of log rate
    # move with the mix smoothly, and the sample variance within blocks (both paths) is what they vary by.
    within = bl.within_variance(tb)
    raw = bl.fit(tb, _design(tb, arm, False), 1, pool=pool, within=within)
    pos = tb["position"].to_numpy(float)
    trend_ok = not np.isnan(pos).any() and any(np.unique(pos[arm == a]).size >= 2 for a in (0.0, 1.0))
    adj = bl.fit(tb, _design(tb, arm, True), 1, pool=pool, within=within) if trend_ok else None
    slope = None
    if adj is not None:
        X = _design(tb, arm, True)
        slope = float((np.linalg.pinv(X) @ tb["ym"].to_numpy(float))[2])
    return _Fits(tb, arm, pos, within, modes, flat, two_paths, raw, adj, slope)


def _band(fits: _Fits, drift: float | None, noise_threshold: float, notes: list) -> tuple[str, float]:
    """The basis the verdict rests on and its noise band: |drift per block| on the drift-adjusted fit, the
    measured drift on the raw one (noted where none was measured)."""
    if fits.adj is not None:
        return "drift-adjusted", max(noise_threshold, abs(fits.slope))
    if drift is None:
        notes.append(Finding(K.DRIFT_UNKNOWN))
    return "raw", _raw_band(drift, noise_threshold)


@dataclass(frozen=True)
class _Judged:
    """The verdict, the ratio interval it rests on, and what it weighed."""

    verdict: str
    lo: float | None
    hi: float | None
    p_band: float | None  # p of "the effect lies inside the band", the step fits' included
    steps: tuple[StepFit, ...] | None
    structural: Undetermined | None
    thin: Undetermined | None
    step_reason: Undetermined | None


def _judge(fits: _Fits, band: float, confidence: float, pool: bool) -> _Judged:
    """The verdict on the basis fit (`decide`), then checked against a level step in place of the drift line."""
    basis_fit = fits.basis_fit
    structural = thin = None
    if basis_fit.vif > CONFOUNDED_VIF:
        structural = Undetermined(Why.CONFOUNDED, vif=float(basis_fit.vif))
    elif basis_fit.df < 2:
        thin = Undetermined(Why.THIN, blocks=int(basis_fit.blocks), df=float(basis_fit.df))
    band_log = (-math.log(1 + band), math.log(1 + band))
    p_band = basis_fit.p_beyond(*band_log)
    v, lo, hi = decide(basis_fit.estimate, basis_fit.se, basis_fit.df, band, confidence, structural, thin)
    steps = None
    if fits.adj is not None and not structural:
        # a level step the drift line would take for a slope while it moves the arm (bracket.stats.steps)
        step_fits = [
            (e, bl.fit(fits.tb, _step_design(fits.arm, fits.pos, e.at), 1, pool=pool, within=fits.within))
            for e in exposures(fits.pos, fits.arm)
        ]
        steps = tuple(StepFit(e.at, f.estimate, f.se, f.df, e.q) for e, f in step_fits)
        ps = [f.p_beyond(*band_log) for _, f in step_fits]
        if p_band is not None and ps:
            p_band = max([p_band] + [1.0 if p is None else p for p in ps])
    step_reason = None
    if steps:
        v, lo, hi, step_reason = step_decide(v, lo, hi, steps, band, confidence)
    return _Judged(v, lo, hi, p_band, steps, structural, thin, step_reason)


def _remarks(fits: _Fits) -> list[Finding]:
    """The notes beside the verdict: noise pooled, and each side whose runs take two paths."""
    notes = [Finding(K.POOLED)] if fits.basis_fit.pooled else []
    for name, m in fits.modes.items():
        notes.append(
            Finding(
                K.COMPARISON_MODES,
                ComparisonModes(
                    side=name,
                    where=m.where,
                    low_n=int(m.low_n),
                    low_median=float(m.low_median),
                    high_n=int(m.high_n),
                    high_median=float(m.high_median),
                    block_means=fits.two_paths,
                ),
            )
        )
    return notes


def _assemble(
    fits: _Fits,
    judged: _Judged,
    basis: str,
    band: float,
    drift: float | None,
    confidence: float,
    notes: tuple[Finding, ...],
    reason: dict | None,
    plan: RoundsPlan,
    common: dict,
) -> Comparison:
    """The Comparison of a block-level fit: the verdict's interval (the basis CI beside "undetermined" with no
    interval of its own), the raw and drift-adjusted fits, and what the verdict weighed."""
    raw, adj, basis_fit = fits.raw, fits.adj, fits.basis_fit
    raw_ci = raw.ci(confidence)
    adj_ci = adj.ci(confidence) if adj is not None else None
    basis_ci = adj_ci if adj is not None else raw_ci
    vlo, vhi = judged.lo, judged.hi
    if vlo is None and basis_ci is not None:  # undetermined with no interval of its own: the basis CI beside it
        vlo, vhi = math.exp(basis_ci[0]), math.exp(basis_ci[1])
    test = SignificanceTest(
        "t",
        basis_fit.ci_method.center,
        drift_term=adj is not None,
        df=float(basis_fit.df),
        pooled=bool(basis_fit.pooled),
    ).record()
    return Comparison(
        ratio=math.exp(basis_fit.estimate),
        ci_low=vlo,
        ci_high=vhi,
        ci_level=confidence if vlo is not None else None,
        raw_ratio=math.exp(raw.estimate),
        raw_ci_low=math.exp(raw_ci[0]) if raw_ci else None,
        raw_ci_high=math.exp(raw_ci[1]) if raw_ci else None,
        p_value=basis_fit.p_value(),
        test=test,
        drift=drift,
        drift_per_block=fits.slope,
        noise_band=band,
        verdict=judged.verdict,
        drift_adjusted_ratio=math.exp(adj.estimate) if adj is not None else None,
        drift_adjusted_ci_low=math.exp(adj_ci[0]) if adj_ci else None,
        drift_adjusted_ci_high=math.exp(adj_ci[1]) if adj_ci else None,
        basis=basis,
        ci_method=basis_fit.ci_method.record(),
        notes=notes,
        p_beyond_band=judged.p_band,
        p_adjusted=judged.p_band,
        multiplicity={"method": "none", "comparisons": 1},
        undetermined=reason,
        **plan_fields(plan),
        estimate=basis_fit.estimate,
        se=basis_fit.se,
        df=basis_fit.df,
        pooled=basis_fit.pooled,
        block_var=basis_fit.between_var,
        within_var=basis_fit.within_var,
        thin=judged.thin.record() if judged.thin else None,
        vif=basis_fit.vif,
        modes={k: dataclasses.asdict(m) for k, m in fits.modes.items()} or None,
        block_statistic=Center.MEAN if fits.two_paths else Center.MEDIAN,
        steps=tuple(f.record() for f in judged.steps) if judged.steps else None,
        flatness=dataclasses.asdict(fits.flat) if fits.flat else None,
        **common,
    )


def _step_design(arm: np.ndarray, pos: np.ndarray, at: float) -> np.ndarray:
    return np.column_stack([np.ones(arm.size), arm, (pos >= at).astype(float)])


def wide_reason(lo: float, hi: float, band: float) -> Undetermined:
    """The CI neither clears the band nor stays within WIDE x it: too few blocks for their noise."""
    return Undetermined(Why.WIDE, ci_low=float(lo), ci_high=float(hi), band=float(band), wide=WIDE)
