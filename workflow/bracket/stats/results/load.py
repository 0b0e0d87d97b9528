"""The load statistics of one load workload as stats.json holds them: bracket.stats.load.results.LoadStats with the
workload's name (a Stats holds one per load workload, `Stats.load`)."""

from __future__ import annotations

from bracket.stats.load.results import LoadStats
from bracket.stats.results.base import field


class WorkloadLoad(LoadStats):
    """One load workload's statistics (bracket.stats.load.analyze.analyze_load) and what it compared."""

    workload: str = field("The load workload's name (workloads.NAME in the experiment).")
    level_kind: str = field('"users" (closed loop: concurrent users) or "rate" (open loop: requests per second).')
    reference: str = field("The arm every other arm is compared with at each level (the experiment's reference).")
    speculative_arms: tuple[str, ...] = field("Arms with speculative settings: each has a gain over the reference.")
