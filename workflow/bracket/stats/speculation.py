"""The analysis' step for speculative decoding: acceptance per arm and workload, seed 000's k model, the arms that
never drafted, the draft-budget groups and tokens per stream event (bracket.stats.speculative)."""

from __future__ import annotations

import math

import pandas as pd

from bracket.stats import findings as F
from bracket.stats import speculative as spec
from bracket.stats.best import workload_order
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K
from bracket.stats.setting import Setting
from bracket.typed.experiment import Experiment


def speculation(s: Setting, medians: dict) -> tuple[dict, list[Finding]]:
    """stats.json's speculative, k_model, budget_groups, tokens_per_event and never_drafted, and a finding for each
    speculative arm that proposed no draft token on a workload."""
    rows, k_model = acceptance(s.experiment, s.valid, medians, s.reference)
    never = spec.never_drafted(s.runs)
    silent = {(c["arm"], c["workload"]) for c in never}
    for r in rows:
        if (r["arm"], r["workload"]) in silent:
            r["reading"] = spec.Reading.NEVER_DRAFTED
    # an arm that drafted on no workload is not a budget: the table of budgets leaves it out
    drafted = {
        a for a, w in s.valid[["arm", "workload"]].drop_duplicates().itertuples(index=False) if (a, w) not in silent
    }
    mute = {c["arm"] for c in never} - drafted
    groups = [
        {"method": label, "arms": [a for _, a in arms], "budgets": [k for k, _ in arms]}
        for label, arms in spec.budget_groups({a: v for a, v in s.experiment.arms.items() if a not in mute})
    ]
    out = {
        "speculative": rows,
        "k_model": k_model,
        "budget_groups": spec.budget_effects(groups, medians, workload_order(s.experiment, s.runs)),
        "tokens_per_event": spec.tokens_per_event(s.runs),
        "never_drafted": never,
    }
    found = [
        Finding(
            K.NEVER_DRAFTED, F.NeverDrafted(int(c["runs"]), c["draft_budget"]), arm=c["arm"], workload=c["workload"]
        )
        for c in never
    ]
    return out, found


def draft_budgets(experiment: Experiment, frame: pd.DataFrame) -> dict:
    """Each speculative arm's draft budget: the experiment's, else the one its runs recorded."""
    out = {}
    for name, arm in experiment.arms.items():
        if arm.speculative is not None:
            out[name] = int(arm.speculative.draft_tokens)
    for name, sub in frame.groupby("arm"):
        if name not in out and sub["draft_budget"].notna().any():
            out[str(name)] = int(sub["draft_budget"].dropna().iloc[0])
    return out


def acceptance(experiment, valid, medians, reference) -> tuple[list[dict], dict]:
    """One row per speculative arm and workload (acceptance length and rate, saturation, reading), and the k
    model: decode = k x baseline x acceptance_length, its band from the first half of the speculative arms, the
    others tested against it."""
    budgets = draft_budgets(experiment, valid)
    rows = []
    for arm in [a for a in experiment.arms if a in budgets] + sorted(set(budgets) - set(experiment.arms)):
        for wl, sub in valid[valid["arm"] == arm].groupby("workload", sort=True):
            acc = spec.acceptance(
                sub["draft_tokens"], sub["accepted_tokens"], sub["verify_steps"], sub["acceptance_length"]
            )
            sat = spec.saturation(acc.acceptance_length, budgets[arm]) if acc.acceptance_length else None
            rows.append(
                {
                    "arm": arm,
                    "workload": str(wl),
                    "draft_budget": budgets[arm],
                    "acceptance_length": acc.acceptance_length,
                    "acceptance_rate": acc.acceptance_rate,
                    "saturation": sat,
                    "reading": spec.reading(sat) if sat is not None else None,
                    "source": acc.source,
                }
            )
    plain = [a for a in experiment.arms if a not in budgets]
    base = reference if reference in plain else (plain[0] if plain else None)
    spec_arms = [a for a in experiment.arms if a in budgets]
    return rows, k_model(rows, medians, base, spec_arms)


def k_model(rows: list[dict], medians: dict, base: str | None, spec_arms: list[str]) -> dict:
    """Seed 000's k model over the acceptance rows (`acceptance`), against `base`, the non-speculative arm."""
    model = {"baseline": base, "band": None, "calibration": [], "rows": [], "tolerance": 0.02}
    if base is None:
        return {**model, "verdict": spec.KVerdict.UNTESTED, "reason": spec.KReason.NO_BASELINE}
    ks = []
    for r in rows:
        m, b = medians.get((r["arm"], r["workload"])), medians.get((base, r["workload"]))
        if m and b and r["acceptance_length"]:
            ks.append({"arm": r["arm"], "workload": r["workload"], "k": spec.k_factor(m, b, r["acceptance_length"])})
    calib = spec_arms[: math.ceil(len(spec_arms) / 2)]
    calib_ks = [x["k"] for x in ks if x["arm"] in calib]
    if not calib_ks:
        return {**model, "verdict": spec.KVerdict.UNTESTED, "reason": spec.KReason.NO_ACCEPTANCE}
    band = spec.band_from(calib_ks)
    marks = []
    for x in ks:
        role = "calibration" if x["arm"] in calib else "test"
        mark = spec.in_band(x["k"], band) if role == "test" else "yes"
        if role == "test":
            marks.append(mark)
        model["rows"].append({**x, "role": role, "in_band": mark})
    model.update(band=list(band), calibration=calib, verdict=spec.k_verdict(marks))
    if not marks:
        model["reason"] = spec.KReason.ALL_CALIBRATION
    return model
