"""Drift: the same configuration measured at two times, and the time trend fitted with the arms.

Three views, as in DESIGN.md's definition:

- reference first vs last: the reference arm's first and last blocks (bracket design);
- rounds: each arm's first round vs its last round (A/B/A/B);
- trend: OLS of log block medians on arm and schedule position, giving the drift per block and
  the drift-adjusted effect of every arm, with t intervals on the blocks' degrees of freedom,
  and a Theil-Sen slope within arms (bracket.stats.blocks).

Changes are log ratios, ln(later / earlier). For small changes the log ratio equals the change
relative to the mean of the two, (later - earlier) / ((later + earlier) / 2), to third order, is
symmetric (swapping the two flips only the sign) and adds up along a trend. Seed 000's "drift
1.307 %" between REF_A 35.70 and REF_B 36.17 is this quantity: ln(36.17 / 35.70) = 1.308 %,
while the change relative to the first, (36.17 - 35.70) / 35.70, is 1.317 %.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bracket.stats import blocks as bl
from bracket.stats import defaults as D


def log_change(earlier, later) -> float:
    """ln(median(later) / median(earlier)); scalars are taken as one-value samples."""
    a = np.atleast_1d(np.asarray(earlier, dtype=float))
    b = np.atleast_1d(np.asarray(later, dtype=float))
    if a.size == 0 or b.size == 0:
        raise ValueError("log_change needs at least one value on each side.")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("log_change needs positive rates.")
    return float(np.log(np.median(b) / np.median(a)))


def _check_frame(df: pd.DataFrame, needed: tuple[str, ...]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"the runs table lacks column(s) {missing}; it has {list(df.columns)}.")


def first_vs_last(df: pd.DataFrame, arm: str) -> dict | None:
    """The arm's first block vs its last block by schedule position (None if it has one block).

    Returns {"first_position", "last_position", "first_median", "last_median", "change"}.
    """
    _check_frame(df, ("arm", "position", "value"))
    mine = df["arm"].to_numpy() == arm
    position = pd.to_numeric(df["position"], errors="coerce").to_numpy(dtype=float)[mine]
    values = pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=float)[mine]
    positions = np.unique(position[~np.isnan(position)])
    if len(positions) < 2:
        return None
    first = values[position == positions[0]]
    last = values[position == positions[-1]]
    return {
        "first_position": int(positions[0]),
        "last_position": int(positions[-1]),
        "first_median": _skipna_median(first),
        "last_median": _skipna_median(last),
        "change": log_change(first, last),
    }


def _skipna_median(values: np.ndarray) -> float:
    """pandas' Series.median: NaN skipped, NaN when nothing is left."""
    kept = values[~np.isnan(values)]
    return float(np.median(kept)) if kept.size else float("nan")


def round_changes(df: pd.DataFrame) -> dict:
    """Per arm: median of each round and the change from its first round to its last.

    Returns {arm: {"medians": {round: median}, "change": float | None}}.
    """
    _check_frame(df, ("arm", "round", "value"))
    # NumPy on the columns rather than two levels of groupby: the same groups (NaN rounds left out, as groupby
    # does) and the same medians (NaN values skipped, as pandas' median does), a tenth of the time.
    arms = df["arm"].to_numpy()
    rounds = pd.to_numeric(df["round"], errors="coerce").to_numpy(dtype=float)
    values = pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=float)
    out = {}
    for arm in sorted(pd.unique(arms[pd.notna(arms)])):
        mine = arms == arm
        ids = np.unique(rounds[mine & ~np.isnan(rounds)])
        per = {r: values[mine & (rounds == r)] for r in ids}
        medians = {int(r): _skipna_median(v) for r, v in per.items()}
        change = log_change(per[ids[0]], per[ids[-1]]) if len(ids) >= 2 else None
        out[str(arm)] = {"medians": medians, "change": change}
    return out


@dataclass(frozen=True)
class Trend:
    """Block-level fit of log(block median) = a_arm + slope * position + u_block."""

    slope: float
    slope_ci: tuple[float, float] | None
    slope_p: float | None
    effects: dict  # arm -> {"ratio", "ci_low", "ci_high", "p_value"} relative to the reference
    n: int
    ci_method: dict  # the slope's interval method (bracket.stats.reasons.CiMethod's record)
    blocks: int = 0
    df: float = 0.0
    slope_theil_sen: float | None = None


def trend(df: pd.DataFrame, reference: str, *, confidence: float = D.CONFIDENCE) -> Trend | None:
    """Fit log block medians on arm indicators and schedule position, the block as the unit.

    log(median_j) = a + sum_k b_k [arm_j = k] + slope * position_j + u_j,  k != reference

    One row per block (arm, block): its median, so one wild request cannot move the fit.
    `slope` is the drift per block (exp(slope) - 1 is the relative change per block) with a t
    interval on blocks - parameters degrees of freedom (pooled with the within-block noise when
    blocks agree; bracket.stats.blocks), the calibrated small-sample test. exp(b_k) is arm k's
    drift-adjusted ratio to the reference. `slope_theil_sen` is the median of the slopes between
    blocks of the same arm, which one wild block cannot move either.

    Returns None when position does not vary within any arm (the slope is confounded with the
    arms, as in a design with one block per arm).
    """
    _check_frame(df, ("arm", "position", "value"))
    d = df.dropna(subset=["position", "value"]).copy()
    if d.empty or reference not in set(d["arm"]):
        return None
    if "block" not in d or d["block"].isna().any():
        d["block"] = d["position"]
    within = d.groupby("arm")["position"].nunique()
    if not (within >= 2).any():
        return None
    d["key"] = d["arm"].astype(str) + "|" + d["block"].astype(str)
    tb = bl.block_table(d["value"].to_numpy(float), d["key"].to_numpy(), d["position"].to_numpy(float))
    arm_of = tb["block"].str.rsplit("|", n=1).str[0].to_numpy()
    arms = [reference] + sorted(a for a in set(arm_of) if a != reference)
    X = np.column_stack(
        [np.ones(len(tb))] + [(arm_of == a).astype(float) for a in arms[1:]] + [tb["position"].to_numpy(float)]
    )
    within_v = bl.within_variance(tb)
    f = bl.fit(tb, X, X.shape[1] - 1, within=within_v)
    ci = f.ci(confidence)
    effects = {}
    for k, a in enumerate(arms[1:], start=1):
        fa = bl.fit(tb, X, k, within=within_v)
        ca = fa.ci(confidence)
        effects[str(a)] = {
            "ratio": float(np.exp(fa.estimate)),
            "ci_low": float(np.exp(ca[0])) if ca else None,
            "ci_high": float(np.exp(ca[1])) if ca else None,
            "p_value": fa.p_value(),
        }
    return Trend(
        slope=f.estimate,
        slope_ci=(float(ci[0]), float(ci[1])) if ci else None,
        slope_p=f.p_value(),
        effects=effects,
        n=int(len(d)),
        ci_method=f.ci_method.record(),
        blocks=int(len(tb)),
        df=f.df,
        slope_theil_sen=bl.theil_sen_within(tb, arm_of),
    )


def worst(per_workload: dict, threshold: float) -> dict | None:
    """The largest |reference_first_vs_last| over the workloads of stats.json's `drift` (`per_workload`),
    against the noise threshold: {change (its absolute value), workload, threshold, beyond (change >
    threshold: effects smaller than the drift cannot be told from it)}; None where no workload measured it."""
    moved = [
        (abs(d["reference_first_vs_last"]), wl)
        for wl, d in per_workload.items()
        if (d or {}).get("reference_first_vs_last") is not None
    ]
    if not moved:
        return None
    change, wl = max(moved)
    return {"change": float(change), "workload": wl, "threshold": threshold, "beyond": bool(change > threshold)}
