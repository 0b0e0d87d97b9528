"""The reference against the ceiling: how close it came, what that says, and how flat it stayed across workloads.

Seed 000 reads a decode rate near the ceiling as bandwidth-bound (the clock mostly measures the
weight read), and a rate that stays flat while the work changes as more evidence of it: compute-
bound throughput moves with the work, a rate set by the weight read does not. These are the
judgements; the article only words them (bracket.article.ceiling).
"""

from __future__ import annotations

import statistics

#: At or above this share of the ceiling a rate is bandwidth-bound.
BANDWIDTH_BOUND = 0.7
#: Below this share the time goes mostly to something other than reading weights.
FAR_BELOW = 0.3
#: Workload medians that differ by less than this (max - min over their median) are flat.
FLAT = 0.05


def regime(efficiency: float) -> str:
    """What a share of the ceiling says: "above the ceiling" (> 1: more than one token per weight read),
    "bandwidth-bound" (>= BANDWIDTH_BOUND), "partly bandwidth-bound" (>= FAR_BELOW) or "far below"."""
    if efficiency > 1:
        return "above the ceiling"
    if efficiency >= BANDWIDTH_BOUND:
        return "bandwidth-bound"
    if efficiency >= FAR_BELOW:
        return "partly bandwidth-bound"
    return "far below"


def spread(medians: list[float]) -> float | None:
    """(max - min) / median of the workloads' medians; None with fewer than two."""
    if len(medians) < 2:
        return None
    return (max(medians) - min(medians)) / statistics.median(medians)


def reference_reading(efficiency: list[dict], reference: str, workloads: list[str]) -> dict | None:
    """The reference's efficiency rows (bracket.physics.ceiling.measured's `efficiency`) read as one.

    Returns None without a row of the reference, else {workloads: [{workload, median, efficiency}]
    in `workloads`' order, median and efficiency (the median over workloads), regime (`regime` of
    that efficiency), spread (`spread` of the medians; None with one workload), flat (spread <
    FLAT; None with one workload), flat_below (FLAT)}.
    """
    order = {w: i for i, w in enumerate(workloads)}
    rows = sorted(
        (r for r in efficiency if r["arm"] == reference and r["workload"] in order), key=lambda r: order[r["workload"]]
    )
    if not rows:
        return None
    meds = [float(r["median"]) for r in rows]
    eff = float(statistics.median(float(r["efficiency"]) for r in rows))
    sp = spread(meds)
    return {
        "workloads": [
            {"workload": r["workload"], "median": float(r["median"]), "efficiency": float(r["efficiency"])}
            for r in rows
        ],
        "median": float(statistics.median(meds)),
        "efficiency": eff,
        "regime": regime(eff),
        "spread": sp,
        "flat": None if sp is None else sp < FLAT,
        "flat_below": FLAT,
    }


def above_ceiling(efficiency: list[dict]) -> list[dict]:
    """The rows of arms without speculation above the plain ceiling: impossible, so the byte account
    or the bandwidth is wrong."""
    return [{"arm": r["arm"], "workload": r["workload"]} for r in efficiency if r["efficiency"] > 1]
