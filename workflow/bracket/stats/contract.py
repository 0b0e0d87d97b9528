"""stats.json files written before the interval contract changed, read in today's contract.

Today (bracket.stats.compare.Comparison, bracket.stats.analyze): a comparison's ``ratio`` with
``ci_low`` / ``ci_high`` at ``ci_level`` is the estimate and interval the verdict rests on, and
``raw_ratio`` / ``raw_ci_*`` the fit without the drift term. Files written before issue 29 named
the verdict's interval ``verdict_ci_*`` and gave the raw fit as ``ratio`` / ``ci_*``, so a reader
of an old file taking ``ci_*`` would read the raw interval as the verdict's. Committed stats.json
files (bench/results/) are kept as they were measured; every reader that may meet one passes it
through `current` first.
"""

from __future__ import annotations

OLD = ("verdict_ci_low", "verdict_ci_high", "verdict_ci_level")


def current_comparison(c: dict) -> dict:
    """One comparison in today's contract (a copy; one already in it is returned as it is).

    Old -> new: raw_ratio, raw_ci_low, raw_ci_high <- ratio, ci_low, ci_high; ci_low, ci_high,
    ci_level <- verdict_ci_*; ratio <- drift_adjusted_ratio where the verdict rested on the
    drift-adjusted fit (`basis`). Where the old file left the verdict's interval empty beside
    "undetermined", the basis fit's CI at `confidence` takes its place (as today), except with
    fewer than two blocks per arm, where today too no interval supports a verdict.
    """
    if not any(k in c for k in OLD):
        return c
    new = {k: v for k, v in c.items() if k not in OLD}
    adjusted = c.get("basis") == "drift-adjusted" and c.get("drift_adjusted_ratio") is not None
    lo, hi, level = (c.get(k) for k in OLD)
    if lo is None and min(c.get("blocks_baseline") or 0, c.get("blocks_candidate") or 0) >= 2:
        lo, hi = (
            (c.get("drift_adjusted_ci_low"), c.get("drift_adjusted_ci_high"))
            if adjusted
            else (c.get("ci_low"), c.get("ci_high"))
        )
        level = c.get("confidence") if lo is not None else None
    new.update(
        ratio=c["drift_adjusted_ratio"] if adjusted else c.get("ratio"),
        ci_low=lo,
        ci_high=hi,
        ci_level=level,
        raw_ratio=c.get("ratio"),
        raw_ci_low=c.get("ci_low"),
        raw_ci_high=c.get("ci_high"),
    )
    return new


def _old(comps) -> bool:
    return bool(comps) and any(any(k in c for k in OLD) for c in comps)


def current(stats: dict) -> dict:
    """A whole stats.json in today's contract (a copy where anything changed): its comparisons and
    the hosts section's (each host against the first)."""
    out = stats
    if _old(stats.get("comparisons")):
        out = {**out, "comparisons": [current_comparison(c) for c in stats["comparisons"]]}
    hosts = stats.get("hosts")
    if isinstance(hosts, dict) and _old(hosts.get("comparisons")):
        out = {**out, "hosts": {**hosts, "comparisons": [current_comparison(c) for c in hosts["comparisons"]]}}
    return out
