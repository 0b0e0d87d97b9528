"""stats.json's comparisons (each arm against the reference, per workload), their multiplicity, the adaptive
design's looks and the conservatism of their intervals (bracket.stats.compare, .multiplicity, .sequential)."""

from __future__ import annotations

from bracket.stats.reasons import Center, Goal
from bracket.stats.results.base import FrozenMap, Json, Result, field
from bracket.stats.results.cells import Modes
from bracket.stats.results.findings import FindingRecord
from bracket.stats.results.reasons import CiMethodOrText, SignificanceTest, UndeterminedOrText


class ComparisonMultiplicity(Result):
    """The family a comparison's interval and adjusted p-value are drawn in."""

    method: str = field('"holm", "none" or "group_sequential" (bracket.stats.sequential.METHOD).')
    comparisons: int = field("The family's size.")
    family: str = field("The family (a bracket.stats.multiplicity.Family code).")
    level: float | None = field("The level the comparison's interval is drawn at.")
    alpha_share: float | None = field("An adaptive design's alpha share of this comparison.", default=None)


class Flatness(Result):
    """The runs' spread within blocks against one path's (bracket.stats.modes.Flatness)."""

    kurtosis: float = field("The pooled within-block residuals' kurtosis.")
    threshold: float = field("Its 5 % quantile for normal runs in blocks of these sizes (simulated).")
    df: int = field("Degrees of freedom of the residuals.")
    level: float = field("The test's level.")
    flat: bool = field("Flatter than one path: block means of log rate are taken.")


class StepFit(Result):
    """A fit with a level step in place of the drift line (bracket.stats.steps.StepFit)."""

    at: float = field("The first schedule position after the step.")
    estimate: float = field("The log ratio with the step in place.")
    se: float | None = field("Its standard error.")
    df: float = field("Its degrees of freedom.")
    q: float | None = field("The step's large-step bias in standard errors.")


class SequentialState(Result):
    """Where an adaptive design's looks left a comparison."""

    status: str = field('"open" or "settled".')
    settled_round: int | None = field("The round it settled at (None: open).")
    look: Json = field(
        "The look its verdict or state rests on (bracket.stats.sequential.judge's record).", default=None
    )
    how: str | None = field("An older file's sentence for the look.", default=None)


class Comparison(Result):
    """One arm against the reference on one workload, the block the unit (bracket.stats.compare.Comparison).

    ratio with ci_low/ci_high at ci_level is the estimate and CI the verdict rests on (the `basis` fit, at the
    level multiplicity or the adaptive design's boundary leaves it); raw_ratio with raw_ci_* is the fit without
    the drift term; drift_adjusted_ratio with its CI the fit with arm + position (both unadjusted)."""

    workload: str = field("The workload.")
    baseline: str = field("The reference arm (or, in `hosts`, the first host).")
    candidate: str = field("The arm (or, in `hosts`, the host) compared with it.")
    ratio: float | None = field("candidate / baseline: the estimate the verdict rests on.")
    ci_low: float | None = field(
        "Lower end of the CI the verdict rests on; beside 'undetermined' without one the basis CI at "
        "`confidence`; None with fewer than two blocks per arm."
    )
    ci_high: float | None = field("Upper end of that CI.")
    p_value: float | None = field("p of no effect.")
    test: SignificanceTest | str = field("The test, as data (bracket.stats.reasons.SignificanceTest).")
    drift: float | None = field("The reference's drift the band was widened by.")
    drift_per_block: float | None = field("The fitted drift per block (a fraction).")
    noise_band: float = field("The noise band a verdict must clear (a fraction).")
    verdict: str = field('"faster", "slower", "no measurable effect" or "undetermined".')
    drift_adjusted_ratio: float | None = field("The fit with arm + position (unadjusted).")
    drift_adjusted_ci_low: float | None = field("Its CI's lower end.")
    drift_adjusted_ci_high: float | None = field("Its CI's upper end.")
    basis: str = field('The fit the verdict rests on ("raw" or "drift-adjusted").')
    ci_method: CiMethodOrText = field("Where the interval comes from (bracket.stats.reasons.CiMethod).")
    n_baseline: int = field("The baseline's valid runs.")
    n_candidate: int = field("The candidate's valid runs.")
    blocks_baseline: int = field("The baseline's blocks.")
    blocks_candidate: int = field("The candidate's blocks.")
    confidence: float = field("The analysis' CI level.")
    n_resamples: int = field("Bootstrap replicates.")
    seed: int | None = field("The seed of this comparison's bootstrap stream.")
    notes: tuple[FindingRecord | str, ...] = field("Remarks besides the verdict (findings).")
    ratio_of_medians: float | None = field("The ratio of the pooled requests' medians.", default=None)
    p_beyond_band: float | None = field("p that the effect lies outside the noise band.", default=None)
    p_adjusted: float | None = field("p_beyond_band adjusted for multiplicity (Holm).", default=None)
    multiplicity: ComparisonMultiplicity | None = field("The family it is judged in.", default=None)
    ci_level: float | None = field("The level of ci_low/ci_high.", default=None)
    raw_ratio: float | None = field("The raw fit: OLS on log block medians, arm only (unadjusted).", default=None)
    raw_ci_low: float | None = field("The raw fit's CI, lower end (t on the blocks' df).", default=None)
    raw_ci_high: float | None = field("The raw fit's CI, upper end.", default=None)
    undetermined: UndeterminedOrText | None = field("Why no verdict (None beside a verdict).", default=None)
    rounds_needed: int | None = field("A/B/A/B rounds at which it reaches rounds_needed_goal.", default=None)
    rounds_needed_for: float | None = field("The CI half-width (a fraction) at rounds_needed.", default=None)
    rounds_needed_power: float | None = field("The power rounds_needed is planned for.", default=None)
    rounds_needed_effect: float | None = field("The true ratio rounds_needed is planned for.", default=None)
    rounds_needed_goal: Goal | None = field("What rounds_needed reaches (bracket.stats.reasons.Goal).", default=None)
    estimate: float | None = field("The basis fit's log ratio.", default=None)
    se: float | None = field("Its standard error.", default=None)
    df: float | None = field("Its degrees of freedom.", default=None)
    pooled: bool | None = field("Whether block and request noise were pooled.", default=None)
    block_var: float | None = field("Variance of a block median: the between-block residual.", default=None)
    within_var: float | None = field("... and from within-block noise alone.", default=None)
    thin: UndeterminedOrText | None = field(
        "Too few block df: undetermined unless the CI clears the band.", default=None
    )
    vif: float | None = field("Variance inflation of the arm by the drift term (confounding).", default=None)
    modes: FrozenMap[str, Modes] | None = field(
        "{baseline/candidate: both modes} where a side is bimodal.", default=None
    )
    block_statistic: Center | str | None = field(
        'What each block is reduced to: "median" or "mean" of log rate (an older file\'s words, as recorded).',
        default=None,
    )
    steps: tuple[StepFit, ...] | None = field("Fits with a level step where the design cannot see one.", default=None)
    flatness: Flatness | None = field("The runs' spread within blocks against one path's.", default=None)
    sequential: SequentialState | None = field("An adaptive design's state of this comparison.", default=None)
    thin_reason: str | None = field("An older file's sentence, before `thin`.", default=None)
    undetermined_reason: str | None = field("An older file's sentence, before `undetermined`.", default=None)


class HostComparison(Comparison):
    """One host against the first, for one arm and workload (bracket.stats.hosts)."""

    arm: str = field("The arm both hosts ran.")


class Multiplicity(Result):
    """The family of comparisons the verdicts are adjusted over."""

    method: str = field('"holm", "none" (one comparison) or "group_sequential" (an adaptive design).')
    comparisons: int = field("The family's size.")
    family: str = field("The family (a bracket.stats.multiplicity.Family code).")
    confidence: float = field("The family's confidence.")
    untested: int | None = field("Comparisons without a test, left out of the family.", default=None)


class UndeterminedRow(Result):
    """An undetermined comparison, and the rounds that would decide it."""

    workload: str = field("The workload.")
    candidate: str = field("The arm.")
    reason: UndeterminedOrText | None = field("Its `undetermined` record.")
    rounds_needed: int | None = field("A/B/A/B rounds that would decide it.")
    rounds_needed_for: float | None = field("The CI half-width there (a fraction).")


class Conservatism(Result):
    """Where the comparisons' intervals get their width against an oracle's that knew the noise
    (bracket.stats.conservatism.summary); each factor a [min, max] over the comparisons."""

    comparisons: int = field("Comparisons with a block-level fit.")
    threshold: float = field("The noise threshold.")
    df: tuple[float, ...] = field("The fits' degrees of freedom [min, max].")
    df_factor: tuple[float, ...] = field("t on the fit's df over z [min, max].")
    level: tuple[float, ...] = field("The level the intervals are drawn at [min, max].")
    level_factor: tuple[float, ...] = field("That level's quantile over the confidence's [min, max].")
    drift_factor: tuple[float, ...] | None = field("sqrt of the arm's variance inflation by the drift term.")
    drift_fits: int = field("Fits with a drift term.")
    pooled: int = field("Fits whose variance was pooled with request noise.")
    floored: int = field("Fits whose variance was floored at request noise.")
    runs_per_block: tuple[float, ...] = field("Runs per block [min, max].")
    median_factor: tuple[float, ...] | None = field("(pi / 2) over n times a median's variance at n runs.")
    band_raised: int = field("Noise bands raised above `threshold` by fitted drift.")
    band_max: float | None = field("The largest band so raised.")
    total: tuple[float, ...] = field("df x level x drift factors [min, max].")


class LookRound(Result):
    """One look of an adaptive design: after a round."""

    round: int = field("The round after which it looked.")
    blocks: int = field("Blocks run by then.")
    level: float | None = field("The level spent at this look.")
    open: int = field("Comparisons still open after it.")


class SequentialComparison(Result):
    """One comparison across an adaptive design's looks."""

    workload: str = field("The workload.")
    candidate: str = field("The arm.")
    baseline: str = field("The reference.")
    status: str = field('"open" or "settled".')
    verdict: str | None = field("Its verdict (None while open).")
    settled_round: int | None = field("The round it settled at.")
    look: Json = field(
        "The look its verdict or state rests on (bracket.stats.sequential.judge's record).", default=None
    )
    rci_low: float | None = field("That look's repeated CI, lower end.")
    rci_high: float | None = field("That look's repeated CI, upper end.")
    nominal_level: float | None = field("That CI's nominal level.")
    level: float | None = field("The alpha spent on it there.")
    looks: tuple[Json, ...] = field("Every look's record.")
    how: str | None = field("An older file's sentence for the look.", default=None)


class Sequential(Result):
    """An adaptive design's looks (bracket.stats.sequential.assess): repeated CIs after every round."""

    rule: str | None = field("An older file's sentence for the stopping rule.", default=None)
    alpha: float = field("The family's alpha.")
    family: int = field("Comparisons in the family.")
    recycled: int = field("Comparisons whose alpha passed to the others.")
    min_rounds: int = field("The first round looked at, at the earliest.")
    first_look: int | None = field("The first round judged.", default=None)
    max_rounds: int = field("The last round.")
    margin: float | None = field("The equivalence margin (None: WIDE x each comparison's noise band).")
    spending: str = field("The alpha-spending function.")
    looks: tuple[LookRound, ...] = field("Every look.")
    comparisons: tuple[SequentialComparison, ...] = field("Every comparison across the looks.")
    rounds_run: int = field("Rounds run.")
    another_round: bool = field("Whether another round should run.")
    next_round: int | None = field("The round to run next (None: none).")
