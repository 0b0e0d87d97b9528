"""stats.json files written before today's contract, read in it.

Version 2 (`stats_version`, issue 28) made findings data (`findings`: kind and payload, no
sentences; `warnings` is gone) and put into stats.json what the article used to work out itself:
`design_ran`, `physics.reference_reading` and `physics.above_ceiling`, `budget_groups[].workloads`
and `same_direction`, `tokens_per_event`, `unmeasured`, `drift_worst`, and `best[].use` (the recommendation). A file without
`stats_version` is version 1: `current` fills these in with the same functions of bracket.stats,
from the inputs the caller has (the experiment, runs.csv, ceiling.json), and keeps each old
finding's sentence as a `recorded` finding.

Version 3 (issue 28) made stats.json all the article reads besides runs.csv: `experiment` (the
experiment as the article names it, with its schedule) and `physics.weights` / `physics.ceiling` (the byte
account and the ceiling as the article prints them), bracket.stats.stated; and a comparison's reasons became
data (`undetermined` for `undetermined_reason`, `ci_method` and `test` as records: bracket.stats.reasons), an
older file's sentences kept as they were (why "recorded"). `current` fills them in from the
experiment, weights.json, ceiling.json and schedule.csv where the caller passes them; the article passes
none (it reads no experiment file), so a file older than version 3 stops it with `require`'s message,
which names the command that analyses the records again.

Within version 3, the last sentences stats/ stored became codes and numbers (issue 28): an adaptive design's looks
(`sequential.comparisons[].look`, `undetermined.look`) and stopping rule, a cell's and drift's `ci_method`,
`k_model.reason`, `levels[].advice`, `multiplicity.family` and `.method`. An older version 3 file's sentences
are said as recorded (each presenter in bracket.article takes a string as one); its adaptive
`multiplicity.method` sentence, which the article compares, is read as today's code (`current`).

Version 4 (issue 28) made stats.json all the article reads of what ran: `provenance` (bracket.stats.provenance:
each block's status, start, server and telemetry, the engine, the hardware, each arm's flags, server state and
launch command, the failed attempts, the model's build record), which the article used to read from the blocks'
meta, failed_attempts.json and build.json. `current` fills it in from those where the caller passes them (the
blocks' metas with the experiment); the article passes none, so a version 3 file stops it with `require`'s
message.

Version 5 (issue 42) is the same JSON as version 4, described once: the typed, frozen models of
bracket.stats.results (`Stats`) and their JSON Schema, workflow/schemas/stats.schema.json. `upgrade` is the one
place a stats.json is read: any version in, a `Stats` out (what today's file holds, and what an older file held
that it could not fill in left None).

Today (bracket.stats.compare.Comparison, bracket.stats.analyze): a comparison's ``ratio`` with
``ci_low`` / ``ci_high`` at ``ci_level`` is the estimate and interval the verdict rests on, and
``raw_ratio`` / ``raw_ci_*`` the fit without the drift term. Files written before issue 29 named
the verdict's interval ``verdict_ci_*`` and gave the raw fit as ``ratio`` / ``ci_*``, so a reader
of an old file taking ``ci_*`` would read the raw interval as the verdict's. Committed stats.json
files (bench/results/) are kept as they were measured; every reader that may meet one passes it
through `current` first.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from bracket.physics.ceiling import measured
from bracket.stats import speculative as spec
from bracket.stats import stated
from bracket.stats.best import recommend, workload_order
from bracket.stats.coverage import unmeasured
from bracket.stats.design_ran import design_ran
from bracket.stats.drift import worst as worst_drift
from bracket.stats.efficiency import above_ceiling, reference_reading
from bracket.stats.findings import Finding, FindingKind, Recorded
from bracket.stats.provenance import provenance
from bracket.stats.reasons import Undetermined, Why
from bracket.stats.results import VERSION, Stats
from bracket.stats.sequential import METHOD

if TYPE_CHECKING:
    from bracket.typed.experiment import Experiment

OLD = ("verdict_ci_low", "verdict_ci_high", "verdict_ci_level")
#: An adaptive design's `multiplicity.method` as version 3 files wrote it before it became a code.
OLD_SEQUENTIAL_METHOD = (
    "group-sequential (repeated CIs, Lan-DeMets O'Brien-Fleming-type spending), Holm-type alpha recycling "
    "across comparisons (Maurer & Bretz 2013)"
)


def current_comparison(c: dict) -> dict:
    """One comparison in today's contract (a copy; one already in it is returned as it is).

    Old -> new: raw_ratio, raw_ci_low, raw_ci_high <- ratio, ci_low, ci_high; ci_low, ci_high,
    ci_level <- verdict_ci_*; ratio <- drift_adjusted_ratio where the verdict rested on the
    drift-adjusted fit (`basis`). Where the old file left the verdict's interval empty beside
    "undetermined", the basis fit's CI at `confidence` takes its place (as today), except with
    fewer than two blocks per arm, where today too no interval supports a verdict.
    """
    if not any(k in c for k in OLD):
        return c
    new = {k: v for k, v in c.items() if k not in OLD}
    adjusted = c.get("basis") == "drift-adjusted" and c.get("drift_adjusted_ratio") is not None
    lo, hi, level = (c.get(k) for k in OLD)
    if lo is None and min(c.get("blocks_baseline") or 0, c.get("blocks_candidate") or 0) >= 2:
        lo, hi = (
            (c.get("drift_adjusted_ci_low"), c.get("drift_adjusted_ci_high"))
            if adjusted
            else (c.get("ci_low"), c.get("ci_high"))
        )
        level = c.get("confidence") if lo is not None else None
    new.update(
        ratio=c["drift_adjusted_ratio"] if adjusted else c.get("ratio"),
        ci_low=lo,
        ci_high=hi,
        ci_level=level,
        raw_ratio=c.get("ratio"),
        raw_ci_low=c.get("ci_low"),
        raw_ci_high=c.get("ci_high"),
    )
    return new


def _old(comps) -> bool:
    return bool(comps) and any(any(k in c for k in OLD) for c in comps)


def current(
    stats: dict,
    *,
    cfg: Experiment | None = None,
    runs: pd.DataFrame | None = None,
    ceiling: dict | None = None,
    weights: dict | None = None,
    schedule: pd.DataFrame | None = None,
    name: str | None = None,
    metas: list[dict] | None = None,
    failed_attempts: list[dict] | None = None,
    model_dir: str | None = None,
    model_build: dict | None = None,
) -> dict:
    """A whole stats.json in today's contract (a copy where anything changed): its comparisons and
    the hosts section's (each host against the first), and an older file's missing keys (module
    docstring), each from `cfg` (the validated experiment), `runs` (runs.csv), `ceiling` (ceiling.json),
    `weights` (weights.json), `schedule` (schedule.csv), `name` (the experiment's), `metas` (the blocks'
    raw/block-K.meta.json), `failed_attempts` (failed_attempts.json), `model_dir` and `model_build` (the served
    model and its build.json) where it needs them; without them the key stays missing, version 3 without
    `cfg` and version 4 without `cfg` and `metas`."""
    out = stats
    if _old(stats.get("comparisons")):
        out = {**out, "comparisons": [current_comparison(c) for c in stats["comparisons"]]}
    hosts = stats.get("hosts")
    if isinstance(hosts, dict) and _old(hosts.get("comparisons")):
        out = {**out, "hosts": {**hosts, "comparisons": [current_comparison(c) for c in hosts["comparisons"]]}}
    if (stats.get("stats_version") or 1) < 2:
        out = _version_2(out, cfg, runs, ceiling)
    if out.get("stats_version", 1) < 3 and cfg is not None:
        out = _version_3(out, cfg, runs, ceiling, weights, schedule, name)
    if out.get("stats_version", 1) == 3 and cfg is not None and metas is not None:
        prov = provenance(metas, failed_attempts, model_dir, model_build, cfg)
        out = {**out, "stats_version": 4, "provenance": prov}
    if out.get("stats_version", 1) == 4:  # version 5 is version 4's JSON, described by bracket.stats.results
        out = {**out, "stats_version": VERSION}
    return _sequential_method(out)


def upgrade(raw: dict, **inputs) -> Stats:
    """Any stats.json, as read from the file, as a `Stats`: `current` with `inputs` (its keyword arguments: the
    experiment, runs.csv, ceiling.json ... where the caller has them), then the shapes of files before version 3
    in today's (`older_shapes`). Every reader of stats.json reads it through here; what an older file lacks and
    `inputs` could not fill is None (the article refuses such a file: `require`)."""
    if not isinstance(raw, dict):
        raise TypeError(f"a stats.json holds one JSON object, not {type(raw).__name__}: read the file again.")
    return Stats.model_validate(older_shapes(current(raw, **inputs)))


def older_shapes(stats: dict) -> dict:
    """A file before version 3 in today's shapes where no input is needed: drift's `cov_type` sentence as its
    `ci_method` (said as recorded), a rounds_needed_for written as "+/-18.5%" as the fraction 0.185, and a comparison's
    or `best` entry's `undetermined_reason` as an `undetermined` record (`recorded_reason`)."""
    if (stats.get("stats_version") or 1) >= 3:
        return stats
    out = dict(stats)
    out["drift"] = {
        w: ({**{k: v for k, v in d.items() if k != "cov_type"}, "ci_method": d.get("ci_method", d["cov_type"])})
        if isinstance(d, dict) and "cov_type" in d
        else d
        for w, d in (stats.get("drift") or {}).items()
    }
    for key in ("comparisons", "undetermined"):
        if stats.get(key) is not None:
            out[key] = [_fraction(recorded_reason(c) if key == "comparisons" else c) for c in stats[key]]
    if isinstance(stats.get("best"), dict):
        out["best"] = {w: recorded_reason(b) for w, b in stats["best"].items()}
    return out


def _fraction(row: dict) -> dict:
    """rounds_needed_for as a fraction where an older file wrote it as a percentage string ("+/-18.5%")."""
    text = row.get("rounds_needed_for")
    if not isinstance(text, str):
        return row
    m = re.fullmatch(r"\s*(?:\+/-|±)?\s*([0-9.]+)\s*%\s*", text)
    return {**row, "rounds_needed_for": float(m.group(1)) / 100 if m else None}


def _sequential_method(stats: dict) -> dict:
    """An adaptive design's `multiplicity.method` (the whole file's and each comparison's) as today's code, from
    the sentence a version 3 file wrote before (the article reads the code)."""
    if (stats.get("multiplicity") or {}).get("method") != OLD_SEQUENTIAL_METHOD:
        return stats

    def code(m: dict | None) -> dict | None:
        return {**m, "method": METHOD} if m and m.get("method") == OLD_SEQUENTIAL_METHOD else m

    comparisons = [{**c, "multiplicity": code(c.get("multiplicity"))} for c in stats.get("comparisons") or []]
    return {**stats, "multiplicity": code(stats["multiplicity"]), "comparisons": comparisons}


class OldStats(ValueError):
    """A stats.json from before version 4, which lacks what the article states (`require`)."""


def require(stats: Stats, path) -> Stats:
    """`stats` (read through `upgrade`) if it holds all the article reads; else OldStats naming the fix."""
    if stats.stats_version >= 4 and stats.experiment is not None and stats.provenance is not None:
        return stats
    name = Path(path).parent.name or "NAME"
    raise OldStats(
        f"{path}: stats.json version {stats.stats_version} lacks what the article states since version "
        f"4 (the experiment as it ran, the byte account and the ceiling, and what ran: the blocks' "
        f"provenance, the failed attempts, the model's build record); the article reads no experiment file, meta "
        f"or build record. Analyse the records again (nothing is measured again):\n  snakemake --cores 1 "
        f"results/{name}/stats.json --forcerun analyze\nor, from Python, pass the file through "
        "bracket.stats.contract.upgrade with the experiment (cfg), weights.json, ceiling.json, schedule.csv, the "
        "blocks' metas, failed_attempts.json and the model's build.json."
    )


def _version_2(stats: dict, cfg: Experiment | None, runs: pd.DataFrame | None, ceiling: dict | None) -> dict:
    out = {k: v for k, v in stats.items() if k != "warnings"}
    out["stats_version"] = 2
    old = stats.get("findings")
    if old is None:  # older still: the sentences alone
        old = [{"message": w} for w in stats.get("warnings") or []]
    out["findings"] = [
        f
        if "payload" in f
        else Finding(FindingKind.RECORDED, Recorded(str(f.get("message", ""))), **_where(f)).record()
        for f in old
    ]
    arms = cfg.arms if cfg is not None else {}
    reference = stats.get("reference") or next(iter(arms), None)
    out["best"] = {
        wl: b
        if "use" in b
        else {**b, **dict(zip(("use", "use_because"), recommend(b["arm"], b.get("verdict"), reference)))}
        for wl, b in (stats.get("best") or {}).items()
    }
    plain = [a for a, arm in arms.items() if arm.speculative is None]
    order = workload_order(cfg, runs) if runs is not None else sorted({c["workload"] for c in stats.get("cells") or []})
    medians = {(c["arm"], c["workload"]): c["median"] for c in stats.get("cells") or []}
    physics = stats.get("physics")
    if physics is None and ceiling is not None and cfg is not None:
        physics = measured(ceiling, stats.get("cells") or [], reference, plain)
    if physics is not None:
        eff = physics.get("efficiency") or []
        out["physics"] = {
            **physics,
            "reference_reading": reference_reading(eff, reference, order),
            "above_ceiling": above_ceiling(eff),
        }
    groups = stats.get("budget_groups")
    if groups is None and cfg is not None:
        groups = [
            {"method": label, "arms": [a for _, a in g], "budgets": [k for k, _ in g]}
            for label, g in spec.budget_groups(arms)
        ]
    if groups is not None:
        out["budget_groups"] = spec.budget_effects(groups, medians, order)
    if "drift" in stats and stats.get("noise_threshold") is not None:
        out["drift_worst"] = worst_drift(stats["drift"] or {}, stats["noise_threshold"])
    if runs is not None:
        out["tokens_per_event"] = spec.tokens_per_event(runs)
        out["design_ran"] = design_ran(runs)
        if cfg is not None:
            out["unmeasured"] = unmeasured(runs, cfg)
    return out


def recorded_reason(row: dict) -> dict:
    """A comparison (or `best` entry) of a file before version 3 with its `undetermined_reason` sentence as an
    `undetermined` record of why "recorded" (bracket.stats.reasons; said as it was recorded)."""
    if "undetermined_reason" not in row:
        return row
    new = {k: v for k, v in row.items() if k != "undetermined_reason"}
    text = row["undetermined_reason"]
    new["undetermined"] = asdict(Undetermined(Why.RECORDED, text=text)) if text else None
    return new


def _version_3(stats, cfg, runs, ceiling, weights, schedule, name) -> dict:
    stats = {**stats, "comparisons": [recorded_reason(c) for c in stats.get("comparisons") or []]}
    if isinstance(stats.get("best"), dict):
        stats["best"] = {w: recorded_reason(b) for w, b in stats["best"].items()}
    if name is None and runs is not None and "experiment" in runs and runs["experiment"].notna().any():
        name = str(runs["experiment"].dropna().iloc[0])
    out = {**stats, "stats_version": 3, "experiment": stated.experiment(cfg, name or "experiment", schedule)}
    if out.get("physics") is not None or weights is not None or ceiling is not None:
        base = out.get("physics") or {"efficiency": [], "reference_median": None, "hypotheses": [], "above_ceiling": []}
        out["physics"] = {**base, **stated.physics_inputs(weights, ceiling)}
    return out


def _where(f: dict) -> dict:
    return {k: f.get(k) for k in ("arm", "vs", "workload", "host")}
