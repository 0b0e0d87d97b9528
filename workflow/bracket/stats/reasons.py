"""How a comparison was judged, as data: its interval's method, its test, and why it is undetermined.

Each is a code from a closed set with the numbers it is about, kept in stats.json's comparisons
(`ci_method`, `test`, `undetermined`). Nothing here makes a sentence: `bracket.article.verdicts` words
them, for the article and the command line alike, as `bracket.stats.findings` does for findings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum


class CiKind(StrEnum):
    """Where a comparison's interval comes from; `ci_method.kind`."""

    BLOCK_FIT = "block_fit"  # t interval of an OLS fit on log block summaries (bracket.stats.blocks.fit)
    NO_BLOCK_DF = "no_block_df"  # the fit left no residual degree of freedom at the block level: no interval
    REQUESTS_ONLY = "requests_only"  # fewer than two blocks an arm: a bootstrap of requests, servers unmeasured
    ONE_BLOCK = "one_block"  # a cell of one block: a bootstrap of its `unit` (requests, runs), servers unmeasured
    BOOTSTRAP = "bootstrap"  # a cell without block ids: a bootstrap of its values


class Variance(StrEnum):
    """The block fit's variance; `ci_method.variance`."""

    BLOCKS = "blocks"  # the blocks' residual variance, on the blocks' degrees of freedom
    FLOORED = "floored"  # below the within-block noise, which is its floor (one block df: not pooled)
    POOLED = "pooled"  # not above the within-block noise (F test), pooled with it


class Center(StrEnum):
    """What each block is reduced to; a comparison's `block_statistic`."""

    MEDIAN = "median"  # the median of log rate
    MEAN = "mean"  # the mean of log rate: the runs took two paths inside blocks


@dataclass(frozen=True)
class CiMethod:
    """A comparison's `ci_method`: kind, and for a block fit the block summary (center), the blocks' residual
    df, the df of the t quantile, the variance and the F test's level (pool_alpha); for a bootstrap, its method
    (and for one block, the unit it resamples)."""

    kind: CiKind
    center: Center | None = None
    block_df: int | None = None
    df: float | None = None
    variance: Variance | None = None
    pool_alpha: float | None = None
    bootstrap: str | None = None
    unit: str | None = None

    def record(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SignificanceTest:
    """A comparison's `test`: a t test of the arm term on log block summaries (kind "t": with the drift term
    or not, its df, pooled or not), or none (kind "none": fewer than two blocks an arm)."""

    kind: str  # "t" or "none"
    center: Center | None = None
    drift_term: bool = False
    df: float | None = None
    pooled: bool = False

    def record(self) -> dict:
        return asdict(self)


NO_TEST = SignificanceTest("none")


class Why(StrEnum):
    """Why a comparison is undetermined; `undetermined.why`."""

    FEW_BLOCKS = "few_blocks"  # fewer than two blocks in an arm: servers' differences unmeasured
    CONFOUNDED = "confounded"  # the drift term inflates the arm's variance past CONFOUNDED_VIF
    THIN = "thin"  # too few block degrees of freedom to tell an effect from block noise
    WIDE = "wide"  # the CI neither clears the noise band nor stays within WIDE x it
    STEP = "step"  # a level step the drift line cannot see would decide otherwise (bracket.stats.steps)
    SEQUENTIAL = "sequential"  # an adaptive design's comparison its looks left undetermined
    RECORDED = "recorded"  # a stats.json written before reasons were data: its sentence as it was


class Goal(StrEnum):
    """What the rounds an undetermined comparison is told to run are planned to reach; `rounds_needed_goal`."""

    CLEAR = "clear"  # the CI clears the noise band ("faster"/"slower") for an effect of `rounds_needed_effect`
    WITHIN = "within"  # the CI stays within WIDE x band ("no measurable effect") at the effect measured


class Outcome(StrEnum):
    """What one look of an adaptive design found for one comparison (bracket.stats.sequential.judge's `outcome`)."""

    CLEARS = "clears"  # the repeated CI lies above/below the noise band: faster/slower
    EQUIVALENT = "equivalent"  # the repeated CI at the equivalence level lies within +/- margin
    NEITHER = "neither"  # neither: open, or undetermined at the last look (eq_low/eq_high where that level differs)
    STRUCTURAL = "structural"  # no interval to judge (`structural` says why)


class Structural(StrEnum):
    """Why a look had no interval to judge; a look's `structural`."""

    NO_RUNS = "no_runs"  # an arm has no valid runs on the workload yet
    FEW_BLOCKS = "few_blocks"  # fewer than two blocks per arm
    CONFOUNDED = "confounded"  # arm confounded with time (variance inflation above CONFOUNDED_VIF)
    NO_DF = "no_df"  # no block-level degrees of freedom yet
    STEP = "step"  # the blocks so far cannot tell a level step from an effect (bracket.stats.steps)


@dataclass(frozen=True)
class Undetermined:
    """A comparison's `undetermined` (None beside a verdict): why, the numbers of that reason, and the rounds
    that would decide.

    few_blocks: blocks (the fewer of the two arms': 0 or 1), arms_short (how many arms have fewer than two).
    confounded: vif. thin: blocks, df. wide: ci_low, ci_high, band, wide (the multiple of the band).
    step: at (the first schedule position after the step), q (its large-step bias in standard errors),
    ci_low, ci_high (the fit with a drift line), step_ci_low, step_ci_high (the fit with the step in its
    place), band, wide.
    sequential: status ("open" or "settled"), rounds_run, max_rounds, look (the look's own record of how it
    stood: bracket.stats.sequential.judge's record, or an older file's sentence). recorded: text.
    rounds_needed: A/B/A/B rounds at which the comparison reaches `goal` with `power` for an effect of `effect`
    (a ratio; bracket.stats.compare.plan_rounds), its CI then about +/- half_width (None: more than
    max_rounds_searched would be needed; an older file's: rounds for a CI of +/- half_width, without power);
    lower_bound: block noise unmeasured, so at least that many; rounds_now: the fewer blocks of the two arms,
    below which rounds_needed is news.
    """

    why: Why
    blocks: int | None = None
    arms_short: int | None = None
    vif: float | None = None
    df: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    band: float | None = None
    wide: float | None = None
    at: float | None = None
    q: float | None = None
    step_ci_low: float | None = None
    step_ci_high: float | None = None
    status: str | None = None
    rounds_run: int | None = None
    max_rounds: int | None = None
    look: dict | str | None = None
    text: str | None = None
    rounds_needed: int | None = None
    half_width: float | None = None
    power: float | None = None
    effect: float | None = None
    goal: Goal | None = None
    lower_bound: bool = False
    rounds_now: int | None = None
    max_rounds_searched: int | None = None

    def record(self) -> dict:
        return asdict(self)
