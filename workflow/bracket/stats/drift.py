"""Drift: the same configuration measured at two times, and the time trend fitted with the arms.

Three views, as in DESIGN.md's definition:

- reference first vs last: the reference arm's first and last blocks (bracket design);
- rounds: each arm's first round vs its last round (A/B/A/B);
- trend: OLS of log(rate) on arm and schedule position, giving the drift per block and the
  drift-adjusted effect of every arm.

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
import statsmodels.api as sm


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
    sub = df[df["arm"] == arm]
    positions = sorted(sub["position"].dropna().unique())
    if len(positions) < 2:
        return None
    first = sub.loc[sub["position"] == positions[0], "value"]
    last = sub.loc[sub["position"] == positions[-1], "value"]
    return {"first_position": int(positions[0]), "last_position": int(positions[-1]),
            "first_median": float(first.median()), "last_median": float(last.median()),
            "change": log_change(first, last)}


def round_changes(df: pd.DataFrame) -> dict:
    """Per arm: median of each round and the change from its first round to its last.

    Returns {arm: {"medians": {round: median}, "change": float | None}}.
    """
    _check_frame(df, ("arm", "round", "value"))
    out = {}
    for arm, sub in df.groupby("arm", sort=True):
        med = sub.groupby("round")["value"].median().sort_index()
        change = None
        if len(med) >= 2:
            change = log_change(sub.loc[sub["round"] == med.index[0], "value"],
                                sub.loc[sub["round"] == med.index[-1], "value"])
        out[str(arm)] = {"medians": {int(r): float(m) for r, m in med.items()}, "change": change}
    return out


@dataclass(frozen=True)
class Trend:
    """OLS fit of log(rate) = a_arm + slope * position + e."""

    slope: float
    slope_ci: tuple[float, float]
    slope_p: float
    effects: dict  # arm -> {"ratio", "ci_low", "ci_high", "p_value"} relative to the reference
    n: int
    cov_type: str


def trend(df: pd.DataFrame, reference: str, *, confidence: float = 0.95) -> Trend | None:
    """Fit log(rate) on arm indicators and schedule position (statsmodels OLS).

    log(v_i) = a + sum_k b_k [arm_i = k] + slope * position_i + e_i,  k != reference

    `slope` is the drift per block (exp(slope) - 1 is the relative change per block);
    exp(b_k) is arm k's drift-adjusted ratio to the reference. Standard errors are
    heteroskedasticity-robust (HC1). Runs in one block are correlated, which makes these
    intervals optimistic; the comparison verdicts use the block bootstrap instead.

    Returns None when position does not vary within any arm (the slope is confounded with the
    arms, as in a design with one block per arm).
    """
    _check_frame(df, ("arm", "position", "value"))
    d = df.dropna(subset=["position", "value"])
    if d.empty or reference not in set(d["arm"]):
        return None
    within = d.groupby("arm")["position"].nunique()
    if not (within >= 2).any():
        return None
    arms = [reference] + sorted(a for a in d["arm"].unique() if a != reference)
    X = pd.DataFrame({"const": 1.0}, index=d.index)
    for a in arms[1:]:
        X[f"arm[{a}]"] = (d["arm"] == a).astype(float)
    X["position"] = d["position"].astype(float)
    fit = sm.OLS(np.log(d["value"].astype(float)), X).fit(cov_type="HC1")
    ci = fit.conf_int(alpha=1 - confidence)
    effects = {}
    for a in arms[1:]:
        c = f"arm[{a}]"
        effects[str(a)] = {"ratio": float(np.exp(fit.params[c])), "ci_low": float(np.exp(ci.loc[c, 0])),
                           "ci_high": float(np.exp(ci.loc[c, 1])), "p_value": float(fit.pvalues[c])}
    return Trend(slope=float(fit.params["position"]),
                 slope_ci=(float(ci.loc["position", 0]), float(ci.loc["position", 1])),
                 slope_p=float(fit.pvalues["position"]), effects=effects, n=int(fit.nobs),
                 cov_type="HC1")
