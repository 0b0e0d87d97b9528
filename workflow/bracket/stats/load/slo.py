"""The SLO an experiment states, goodput under it, and the capacity answer: the highest level that meets it.

An SLO is two limits and the quantile they bind (MLPerf's LLM limits bind p99 TTFT and p99 TPOT): a level meets
it when the typical server's `quantile` TTFT is at most ttft_s and its `quantile` TPOT at most tpot_s.

Each level of an arm gets a status from its intervals over blocks (bracket.stats.load.intervals) at `confidence`:

- "meets": both intervals lie wholly at or below their limits;
- "fails": either interval lies wholly above its limit;
- "undetermined": otherwise (an interval straddles its limit, or the level has no interval: fewer than two valid
  blocks, or too few requests per block for the quantile).

The capacity is read from the levels in increasing order: `low` is the highest level such that it and every level
below it meet; `high` is the first level above `low` that fails. The true crossing lies in [low, high): where
`high` is the level right after `low` the capacity is `low` (determined); where undetermined levels lie between them,
the capacity is undetermined between `low` and `high`. No level meeting: `low` is None (below the lowest level run);
no level failing above `low`: `high` is None (at least the highest level meeting, the limit not reached in the levels
run). `crossing` is the point estimate where the centres cross the limit, interpolated on log level against log
quantile between the two levels around it (the first metric to cross). bench/results/load_capacity.md measures how
often [low, high) holds the true knee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bracket.stats.load.frame import qname

MEETS, FAILS, UNDETERMINED = "meets", "fails", "undetermined"


@dataclass(frozen=True)
class Slo:
    """TTFT <= ttft_s and TPOT <= tpot_s (None: no limit on that one), each at `quantile` (0.99: MLPerf's rule) for
    capacity; goodput counts requests that met the limits themselves."""

    ttft_s: float | None
    tpot_s: float | None
    quantile: float = 0.99

    def __post_init__(self):
        limits = [x for x in (self.ttft_s, self.tpot_s) if x is not None]
        if not limits or not all(x > 0 for x in limits):
            raise ValueError(
                f"an SLO needs at least one positive limit in seconds, got ttft_s={self.ttft_s}, tpot_s={self.tpot_s}."
            )
        if not 0 < self.quantile < 1:
            raise ValueError(f"SLO quantile must lie in (0, 1), got {self.quantile}; 0.99 binds p99 as MLPerf does.")

    def metrics(self) -> tuple[tuple[str, float], ...]:
        """(block-table column, limit) of each bound quantile."""
        pairs = ((qname("ttft", self.quantile), self.ttft_s), (qname("tpot", self.quantile), self.tpot_s))
        return tuple((m, x) for m, x in pairs if x is not None)

    def met(self, ttft, tpot) -> np.ndarray:
        """Which requests met every limit (a missing TPOT, one token, meets the TPOT limit)."""
        ok = np.ones(np.shape(ttft), dtype=bool)
        if self.ttft_s is not None:
            ok &= np.asarray(ttft, dtype=float) <= self.ttft_s
        if self.tpot_s is not None:
            ok &= np.nan_to_num(np.asarray(tpot, dtype=float), nan=0.0) <= self.tpot_s
        return ok

    @classmethod
    def from_levels(cls, levels: pd.DataFrame, quantile: float = 0.99) -> Slo | None:
        """The SLO the load driver recorded on its level summaries (`slo`: {ttft_s, tpot_s}); None where none was
        stated. Two different SLOs in one analysis are refused."""
        if "slo" not in levels:
            return None
        stated = {(d.get("ttft_s"), d.get("tpot_s")) for d in levels["slo"] if isinstance(d, dict) and any(d.values())}
        if not stated:
            return None
        if len(stated) > 1:
            raise ValueError(f"the level summaries state {len(stated)} SLOs ({sorted(map(str, stated))}); analyse one.")
        ttft, tpot = stated.pop()
        return cls(ttft_s=ttft, tpot_s=tpot, quantile=quantile)


@dataclass(frozen=True)
class LevelStatus:
    level: float
    status: str
    limiting: str | None  # the metric that fails, or that straddles, first of TTFT then TPOT; None when it meets


@dataclass(frozen=True)
class Capacity:
    arm: str
    capacity: float | None  # the highest level meeting the SLO; None when undetermined or no level meets
    determined: bool
    low: float | None  # highest level with it and all below meeting; None: no level below the first meets
    high: float | None  # first level above `low` that fails; None: none fails above `low`
    crossing: float | None  # interpolated level where the first metric's centre crosses its limit
    levels: tuple[LevelStatus, ...]
    monotone: bool  # no level meets above one that fails


def level_status(intervals: pd.DataFrame, slo: Slo) -> list[LevelStatus]:
    """Each level's status for one arm, from its rows of `arm_level_intervals` (metric, level, low, high)."""
    out = []
    for level in sorted(intervals["level"].unique()):
        rows = intervals[intervals["level"] == level].set_index("metric")
        status, limiting = MEETS, None
        for metric, limit in slo.metrics():
            if metric not in rows.index or pd.isna(rows.at[metric, "low"]):
                status, limiting = (status if status == FAILS else UNDETERMINED), limiting or metric
                continue
            lo, hi = float(rows.at[metric, "low"]), float(rows.at[metric, "high"])
            if lo > limit:
                if status != FAILS:
                    limiting = metric
                status = FAILS
            elif hi > limit and status != FAILS:
                status, limiting = UNDETERMINED, limiting or metric
        out.append(LevelStatus(float(level), status, limiting))
    return out


def capacity(intervals: pd.DataFrame, slo: Slo, arm: str) -> Capacity:
    """The capacity answer for `arm` (see the module's doc) from `arm_level_intervals` rows."""
    mine = intervals[intervals["arm"] == arm]
    if mine.empty:
        raise ValueError(f"arm {arm!r} has no load intervals; arms with some: {sorted(intervals['arm'].unique())}.")
    st = level_status(mine, slo)
    low = None
    i = 0
    while i < len(st) and st[i].status == MEETS:
        low = st[i].level
        i += 1
    j = next((k for k in range(i, len(st)) if st[k].status == FAILS), None)
    high = st[j].level if j is not None else None
    determined = (i == len(st)) or (j == i)
    first_fail = next((k for k, s in enumerate(st) if s.status == FAILS), None)
    monotone = first_fail is None or all(s.status != MEETS for s in st[first_fail:])
    return Capacity(
        arm=str(arm),
        capacity=low if determined else None,
        determined=bool(determined),
        low=low,
        high=high,
        crossing=_crossing(mine, slo),
        levels=tuple(st),
        monotone=bool(monotone),
    )


def _crossing(mine: pd.DataFrame, slo: Slo) -> float | None:
    """The lowest level where a bound metric's centre reaches its limit, log-log interpolated; None if none does."""
    best = None
    for metric, limit in slo.metrics():
        r = mine[mine["metric"] == metric].sort_values("level")
        lv, c = r["level"].to_numpy(float), r["center"].to_numpy(float)
        over = np.flatnonzero(c > limit)
        if over.size == 0:
            continue
        k = int(over[0])
        if k == 0:
            x = lv[0]
        else:
            x0, x1, y0, y1 = (math.log(v) for v in (lv[k - 1], lv[k], c[k - 1], c[k]))
            x = math.exp(x0 + (math.log(limit) - y0) * (x1 - x0) / (y1 - y0))
        best = x if best is None else min(best, x)
    return best
