"""The design as it ran, read from the runs themselves rather than from the experiment file.

An interrupted experiment, a block that crashed part way or an adaptive design that stopped early
ran a different design from the one its YAML asks for; the article states what ran.
"""

from __future__ import annotations

import pandas as pd


def _per_block(counts: pd.Series) -> dict:
    """The most common count per (block, workload) and its range; all None without any."""
    if counts.empty:
        return {"most": None, "min": None, "max": None}
    return {"most": int(counts.mode().min()), "min": int(counts.min()), "max": int(counts.max())}


def design_ran(runs: pd.DataFrame) -> dict | None:
    """Rounds, blocks, runs per block and the arms' order, counted in the runs table (records.tidy).

    Returns None for a table without blocks (a CSV of arm / value), else {rounds (distinct rounds
    that ran), blocks (distinct blocks that ran), order (the arm of each block, by position),
    runs_per_block and warmup_runs (timed and warmup requests per block and workload: the most
    common count, with runs_per_block_min/max and warmup_runs_min/max, which differ where a block
    ran short)}. Invalid runs count: they ran.
    """
    if runs is None or runs.empty or "block" not in runs:
        return None
    r = runs[pd.to_numeric(runs["block"], errors="coerce").notna()]
    if r.empty:
        return None
    pos = "position" if "position" in r and r["position"].notna().all() else "block"
    order = r.drop_duplicates(pos).sort_values(pos)
    warm = r["warmup"].fillna(False).astype(bool) if "warmup" in r else pd.Series(False, index=r.index)
    keys = ["block", "workload"] if "workload" in r else ["block"]
    every = r.groupby(keys).size()
    timed = r[~warm].groupby(keys).size().reindex(every.index, fill_value=0)
    warmups = r[warm].groupby(keys).size().reindex(every.index, fill_value=0)
    t, w = _per_block(timed), _per_block(warmups)
    return {
        "rounds": int(r["round"].nunique()) if "round" in r and r["round"].notna().any() else None,
        "blocks": int(r["block"].nunique()),
        "order": [str(a) for a in order["arm"]],
        "runs_per_block": t["most"],
        "runs_per_block_min": t["min"],
        "runs_per_block_max": t["max"],
        "warmup_runs": w["most"],
        "warmup_runs_min": w["min"],
        "warmup_runs_max": w["max"],
    }
