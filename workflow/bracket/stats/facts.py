"""The analysis' steps that state facts: what the analysis is (its header), counts and the A/A arms, the levels of
variance, TTFT apart from decode, the measurement against the ceiling, the raw-data guards, the gaps between
blocks, the instrument's cost, and the findings about the run itself. Each returns its sections of stats.json (and
its findings)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import pandas as pd

from bracket.physics.ceiling import measured
from bracket.records import guards
from bracket.stats import cpus, stated
from bracket.stats import findings as F
from bracket.stats import neutrality as neutral
from bracket.stats import phases as ph
from bracket.stats.best import workload_order
from bracket.stats.cells import first_run_slow
from bracket.stats.efficiency import above_ceiling, reference_reading
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K
from bracket.stats.gaps import block_gaps
from bracket.stats.gaps import findings as gap_findings
from bracket.stats.levels import levels as levels_of
from bracket.stats.setting import Setting
from bracket.typed.experiment import Experiment


def counts(runs: pd.DataFrame, frame: pd.DataFrame) -> dict:
    """Invalid timed runs by kind (records.INVALID_KINDS): warmups are counted apart, and each run once,
    under its first reason (an early stop is also short of max_tokens; it is one invalid run, not two)."""
    kinds = frame.loc[~frame["valid"], "invalid_kind"].replace("", "unknown")
    reasons = Counter(k for k in kinds if k != "warmup")
    warm = int(pd.Series(runs.get("warmup", False)).fillna(False).astype(bool).sum()) if "warmup" in runs else 0
    return {
        "total": int(len(frame)),
        "valid": int(frame["valid"].sum()),
        "warmups": warm,
        "invalid": int((~frame["valid"]).sum()) - warm,
        "invalid_by_reason": dict(sorted(reasons.items())),
    }


def same_settings(experiment: Experiment) -> dict | None:
    """An A/A experiment, as its configuration declares it: arms whose settings (all but the label) are
    those of the reference. All arms so: the experiment is an A/A test, a drift test whose comparisons
    say how large a difference this setup resolves, not which setting to use. Some arms so: those
    comparisons are A/A controls beside the others."""
    arms = experiment.arms
    reference = experiment.reference

    def settings(arm):
        return json.dumps(arms[arm].model_dump(mode="json", exclude_unset=True, exclude={"label"}), sort_keys=True)

    if len(arms) == 1:  # the reference alone, compared with itself block by block: drift and nothing else
        return {"reference": reference, "arms": [], "all": True}
    same = [a for a in arms if a != reference and settings(a) == settings(reference)]
    if not same:
        return None
    return {"reference": reference, "arms": same, "all": len(same) == len(arms) - 1}


def torn(torn_records: list[dict] | None) -> list[Finding]:
    """A finding for each record a crash cut short (rule collect's torn_records.json: {file, line, bytes})."""
    return [
        Finding(K.TORN_RECORD, F.TornRecord(str(t["file"]), int(t["line"]), int(t["bytes"])))
        for t in torn_records or []
    ]


def block_cost_runs(runs: pd.DataFrame, experiment: Experiment) -> float:
    """What one more block costs, in run lengths: its warmup runs and its cooldown over the median run's wall."""
    d = experiment.design
    wall = pd.to_numeric(runs.get("wall_s", pd.Series(dtype=float)), errors="coerce").median()
    cooldown = d.cooldown_s / wall if wall and math.isfinite(wall) and wall > 0 else 0.0
    return max(1.0, d.warmup_runs + cooldown)


def levels(s: Setting) -> list[dict]:
    """Between- and within-block variance per (arm, workload) with two blocks or more (bracket.stats.levels)."""
    cost = block_cost_runs(s.runs, s.experiment)
    out = []
    for (arm, wl), sub in s.valid.dropna(subset=["block"]).groupby(["arm", "workload"], sort=True):
        try:
            lv = levels_of(sub["value"].to_numpy(), sub["block"].to_numpy(), block_cost_runs=cost)
        except ValueError:
            continue
        out.append({"arm": str(arm), "workload": str(wl), "block_cost_runs": cost, **dataclasses.asdict(lv)})
    return out


def phases(s: Setting) -> tuple[dict | None, list[Finding]]:
    """TTFT apart from decode for every arm (bracket.stats.phases), and the arms whose difference lives in TTFT."""
    if "ttft_s" not in s.runs.columns:  # a table from elsewhere (a CSV of arm/value) has no phases
        return None, []
    margin = float(s.experiment.analysis.phase_margin)
    rows = ph.phases(s.runs, s.reference, **s.stats_kw, margin=margin)
    section = {"margin": margin, "rule": "|ln(TTFT ratio)| > |ln(tg ratio)| + ln(1 + margin), TTFT ratio CI excludes 1"}
    return {**section, "rows": rows}, ph.findings(rows, s.reference, margin)


def physics(s: Setting, cells: list[dict], ceiling: dict | None, weights: dict | None) -> dict | None:
    """The measurement against the ceiling (bracket.physics.ceiling.measured) with the reference's reading, the
    rows above the ceiling and the byte account and ceiling as stated; None where neither file was given."""
    if ceiling is None and weights is None:
        return None
    plain = [a for a, arm in s.experiment.arms.items() if arm.speculative is None]
    m = measured(ceiling, cells, s.reference, plain)
    eff = m["efficiency"]
    return {
        **m,
        "reference_reading": reference_reading(eff, s.reference, workload_order(s.experiment, s.runs)),
        "above_ceiling": above_ceiling(eff),
        **stated.physics_inputs(weights, ceiling),
    }


def machine(steady: dict | None, threshold: float) -> list[Finding]:
    """A finding when the machine's memory copy rate moved by `threshold` or more before the blocks
    (bracket.physics.steadiness.summary's record)."""
    if not steady or steady.get("spread") is None or steady["spread"] < threshold:
        return []
    keys = ("spread", "window_s", "seconds", "low_gbps", "high_gbps")
    return [Finding(K.MACHINE, F.Machine(**{k: float(steady[k]) for k in keys}, threshold=float(threshold)))]


def controls(s: Setting, metas: list[dict] | None, control: pd.DataFrame | None) -> tuple[dict, list[Finding]]:
    """Seed 000's raw-data `guards`, the `gaps` between blocks against the cooldown, and the instrument's cost
    (`neutrality`), with their findings."""
    out = {"guards": guards(s.runs), "gaps": block_gaps(metas or [], float(s.experiment.design.cooldown_s))}
    found = gap_findings(out["gaps"]) + cpus.findings(metas, s.experiment.cluster)
    c = s.experiment.controls
    if not c.neutrality:
        out["neutrality"] = {"status": "off", "off_reason": c.neutrality_off}
    else:
        cost = neutral.instrument_cost(control, s.confidence) if control is not None else None
        out["neutrality"] = {
            "status": "on" if cost else "no_records",  # no_records: a stand-in server, or from before the control
            **(cost or {}),
            "reading": neutral.reading(cost),
            "threshold": neutral.THRESHOLD,
        }
        found += neutral.findings(cost)
    unreported = out["guards"]["cache_unreported_unique"]
    if unreported:
        found.append(Finding(K.CACHE_UNREPORTED, F.CacheUnreported(int(unreported))))
    return out, found


def run_findings(s: Setting, invalid_by_reason: dict) -> list[Finding]:
    """Findings about how the run went: a sequential design, a slow first run, the invalid runs by reason."""
    found = [Finding(K.SEQUENTIAL)] if s.experiment.design.kind == "sequential" else []
    for arm, wl, hits, total in first_run_slow(s.frame):
        found.append(Finding(K.SLOW_FIRST_RUN, F.SlowFirstRun(int(hits), int(total)), arm=arm, workload=wl))
    exp = s.experiment_name or "NAME"
    for reason, n in invalid_by_reason.items():  # reason is a kind (records.INVALID_KINDS)
        found.append(Finding(K.INVALID, F.Invalid(int(n), str(reason), exp)))
    return found
