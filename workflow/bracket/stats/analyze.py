"""The workflow's analyze step: runs.csv + the validated experiment -> stats.json, as a `Stats`
(bracket.stats.results), in named steps (bracket.stats.facts, .judging, .speculation, .best)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from bracket import version
from bracket.stats import facts, judging, stated
from bracket.stats import speculative as spec
from bracket.stats.best import best, recommend, workload_order
from bracket.stats.coverage import unmeasured
from bracket.stats.design_ran import design_ran
from bracket.stats.facts import counts as _counts
from bracket.stats.facts import machine as _machine
from bracket.stats.facts import same_settings
from bracket.stats.findings import Finding, records
from bracket.stats.findings import FindingKind as K
from bracket.stats.provenance import provenance
from bracket.stats.results import VERSION, Stats
from bracket.stats.setting import Setting
from bracket.stats.speculation import speculation
from bracket.typed.experiment import Experiment

# importable from here as before: the recommendation, the A/A arms, the counts and the machine's finding
__all__ = ["analyze", "jsonable", "recommend", "same_settings", "workload_order", "_counts", "_machine"]

VALUE = "decode_tok_s"
#: stats.json's contract version (bracket.stats.results.VERSION; bracket.stats.contract says what each changed).
STATS_VERSION = VERSION


def jsonable(obj):
    """Plain JSON types: dataclasses to dicts, numpy to Python, NaN and inf to None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    return obj


def analyze(
    runs: pd.DataFrame,
    experiment: Experiment,
    ceiling: dict | None = None,
    control: pd.DataFrame | None = None,
    metas: list[dict] | None = None,
    *,
    weights: dict | None = None,
    schedule: pd.DataFrame | None = None,
    name: str | None = None,
    failed_attempts: list[dict] | None = None,
    model_dir: str | None = None,
    model_build: dict | None = None,
    torn_records: list[dict] | None = None,
) -> Stats:
    """Every statistic of one experiment: results/NAME/stats.json as a `Stats` (`Stats.data()` is its JSON).

    What each key means is its field's description in bracket.stats.results; workflow/schemas/stats.schema.json
    (tools/stats_schema.py) states them all. Only valid runs enter statistics; the value is decode_tok_s.

    The inputs besides the runs and the experiment are files of the run where the caller has them: `ceiling`
    (ceiling.json), `control` (the neutrality control's records, records.control_table), `metas` (the blocks'
    raw/block-K.meta.json), `weights` (weights.json), `schedule` (schedule.csv), `name` (else runs.csv's
    experiment column), `failed_attempts` (failed_attempts.json), `model_dir` and `model_build` (the served model
    and its build.json), `torn_records` (rule collect's torn_records.json).

    The steps, in order: what ran and what was lost (`_header`, facts.torn), the cells, drift and the hosts, the
    comparisons judged (bracket.stats.judging), TTFT apart from decode, speculation, the levels of variance, the
    best arm, the physics, the guards, gaps and instrument cost, and the run's own findings (bracket.stats.facts).
    Findings keep that order.
    """
    s = Setting.of(runs, experiment)
    out = _header(s, name, schedule, torn_records, metas, failed_attempts, model_dir, model_build)
    found = facts.torn(torn_records)  # what was lost before any row: named whether or not anything was measured
    if s.valid.empty:
        return _nothing_valid(out, found)
    cells, medians, cell_findings = judging.cells(s)
    drift, drift_findings = judging.drift(s)
    compared, compared_findings = judging.comparisons(s)
    phases, phase_findings = facts.phases(s)
    speculated, spec_findings = speculation(s, medians)
    found += cell_findings + drift_findings + compared_findings + phase_findings + spec_findings
    out.update(cells=cells, **drift, **compared, phases=phases, **speculated, levels=facts.levels(s))
    out["best"] = best(cells, compared["comparisons"], medians, s.reference)
    out["physics"] = facts.physics(s, cells, ceiling, weights)
    found += facts.machine((ceiling or {}).get("machine_steadiness"), s.spread_warning)
    controls, control_findings = facts.controls(s, metas, control)
    out.update(controls)
    found += control_findings + facts.run_findings(s, out["counts"]["invalid_by_reason"])
    out["findings"] = records(found)
    return Stats.model_validate(jsonable(out))


def _header(s: Setting, name, schedule, torn_records, metas, failed_attempts, model_dir, model_build) -> dict:
    """What the analysis is (seed, level, resamples, value, the experiment's settings), the counts, the design as
    it ran, what went unmeasured, the experiment as the article names it and what ran (provenance)."""
    a = s.experiment.analysis
    return {
        "stats_version": VERSION,
        "seed": s.seed,
        "confidence": s.confidence,
        "resamples": s.resamples,
        "value": VALUE,
        "reference": s.reference,
        "design": s.experiment.design.kind,
        "noise_threshold": s.threshold,
        "spread_warning": float(a.spread_warning),
        "aa": same_settings(s.experiment),
        "counts": {**_counts(s.runs, s.frame), "torn": len(torn_records or [])},
        "design_ran": design_ran(s.runs),
        "unmeasured": unmeasured(s.runs, s.experiment),
        "experiment": stated.experiment(s.experiment, name or s.experiment_name or "experiment", schedule),
        "provenance": provenance(metas or [], failed_attempts, model_dir, model_build, s.experiment, version.info()),
    }


def _nothing_valid(out: dict, found: list[Finding]) -> Stats:
    """stats.json where no run was valid: every section empty, and the finding that says so first."""
    out.update(
        cells=[],
        comparisons=[],
        drift={},
        drift_worst=None,
        speculative=[],
        levels=[],
        best={},
        hosts=None,
        phases=None,
        conservatism=None,
        budget_groups=[],
        tokens_per_event=[],
        k_model={"band": None, "rows": [], "verdict": spec.KVerdict.UNTESTED, "reason": spec.KReason.NO_VALID_RUNS},
    )
    out["findings"] = records([Finding(K.NO_VALID_RUNS), *found])
    return Stats.model_validate(jsonable(out))
