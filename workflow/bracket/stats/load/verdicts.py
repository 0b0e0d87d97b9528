"""Two arms at each level: the single-stream verdict machinery on the blocks' values, and the speculation gain.

Each level is a workload of its own to bracket.stats.cells.compare_arms: one value per block (the block table's
row), the block's schedule position and round, so the verdict, its t interval on log block values, the drift handling
(round changes, drift line, level steps) and the rounds needed are the ones a single stream gets. The levels of one
metric are one family: Holm's adjustment (bracket.stats.multiplicity.holm) runs across them, so a false "faster"
at any level of an A vs A comparison stays within alpha (bench/results/load_capacity.md).

Every metric is compared as a rate (higher = faster): throughput and decode rate as they are, a latency quantile
as its reciprocal (1 / p99 TTFT), so "faster" always means the candidate is better and the ratio is candidate over
baseline of the rate (for a latency, baseline latency / candidate latency).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from bracket.stats import defaults as D
from bracket.stats.cells import compare_arms
from bracket.stats.compare import Comparison
from bracket.stats.multiplicity import Family, holm

#: Metrics compared as they are (rates); every other metric (a latency) as its reciprocal.
RATES = ("throughput_tok_s", "request_rate", "decode_rate_p50", "goodput_req_s", "goodput_tok_s")


def as_rate(table: pd.DataFrame, metric: str) -> np.ndarray:
    """The metric of each block row as a rate (reciprocal of a latency)."""
    v = table[metric].to_numpy(float)
    if metric in RATES:
        return v
    with np.errstate(divide="ignore"):
        return np.where(v > 0, 1.0 / v, np.nan)


def level_frame(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The block table as bracket.stats.io's frame: one run per block, workload = the level."""
    return pd.DataFrame(
        {
            "arm": table["arm"].astype(str).to_numpy(),
            "workload": table["level"].astype(float).to_numpy(),
            "block": table["block"].to_numpy(),
            "round": pd.to_numeric(table["round"], errors="coerce").to_numpy(float),
            "position": pd.to_numeric(table["position"], errors="coerce").to_numpy(float),
            "run": 0,
            "value": as_rate(table, metric),
            "valid": table["valid"].astype(bool).to_numpy(),
        }
    ).assign(valid=lambda f: f["valid"] & np.isfinite(f["value"]) & (f["value"] > 0))


def compare_levels(
    table: pd.DataFrame,
    baseline: str,
    candidate: str,
    metric: str,
    *,
    seed: int = D.SEED,
    confidence: float = D.CONFIDENCE,
    noise_threshold: float = D.NOISE_THRESHOLD,
    adjust: bool = True,
) -> list[tuple[float, dict]]:
    """(level, Comparison as a dict) at every level both arms have two valid blocks at, sorted by level.

    With `adjust`, the comparisons with a test are Holm-adjusted as one family (their ci_* then sit at the Holm
    levels, as a single-stream comparison's do).
    """
    f = level_frame(table, metric)
    f = f[f["valid"]]
    rows = []
    for level in sorted(f["workload"].unique()):
        at = f[f["workload"] == level]
        per_arm = at["arm"].value_counts()
        if min(per_arm.get(baseline, 0), per_arm.get(candidate, 0)) < 2:  # an interval needs two blocks of each
            continue
        c = compare_arms(
            at,
            baseline,
            candidate,
            level,
            seed=seed,
            confidence=confidence,
            noise_threshold=noise_threshold,
            pool=False,
        )
        rows.append((float(level), dataclasses.asdict(c) if isinstance(c, Comparison) else dict(c)))
    if adjust and rows:
        holm([r for _, r in rows], confidence, Family.WORKLOADS)
    return rows


def gain(
    table: pd.DataFrame,
    baseline: str,
    speculative: str,
    metric: str,
    *,
    seed: int = D.SEED,
    confidence: float = D.CONFIDENCE,
    noise_threshold: float = D.NOISE_THRESHOLD,
) -> list[tuple[float, dict]]:
    """The speculation gain per level: speculative / baseline of `metric` with its interval at `confidence` (each
    level's own, not adjusted: the gain against concurrency is read as a curve, one CI per level)."""
    return compare_levels(
        table,
        baseline,
        speculative,
        metric,
        seed=seed,
        confidence=confidence,
        noise_threshold=noise_threshold,
        adjust=False,
    )
