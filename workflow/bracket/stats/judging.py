"""The analysis' steps that judge: the cells, drift (and the hosts), and the comparisons with their multiplicity or
the adaptive design's looks. Each takes the `Setting` and returns its sections of stats.json and its findings."""

from __future__ import annotations

import dataclasses

from bracket.stats import conservatism
from bracket.stats import findings as F
from bracket.stats import sequential as seq
from bracket.stats.cells import cell_summaries, compare_arms
from bracket.stats.drift import first_vs_last, round_changes, trend
from bracket.stats.drift import worst as worst_drift
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K
from bracket.stats.hosts import hosts_section
from bracket.stats.multiplicity import FAMILY, holm
from bracket.stats.setting import Setting


def cells(s: Setting) -> tuple[list[dict], dict, list[Finding]]:
    """One summary per (arm, workload) (bracket.stats.cells.cell_summaries); the medians by (arm, workload); each
    cell's warnings, placed."""
    summaries = cell_summaries(s.frame, **s.stats_kw, spread_warning=s.spread_warning, precision=s.threshold)
    rows = [{"arm": arm, "workload": wl, **dataclasses.asdict(c)} for arm, wl, c in summaries]
    medians = {(arm, wl): c.median for arm, wl, c in summaries}
    found = [dataclasses.replace(w, arm=arm, workload=wl) for arm, wl, c in summaries for w in c.warnings]
    return rows, medians, found


def drift(s: Setting) -> tuple[dict, list[Finding]]:
    """`hosts` (bracket.stats.hosts), `drift` per workload and `drift_worst`, and the drift findings: the
    reference's first block against its last beyond the threshold (per host where several ran)."""
    hosts, found = hosts_section(s.runs, s.frame, s.experiment, s.reference, **s.stats_kw, noise_threshold=s.threshold)
    per_workload = {}
    for wl in s.workloads:
        sub = s.valid[s.valid["workload"] == wl]
        ref = first_vs_last(sub, s.reference)
        tr = trend(sub, s.reference, confidence=s.confidence)
        per_workload[wl] = {
            "reference_first_vs_last": ref["change"] if ref else None,
            "reference_blocks": ref,
            "rounds": round_changes(sub),
            "slope_per_block": tr.slope if tr else None,
            "slope_ci": list(tr.slope_ci) if tr and tr.slope_ci else None,
            "slope_p": tr.slope_p if tr else None,
            "effects": tr.effects if tr else {},
            "ci_method": tr.ci_method if tr else None,
            "blocks": tr.blocks if tr else None,
            "df": tr.df if tr else None,
            "slope_theil_sen": tr.slope_theil_sen if tr else None,
        }
        # With several hosts the first and last blocks ran on different machines: drift is per host.
        if ref and abs(ref["change"]) > s.threshold and hosts is None:
            found.append(Finding(K.DRIFT, F.Drift(s.reference, float(ref["change"]), s.threshold), workload=wl))
    out = {"hosts": hosts, "drift": per_workload, "drift_worst": worst_drift(per_workload, s.threshold)}
    return out, found


def compared(s: Setting) -> tuple[list[dict], dict, list[Finding]]:
    """Each non-reference arm against the reference, per workload (bracket.stats.cells.compare_arms); each
    comparison's notes by (workload, arm); the workloads without reference runs and the comparisons refused."""
    rows, notes, found = [], {}, []
    for wl in s.workloads:
        arms_here = sorted(s.valid.loc[s.valid["workload"] == wl, "arm"].unique())
        if s.reference not in arms_here:
            found.append(Finding(K.NO_REFERENCE, F.NoReference(s.reference), workload=wl))
            continue
        for arm in (a for a in arms_here if a != s.reference):
            try:
                c = compare_arms(
                    s.frame, s.reference, arm, wl, reference=s.reference, **s.stats_kw, noise_threshold=s.threshold
                )
            except ValueError as exc:
                where = dict(arm=arm, vs=s.reference, workload=wl)
                found.append(Finding(K.NOT_COMPARED, F.NotCompared(str(exc)), **where))
                continue
            notes[(wl, arm)] = c.notes
            rows.append({"workload": wl, "baseline": s.reference, "candidate": arm, **dataclasses.asdict(c)})
    return rows, notes, found


def judged(s: Setting, rows: list[dict]) -> dict:
    """The verdicts made final (in place on `rows`): Holm over the family, or, for an adaptive design, its looks
    after every round on repeated CIs (bracket.stats.sequential); `sequential`, `multiplicity` and the
    intervals' `conservatism`."""
    out = {"sequential": None}
    if s.experiment.design.rounds == "adaptive":
        out["sequential"] = seq.assess(s.frame, seq.Plan.of(s.experiment))
        out["multiplicity"] = seq.apply(rows, out["sequential"], FAMILY)
    else:
        m = holm(rows, s.confidence)
        out["multiplicity"] = {
            "method": "holm" if m > 1 else "none",
            "comparisons": m,
            "family": FAMILY,
            "confidence": s.confidence,
            "untested": sum(1 for c in rows if c.get("p_beyond_band") is None),
        }
    out["conservatism"] = conservatism.summary(rows, s.confidence, s.threshold)
    return out


def comparisons(s: Setting) -> tuple[dict, list[Finding]]:
    """`comparisons` judged (`compared`, `judged`), `undetermined`, and their findings in order: the refusals, then
    each comparison's notes and, without a verdict, why."""
    rows, notes, found = compared(s)
    out = {"comparisons": rows, **judged(s, rows)}
    for c in rows:  # the verdicts are final here (the adaptive design's looks included)
        where = dict(arm=c["candidate"], vs=s.reference, workload=c["workload"])
        found += [dataclasses.replace(n, **where) for n in notes[(c["workload"], c["candidate"])]]
        if c["verdict"] == "undetermined":
            found.append(Finding(K.UNDETERMINED, F.Undetermined(c["undetermined"], c["rounds_needed"]), **where))
    out["undetermined"] = [
        {k: c[k] for k in ("workload", "candidate", "rounds_needed", "rounds_needed_for")}
        | {"reason": c["undetermined"]}
        for c in rows
        if c["verdict"] == "undetermined"
    ]
    return out, found
