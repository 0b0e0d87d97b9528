"""The best arm of each workload, and what to run there (stats.json's `best`)."""

from __future__ import annotations

import pandas as pd

from bracket.typed.experiment import Experiment


def workload_order(experiment: Experiment | None, runs: pd.DataFrame) -> list[str]:
    """Workloads in the experiment's order, then any others the runs name, sorted (the article's order)."""
    found = set(runs["workload"].astype(str)) if "workload" in runs else set()
    seen = [w for w in (experiment.workloads if experiment is not None else {}) if w in found]
    return seen + sorted(found - set(seen))


def recommend(fastest: str, verdict: str | None, reference: str) -> tuple[str, str]:
    """What to run on a workload: the fastest arm only when it is the reference or shown faster.

    Returns (arm, because): "reference fastest", "shown faster", or "not shown" (the fastest
    median's advantage did not survive its verdict: keep the reference until more runs settle it).
    """
    if fastest == reference:
        return reference, "reference fastest"
    if verdict == "faster":
        return fastest, "shown faster"
    return reference, "not shown"


def best(cells: list[dict], comparisons: list[dict], medians: dict, reference: str) -> dict:
    """Per workload: the arm with the highest median, its comparison's verdict and the CI that verdict rests on,
    and the recommendation (`recommend`).

    The fastest of k arms was picked after looking: its CI is the multiplicity-adjusted one its verdict rests on
    (Holm over every comparison), not the unadjusted raw CI; the ratio quoted beside it is the estimate that CI is
    centred on (raw or drift-adjusted, from block medians), not the ratio of the two arms' run medians, which is
    kept apart (ratio_of_medians)."""
    out = {}
    for wl in sorted({c["workload"] for c in cells}):
        here = [c for c in cells if c["workload"] == wl]
        top = max(here, key=lambda c: c["median"])
        ref = medians.get((reference, wl))
        comp = next((c for c in comparisons if c["workload"] == wl and c["candidate"] == top["arm"]), None)
        of_medians = top["median"] / ref if ref else None
        use, why = recommend(top["arm"], comp["verdict"] if comp else None, reference)
        out[wl] = {
            "arm": top["arm"],
            "median": top["median"],
            "n": top["n"],
            "min": top["min"],
            "use": use,
            "use_because": why,
            "max": top["max"],
            "ratio_to_reference": comp["ratio"] if comp else of_medians,
            "ratio_of_medians": of_medians,
            "ci_low": comp["ci_low"] if comp else None,
            "ci_high": comp["ci_high"] if comp else None,
            "ci_level": comp["ci_level"] if comp else None,
            "ci_basis": comp["basis"] if comp else None,
            "picked_from": len(here),
            "verdict": comp["verdict"] if comp else None,
            "undetermined": comp["undetermined"] if comp else None,
        }
    return out
