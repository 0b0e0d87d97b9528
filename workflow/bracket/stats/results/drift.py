"""stats.json's drift (per workload, and per host where several ran): how the machine moved in time
(bracket.stats.drift, bracket.stats.hosts)."""

from __future__ import annotations

from bracket.stats.results.base import FrozenMap, Result, field
from bracket.stats.results.comparisons import HostComparison
from bracket.stats.results.reasons import CiMethodOrText


class ReferenceBlocks(Result):
    """The reference's first block against its last by schedule position."""

    first_position: int = field("The first block's schedule position.")
    last_position: int = field("The last block's schedule position.")
    first_median: float | None = field("The first block's median.")
    last_median: float | None = field("The last block's median.")
    change: float = field("ln(last block median / first block median).")


class RoundChange(Result):
    """One arm's medians round by round."""

    medians: FrozenMap[int, float | None] = field("The arm's median in each round.")
    change: float | None = field("The change from the first round to the last (a fraction).")


class DriftEffect(Result):
    """An arm's drift-adjusted ratio to the reference."""

    ratio: float | None = field("The ratio, with the drift term in the fit.")
    ci_low: float | None = field("Its CI's lower end.")
    ci_high: float | None = field("Its CI's upper end.")
    p_value: float | None = field("p of no effect.")


class Drift(Result):
    """The drift of one workload (null values where the design cannot separate time from arm)."""

    reference_first_vs_last: float | None = field(
        "ln(last block median / first block median) of the reference ((last - first) / mean to third order); "
        "None with one reference block."
    )
    reference_blocks: ReferenceBlocks | None = field("Both medians and positions of that change.", default=None)
    rounds: FrozenMap[str, RoundChange] = field("Each arm's medians by round and their change.")
    slope_per_block: float | None = field(
        "OLS of log block medians on arm indicators + position: exp(slope) - 1 is the relative change per block."
    )
    slope_ci: tuple[float, float] | None = field("The slope's CI.")
    slope_p: float | None = field("The slope's p (t on the blocks' df).")
    effects: FrozenMap[str, DriftEffect] = field("Each arm's drift-adjusted ratio to the reference, with its CI.")
    ci_method: CiMethodOrText | None = field("Where the slope's interval comes from.", default=None)
    blocks: int | None = field("Blocks in the fit.", default=None)
    df: float | None = field("The fit's degrees of freedom.", default=None)
    slope_theil_sen: float | None = field("The median within-arm slope between blocks (robust).", default=None)


class DriftWorst(Result):
    """The largest |reference_first_vs_last| over the workloads (bracket.stats.drift.worst)."""

    change: float = field("The change (a log ratio).")
    workload: str = field("Its workload.")
    threshold: float = field("The noise threshold it is held against.")
    beyond: bool = field("Whether it exceeds the threshold.")


class HostDrift(Result):
    """The drift on one host and workload, time counted in that host's blocks (as `drift`)."""

    reference_first_vs_last: float | None = field("As drift's, on this host.")
    reference_blocks: ReferenceBlocks | None = field("Both medians and positions of that change.", default=None)
    rounds: FrozenMap[str, RoundChange] = field("Each arm's medians by round on this host.")
    slope_per_block: float | None = field("The slope per block on this host.")
    slope_ci: tuple[float, float] | None = field("Its CI.")
    slope_p: float | None = field("Its p.")


class Hosts(Result):
    """Hosts as a factor (bracket.stats.hosts): drift per host and each host against the first."""

    names: tuple[str, ...] = field("The hosts, in the experiment's order.")
    baseline: str = field("The first host, which the others are compared with.")
    drift: FrozenMap[str, FrozenMap[str, HostDrift]] = field("Drift per host and workload.")
    comparisons: tuple[HostComparison, ...] = field("Each host against the first, per arm and workload.")
