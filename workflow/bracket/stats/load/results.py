"""The load statistics' typed results: frozen models, tuples not lists, every field described.

`LoadStats` is what bracket.stats.load.analyze.analyze_load returns; it can be attached as a `load` field of
stats.json's Stats model (bracket.stats.results).
"""

from __future__ import annotations

from bracket.stats.results.base import FrozenMap, Json, Result, field


class LoadSloResult(Result):
    """The SLO the experiment states (bracket.stats.load.slo.Slo)."""

    ttft_s: float | None = field("Limit on time to first token, seconds; null: no limit on it.")
    tpot_s: float | None = field("Limit on time per output token, seconds; null: no limit on it.")
    quantile: float = field("The quantile the capacity binds to the limits (0.99: p99 TTFT and p99 TPOT, as MLPerf).")


class LoadBlockRow(Result):
    """One block's run of one level: the values every interval rests on (bracket.stats.load.frame.block_table)."""

    arm: str = field("The arm.")
    block: int = field("The block (a fresh server).")
    level: float = field("The level: users (closed loop) or requests per second (open loop).")
    position: float | None = field("The block's place in the schedule.")
    level_position: float | None = field("The level's place inside the block (levels rotate across blocks).")
    valid: bool = field("False when the client fell behind at this level (the driver's verdict); left out then.")
    invalid_reason: Json = field("The driver's reason record when invalid, else null.")
    window_s: float = field("Length of the steady window, seconds.")
    n_steady: int = field("Requests sent and ended inside the steady window without error.")
    interpolated: int = field("Requests whose token arrivals were interpolated between first token and end.")
    values: FrozenMap[str, float | None] = field(
        "Each metric's block value (throughput_tok_s, decode_rate_p50, ttft_p99, ...); null where too few requests."
    )


class LoadInterval(Result):
    """One metric of one arm at one level: the centre and t interval over blocks (bracket.stats.load.intervals)."""

    arm: str = field("The arm.")
    level: float = field("The level.")
    metric: str = field("The metric: throughput_tok_s, request_rate, decode_rate_p50, ttft_p50 ... itl_p99, goodput_*.")
    center: float = field("Geometric mean over blocks at the arm's mean position (raw mean for goodput).")
    low: float | None = field("Lower end of the interval; null with one block.")
    high: float | None = field("Upper end of the interval; null with one block.")
    blocks: int = field("Valid blocks with a value.")
    df: float | None = field("Degrees of freedom of the t quantile.")
    scale: str = field('"log" (ratio-scale interval) or "raw" (goodput, which may be 0).')
    trend: bool = field("The drift line over schedule positions was fitted.")
    se: float | None = field("Standard error of the centre on its scale.")


class LevelStatusResult(Result):
    """A level's standing against the SLO."""

    level: float = field("The level.")
    status: str = field('"meets", "fails" or "undetermined" (an interval straddles a limit, or none exists).')
    limiting: str | None = field("The metric that fails or straddles (ttft_p99, tpot_p99), null when it meets.")


class LoadCapacityResult(Result):
    """The capacity answer of one arm (bracket.stats.load.slo.capacity)."""

    arm: str = field("The arm.")
    capacity: float | None = field("The highest level meeting the SLO; null when undetermined or none meets.")
    determined: bool = field("True when the first failing level is the one right after the last meeting one.")
    low: float | None = field("Highest level such that it and all below meet; null: none below the first meets.")
    high: float | None = field("First level above `low` that fails; null: none fails (limit beyond the levels run).")
    crossing: float | None = field("Level where the first bound metric's centre crosses its limit (log-log).")
    levels: tuple[LevelStatusResult, ...] = field("Each level's status, in increasing level.")
    monotone: bool = field("No level meets above one that fails.")


class LevelVerdict(Result):
    """Candidate against baseline at one level on one metric (bracket.stats.load.verdicts.compare_levels)."""

    baseline: str = field("The baseline arm.")
    candidate: str = field("The candidate arm.")
    level: float = field("The level.")
    metric: str = field("The metric, compared as a rate (a latency as its reciprocal: > 1 is better).")
    verdict: str = field('"faster", "slower", "no measurable effect" or "undetermined".')
    ratio: float = field("Candidate / baseline of the rate (drift-adjusted when identified).")
    ci_low: float | None = field("Lower end of the interval the verdict rests on (Holm level across levels).")
    ci_high: float | None = field("Upper end of that interval.")
    ci_level: float | None = field("Its level.")
    rounds_needed: int | None = field("A/B/A/B rounds that would decide (bracket.stats.compare.plan_rounds).")
    comparison: Json = field("The full comparison record (bracket.stats.compare.Comparison as a dict).")


class LevelGain(Result):
    """The speculation gain at one level: speculative / baseline of a rate, with its own interval."""

    baseline: str = field("The arm without speculation.")
    speculative: str = field("The arm with speculation.")
    level: float = field("The level.")
    metric: str = field('"decode_rate_p50" (per user) or "throughput_tok_s" (aggregate).')
    ratio: float = field("Speculative / baseline (drift-adjusted when identified).")
    ci_low: float | None = field("Lower end of the interval at `confidence` (not adjusted across levels).")
    ci_high: float | None = field("Upper end.")
    confidence: float = field("The interval's level.")
    verdict: str = field("The comparison's verdict at that level, unadjusted.")


class LevelCeiling(Result):
    """The batch ceiling beside the measured aggregate (bracket.stats.load.ceiling)."""

    arm: str = field("The arm.")
    level: float = field("The level (users: the batch).")
    bytes_per_step: float = field("Bytes one decode step reads at this batch.")
    step_s: float = field("Bandwidth-bound step time, seconds.")
    ceiling_tok_s: float = field("batch / step time: the aggregate decode ceiling, tokens/s.")
    measured_tok_s: float | None = field("Measured aggregate throughput (centre over blocks).")
    measured_low: float | None = field("Its interval's lower end.")
    measured_high: float | None = field("Its interval's upper end.")
    efficiency: float | None = field("measured / ceiling.")


class LoadStats(Result):
    """Everything the load statistics decided, for the article and stats.json."""

    confidence: float = field("Level of every interval not adjusted for multiplicity.")
    seed: int = field("The analysis seed.")
    quantile_method: str = field("How a block's quantile is taken (median_unbiased: Hyndman & Fan type 8).")
    min_tail: float = field("Fewest expected requests beyond a quantile, n (1 - p), for a block to have one.")
    slo: LoadSloResult | None = field("The SLO, when the experiment states one.")
    blocks: tuple[LoadBlockRow, ...] = field("Every block's run of every level: the raw values.")
    intervals: tuple[LoadInterval, ...] = field("Each arm's metrics at each level, with intervals over blocks.")
    capacity: tuple[LoadCapacityResult, ...] = field("The capacity answer of each arm (with an SLO).")
    verdicts: tuple[LevelVerdict, ...] = field("Per-level verdicts of each comparison asked for.")
    gains: tuple[LevelGain, ...] = field("Speculation gain per level of each pair asked for.")
    ceilings: tuple[LevelCeiling, ...] = field("Batch ceiling per arm and level, when bandwidth and bytes are given.")
    invalid_levels: tuple[LoadBlockRow, ...] = field("Levels left out because the client fell behind.")
