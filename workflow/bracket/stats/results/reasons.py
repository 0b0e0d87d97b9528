"""How a comparison or a cell was judged, as stats.json keeps it: the records of bracket.stats.reasons.

bracket.stats.reasons makes them (dataclasses with `record()`); these are their typed, frozen readings. A file
from before reasons were data keeps its sentence, a string, where a record now stands.
"""

from __future__ import annotations

from bracket.stats.reasons import Center, CiKind, Goal, Variance, Why
from bracket.stats.results.base import Json, Result, field


class CiMethod(Result):
    """Where an interval comes from (bracket.stats.reasons.CiMethod): kind, and for a block fit the block summary,
    the blocks' residual df, the t quantile's df, the variance and the F test's level; for a bootstrap its
    method and unit."""

    kind: CiKind = field("Where the interval comes from (bracket.stats.reasons.CiKind).")
    center: Center | None = field("What each block is reduced to (a block fit), else None.", default=None)
    block_df: int | None = field("The block fit's residual degrees of freedom.", default=None)
    df: float | None = field("The degrees of freedom of the t quantile.", default=None)
    variance: Variance | None = field("The block fit's variance (bracket.stats.reasons.Variance).", default=None)
    pool_alpha: float | None = field("The level of the F test that pools block and request noise.", default=None)
    bootstrap: str | None = field("The bootstrap's method, for an interval from a bootstrap.", default=None)
    unit: str | None = field("What a one-block bootstrap resamples (requests, runs).", default=None)


class SignificanceTest(Result):
    """A comparison's test (bracket.stats.reasons.SignificanceTest): a t test of the arm term on log block
    summaries, or none with fewer than two blocks an arm."""

    kind: str = field('"t" (a t test of the arm term) or "none" (fewer than two blocks an arm).')
    center: Center | None = field("What each block is reduced to.", default=None)
    drift_term: bool = field("Whether the fit has a drift term (arm + position).", default=False)
    df: float | None = field("The test's degrees of freedom.", default=None)
    pooled: bool = field("Whether block and request noise were pooled (F test).", default=False)


class Undetermined(Result):
    """Why a comparison has no verdict (bracket.stats.reasons.Undetermined): a Why code, the numbers of that
    reason, and the A/B/A/B rounds that would decide."""

    why: Why = field("Why the comparison is undetermined (bracket.stats.reasons.Why).")
    blocks: int | None = field("few_blocks: the fewer blocks of the two arms (0 or 1); thin: blocks.", default=None)
    arms_short: int | None = field("few_blocks: how many arms have fewer than two blocks.", default=None)
    vif: float | None = field("confounded: the arm's variance inflation by the drift term.", default=None)
    df: float | None = field("thin: the block fit's degrees of freedom.", default=None)
    ci_low: float | None = field("wide, step: the interval's lower end (the fit with a drift line).", default=None)
    ci_high: float | None = field("wide, step: the interval's upper end.", default=None)
    band: float | None = field("wide, step: the noise band (a fraction).", default=None)
    wide: float | None = field("wide, step: the multiple of the band the interval may span.", default=None)
    at: float | None = field("step: the first schedule position after the level step.", default=None)
    q: float | None = field("step: the step's large-step bias in standard errors.", default=None)
    step_ci_low: float | None = field("step: the fit with the step in place of the line, lower end.", default=None)
    step_ci_high: float | None = field("step: the fit with the step in place of the line, upper end.", default=None)
    status: str | None = field('sequential: "open" or "settled".', default=None)
    rounds_run: int | None = field("sequential: rounds run.", default=None)
    max_rounds: int | None = field("sequential: the design's last round.", default=None)
    look: Json = field("sequential: the look's record (bracket.stats.sequential.judge), or a sentence.", default=None)
    text: str | None = field("recorded: an older file's sentence, as it was.", default=None)
    rounds_needed: int | None = field(
        "A/B/A/B rounds at which the comparison reaches `goal` with `power` for an effect of `effect` (None: more "
        "than max_rounds_searched).",
        default=None,
    )
    half_width: float | None = field("The CI half-width (a fraction) at rounds_needed.", default=None)
    power: float | None = field("The power rounds_needed is planned for.", default=None)
    effect: float | None = field("The true ratio rounds_needed is planned for.", default=None)
    goal: Goal | None = field("What rounds_needed is planned to reach (bracket.stats.reasons.Goal).", default=None)
    lower_bound: bool = field("Block noise unmeasured, so rounds_needed is a lower bound.", default=False)
    rounds_now: int | None = field("The fewer blocks of the two arms, below which rounds_needed is news.", default=None)
    max_rounds_searched: int | None = field("The most rounds the plan searched.", default=None)


#: A record, or an older file's sentence as it was recorded (each presenter in bracket.article takes it as one).
CiMethodOrText = CiMethod | str
UndeterminedOrText = Undetermined | str
