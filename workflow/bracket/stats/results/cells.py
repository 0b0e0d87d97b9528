"""stats.json's cells (one per arm and workload), their levels of variance, and the best arm of each workload."""

from __future__ import annotations

from bracket.stats.levels import Advice
from bracket.stats.results.base import Result, field
from bracket.stats.results.findings import FindingRecord
from bracket.stats.results.reasons import CiMethodOrText, UndeterminedOrText


class Modes(Result):
    """Both modes of a bimodal cell or comparison side (bracket.stats.modes.Modes)."""

    low_median: float = field("The lower mode's median (tokens/s).")
    high_median: float = field("The upper mode's median (tokens/s).")
    low_n: int = field("Runs (or blocks) in the lower mode.")
    high_n: int = field("Runs (or blocks) in the upper mode.")
    ashman_d: float = field("Ashman's D of the split on log rates.")
    threshold: float = field("The D a split must exceed at this size (simulated).")
    where: str = field('Where the modes live: "within blocks", "across blocks" or "unknown blocks".')


class Cell(Result):
    """One arm on one workload: the valid runs' median and the interval around it (bracket.stats.summary)."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    n: int = field("Valid timed runs.")
    median: float = field("The median of the runs' decode_tok_s.")
    ci_low: float | None = field(
        "Lower end of the CI: a block-level t interval around `center` (the mean log block median) with two "
        "blocks or more, else a percentile bootstrap of the requests (`ci_method` says which)."
    )
    ci_high: float | None = field("Upper end of the CI (as ci_low).")
    min: float = field("The slowest run.")
    max: float = field("The fastest run.")
    spread: float = field("(max - min) / median.")
    mean: float = field("The runs' mean.")
    std: float | None = field("The runs' standard deviation (None with one run).")
    outliers: tuple[int, ...] = field("Indices of runs beyond the modified z limit: flagged, kept.")
    runs_needed: int | None = field(
        "Runs to pin the median to +/- noise_threshold; only when spread > spread_warning, else None."
    )
    warnings: tuple[FindingRecord | str, ...] = field(
        "What to do about this cell (findings; an older file's sentences as they were)."
    )
    confidence: float = field("The CI level.")
    n_resamples: int = field("Bootstrap replicates (0 where no bootstrap was drawn).")
    ci_method: CiMethodOrText | None = field("Where the CI comes from (bracket.stats.reasons.CiMethod).", default=None)
    seed: int | None = field("The seed of this cell's bootstrap stream (from the analysis seed and its names).")
    blocks: int | None = field("Blocks with a valid run.", default=None)
    center: float | None = field("exp(mean log block median): the estimate the block-level CI is around.", default=None)
    modes: Modes | None = field("Both modes of a bimodal cell (bracket.stats.modes), else None.", default=None)
    method: str | None = field("An older file's sentence for its interval, before ci_method.", default=None)


class Levels(Result):
    """Between- and within-block variance of one cell (bracket.stats.levels; Kalibera & Jones)."""

    arm: str = field("The arm.")
    workload: str = field("The workload.")
    block_cost_runs: float = field("What one more block costs, in run lengths (warmup runs + cooldown).")
    blocks: int = field("Blocks with valid runs.")
    runs_per_block: float = field("Mean valid runs per block.")
    between_block_var: float = field("Between-block variance of log(rate).")
    within_block_var: float = field("Within-block variance of log(rate).")
    between_share: float = field("The between-block share of the variance.")
    best_runs_per_block: int | None = field("The cost-optimal runs per block (None: undefined).")
    advice: Advice | str = field("What to change (bracket.stats.levels.Advice, worded by bracket.article.advice).")


class Best(Result):
    """The arm with the highest median on one workload, and what to run there."""

    arm: str = field("The arm with the highest median.")
    median: float = field("Its median.")
    n: int = field("Its valid runs.")
    min: float = field("Its slowest run.")
    max: float = field("Its fastest run.")
    use: str = field("The arm to run: the fastest only when it is the reference or shown faster.")
    use_because: str = field('Why: "reference fastest", "shown faster" or "not shown" (bracket.stats.best.recommend).')
    ratio_to_reference: float | None = field(
        "The estimate its comparison's CI is centred on (raw or drift-adjusted, from block medians); the ratio "
        "of medians where it has no comparison."
    )
    ratio_of_medians: float | None = field("Its median over the reference's, kept apart.", default=None)
    ci_low: float | None = field("Lower end of the CI its verdict rests on (multiplicity-adjusted).")
    ci_high: float | None = field("Upper end of that CI.")
    ci_level: float | None = field("That CI's level.", default=None)
    ci_basis: str | None = field("The fit that CI comes from (its comparison's `basis`).", default=None)
    picked_from: int | None = field("How many arms it was picked from (None in an older file).", default=None)
    verdict: str | None = field("Its comparison's verdict (None for the reference itself).")
    undetermined: UndeterminedOrText | None = field("Why its comparison is undetermined, else None.", default=None)
    undetermined_reason: str | None = field("An older file's sentence, before `undetermined`.", default=None)
