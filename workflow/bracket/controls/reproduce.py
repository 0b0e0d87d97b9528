"""Reproduce one cell of a published experiment, and decide whether its figures hold.

Seed 000: draft budget 12 measured 68.57 over five runs; ten runs in a fresh container gave
65.02 (56.6-69.3), and the article printed 65 with the ratio to the same session's baseline,
5.28x, because "ratios survive thermal drift; absolute numbers don't".

A reproduction is a *derived experiment* named ``BASE--repro-ID``: the base experiment's file
with two arms (the reference and the arm under test), the chosen workloads, and a bracket design
of one round (reference, arm, reference) with ``runs`` timed runs per block, so drift is measured
too. It runs through the same plan/block/collect/analyze rules under results/BASE--repro-ID/,
and its validated configuration is recorded there as experiment.yaml.

The verdict rule, per workload (see `verdict`):

- the original median must lie inside the reproduction's bootstrap CI of the median, and
- the original ratio to the reference must lie inside the reproduction's CI of that ratio
  (both arms measured in the same session);

the figure "holds" when both do, "does not hold" when either does not (the ledger entry says
which), and is "undecided" when neither check could be made (no CI: fewer than two runs).

Both sessions must have served the same model: where the blocks' provenance records the weights'
sha256 (`model_sha256`, bracket.embedded.model_hash: the embedded model, or any model small enough
to hash whole), a reproduction whose model has another hash than the original's is "not
compared": the numbers of another model say nothing about the published ones, and no ledger
entry is written (rebuild the model the article names, or measure it as a new experiment).
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from bracket.experiment import config
from bracket.typed.experiment import Experiment

SEP = "--repro-"
RULE = (
    "holds iff the original median lies inside the reproduction's bootstrap CI of the median and the "
    "original ratio to the reference lies inside the reproduction's CI of that ratio (same session); "
    "does not hold if either lies outside; undecided if neither could be checked"
)
HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
OTHER_MODEL = "not compared: another model"
DASH = "\u2013"


class ReproduceError(ValueError):
    """A reproduction that cannot be set up; the message says what to pass instead."""


def is_derived(name: str) -> bool:
    return SEP in name


def base_of(name: str) -> str:
    """The base experiment of a derived name (``smoke--repro-x`` -> ``smoke``); a base name is its own base."""
    return name.split(SEP, 1)[0]


def derived_name(base: str, ident: str) -> str:
    ident = str(ident)
    if not ident or not ident.replace("_", "").replace("-", "").isalnum():
        raise ReproduceError(
            f"reproduction id {ident!r} may use only letters, digits, '_' and '-'; pass e.g. --config id=rerun1."
        )
    return f"{base}{SEP}{ident}"


def experiment_path(root: str | Path, name: str) -> Path:
    """Where an experiment's file lives: experiments/NAME.yaml, or results/NAME/experiment.yaml when derived."""
    root = Path(root)
    if is_derived(name):
        return root / "results" / name / "experiment.yaml"
    return root / "experiments" / f"{name}.yaml"


def parse_cell(cell: str) -> tuple[str, list[str] | None]:
    """``"ARM"`` or ``"ARM,WORKLOAD[,WORKLOAD...]"`` -> (arm, workloads or None for all)."""
    parts = [p.strip() for p in str(cell).split(",") if p.strip()]
    if not parts:
        raise ReproduceError("cell is empty; pass --config cell=ARM or cell=ARM,WORKLOAD.")
    return parts[0], (parts[1:] or None)


def derive(
    exp: Experiment,
    base: str,
    arm: str,
    workloads: list[str] | None,
    runs: int,
    ident: str,
    created: str | None = None,
) -> Experiment:
    """The derived experiment, validated (see the module docstring); `exp`, the base, is left as it is.

    Everything a block's measurement depends on (engine, request, arm flags, prompts, warmups,
    cooldown, design seed) is kept from the base, so the reproduction asks the same questions.
    """
    ref = exp.reference
    if arm not in exp.arms:
        raise ReproduceError(
            f"experiments/{base}.yaml has no arm {arm!r}; its arms are "
            f"{', '.join(exp.arms)}. Pass --config cell=ARM[,WORKLOAD]."
        )
    if arm == ref:
        raise ReproduceError(
            f"{arm!r} is the reference arm of {base}; a reproduction runs an arm beside the "
            f"reference, so pick one of {', '.join(a for a in exp.arms if a != ref)}."
        )
    wls = list(exp.workloads) if workloads is None else list(workloads)
    unknown = [w for w in wls if w not in exp.workloads]
    if unknown:
        raise ReproduceError(
            f"experiments/{base}.yaml has no workload {', '.join(map(repr, unknown))}; its "
            f"workloads are {', '.join(exp.workloads)}."
        )
    try:
        runs = int(runs)
    except (TypeError, ValueError):
        raise ReproduceError(f"runs must be a whole number, got {runs!r}; pass --config runs=10.") from None
    if runs < 2:
        raise ReproduceError(f"runs is {runs}; a median's CI needs at least 2 runs (seed 000 used 10).")
    data = config.as_data(exp)  # the base as plain data: the derived experiment is built new, then validated
    # one round of a fixed design: the keys that tell an adaptive design when to stop do not apply
    design = {k: v for k, v in data["design"].items() if k not in ADAPTIVE_ONLY}
    out = {
        **data,
        "title": f"Reproduction of {base}: {arm} beside {ref}",
        "question": (
            f"Do the published figures of {arm} ({', '.join(wls)}) hold in a fresh session of "
            f"{runs} runs beside the reference?"
        ),
        "arms": {ref: data["arms"][ref], arm: data["arms"][arm]},
        "reference": ref,
        "workloads": {w: data["workloads"][w] for w in wls},
        "design": {**design, "kind": "bracket", "rounds": 1, "runs_per_block": runs},
        "controls": {**data["controls"], "determinism": False},
        "reproduces": {
            "experiment": base,
            "arm": arm,
            "workloads": wls,
            "runs": runs,
            "id": str(ident),
            "created": created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        },
    }
    return config.validate(out, source=f"reproduction {derived_name(base, ident)}")


# Keys only an adaptive design reads (bracket.experiment.config._check_design refuses them under a fixed one).
ADAPTIVE_ONLY = ("min_rounds", "max_rounds", "target", "margin")


def record(exp: Experiment, path: str | Path) -> Path:
    """Write the derived experiment once (as data, keys as validated); a second reproduction under the same
    id must ask the same thing."""
    path = Path(path)
    asked = config.as_data(exp.reproduces)
    if path.is_file():
        recorded = config.as_data(config.load(path, measured=True).reproduces)
        keep = ("experiment", "arm", "workloads", "runs")
        old_req = {k: recorded[k] for k in keep}
        new_req = {k: asked[k] for k in keep}
        if old_req != new_req:
            raise ReproduceError(
                f"{path} already records a reproduction with id {asked['id']!r} of "
                f"{old_req}; this one asks for {new_req}. Pass another --config id=... ."
            )
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Derived by `snakemake reproduce`; recorded once, never rewritten.\n"
        + yaml.safe_dump(config.as_data(exp), sort_keys=False, allow_unicode=True)
    )
    return path


@dataclass(frozen=True)
class Request:
    """A reproduction asked for on the command line."""

    base: str
    arm: str
    workloads: list[str] | None
    runs: int
    ident: str

    @property
    def name(self) -> str:
        return derived_name(self.base, self.ident)


def request_from_config(snakemake_config: dict, now: _dt.datetime | None = None) -> Request | None:
    """``--config experiment=NAME cell=ARM[,WORKLOAD] runs=10 [id=ID]`` -> Request; None without ``cell``.

    The default id is a UTC timestamp taken when the workflow is parsed.
    """
    if "cell" not in snakemake_config:
        return None
    base = snakemake_config.get("experiment")
    if not base:
        raise ReproduceError("reproduce needs the experiment: --config experiment=NAME cell=ARM[,WORKLOAD] runs=10.")
    arm, wls = parse_cell(snakemake_config["cell"])
    now = now or _dt.datetime.now(_dt.timezone.utc)
    ident = str(snakemake_config.get("id") or now.strftime("%Y%m%dT%H%M%SZ"))
    derived_name(str(base), ident)  # validates the id
    return Request(base=str(base), arm=arm, workloads=wls, runs=int(snakemake_config.get("runs", 10)), ident=ident)


# ---------------------------------------------------------------- the verdict


def _cell(stats: dict, arm: str, workload: str) -> dict | None:
    return next((c for c in stats.get("cells", []) if c["arm"] == arm and c["workload"] == workload), None)


def _comparison(stats: dict, arm: str, workload: str) -> dict | None:
    return next((c for c in stats.get("comparisons", []) if c["candidate"] == arm and c["workload"] == workload), None)


def _inside(x, lo, hi) -> bool | None:
    if x is None or lo is None or hi is None:
        return None
    return bool(lo <= x <= hi)


def figures(stats: dict, arm: str, workload: str) -> dict | None:
    """One session's figures of a cell: runs, median and CI, range, spread, ratio to the reference and its CI."""
    c = _cell(stats, arm, workload)
    if c is None:
        return None
    ref = stats.get("reference")
    r = _cell(stats, ref, workload) if ref else None
    cmp = _comparison(stats, arm, workload)
    drift = (stats.get("drift") or {}).get(workload) or {}
    return {
        "n": c["n"],
        "median": c["median"],
        "ci_low": c.get("ci_low"),
        "ci_high": c.get("ci_high"),
        "min": c["min"],
        "max": c["max"],
        "spread": c["spread"],
        "reference": ref,
        "reference_median": r["median"] if r else None,
        "ratio": cmp["ratio"] if cmp else (c["median"] / r["median"] if r else None),
        "ratio_ci_low": cmp["ci_low"] if cmp else None,
        "ratio_ci_high": cmp["ci_high"] if cmp else None,
        "reference_drift": drift.get("reference_first_vs_last"),
    }


def judge(original: dict, reproduction: dict) -> dict:
    """Apply the verdict rule (module docstring) to two sessions' `figures` of one cell."""
    median_ok = _inside(original["median"], reproduction["ci_low"], reproduction["ci_high"])
    ratio_ok = _inside(original.get("ratio"), reproduction.get("ratio_ci_low"), reproduction.get("ratio_ci_high"))
    checks = [c for c in (median_ok, ratio_ok) if c is not None]
    verdict = UNDECIDED if not checks else (HOLDS if all(checks) else FAILS)
    return {"verdict": verdict, "median_inside_ci": median_ok, "ratio_inside_ci": ratio_ok}


def served_models(raw_dir: str | Path) -> list[str]:
    """The weights' sha256 each block of a run served (block-*.meta.json `model_sha256`), distinct, sorted."""
    import json

    out = set()
    for p in sorted(Path(raw_dir).glob("block-*.meta.json")):
        try:
            h = (json.loads(p.read_text()).get("model_sha256") or {}).get("sha256")
        except (OSError, ValueError, AttributeError):
            continue
        if h:
            out.add(str(h))
    return sorted(out)


def model_mismatch(original: list[str] | None, reproduction: list[str] | None) -> str | None:
    """Why two sessions cannot be compared (they served models with other weights), or None.

    Only hashes both sessions recorded decide: a session without them (an older run, a model too
    large to hash) is not refused on that account."""
    if not original or not reproduction or set(original) == set(reproduction):
        return None
    short = lambda hs: ", ".join(h[:12] for h in hs)
    return (
        f"the reproduction served a model with sha256 {short(reproduction)}, the original "
        f"{short(original)}: other weights, so its figures are not compared with the published ones; "
        f"rebuild the model the article names on a CPU of the vendor it was trained on (the pinned hashes, by "
        f"vendor, are in bracket.embedded.MODEL_SHA256) "
        f"or publish this run as a new experiment"
    )


def verdict(
    original_stats: dict, repro_stats: dict, arm: str, workloads: list[str], models: dict | None = None
) -> dict:
    """Per workload: both sessions' figures and the judgement; `verdict` overall (worst of the workloads).

    models: {"original": [sha256, ...], "reproduction": [...]} as served_models reads them; when both
    are known and differ, every cell is OTHER_MODEL and nothing is judged."""
    models = models or {}
    refused = model_mismatch(models.get("original"), models.get("reproduction"))
    if refused:
        return {
            "arm": arm,
            "reference": repro_stats.get("reference"),
            "confidence": repro_stats.get("confidence"),
            "verdict": OTHER_MODEL,
            "models": models,
            "refused": refused,
            "cells": [
                {
                    "workload": wl,
                    "original": figures(original_stats, arm, wl),
                    "reproduction": figures(repro_stats, arm, wl),
                    "verdict": OTHER_MODEL,
                    "median_inside_ci": None,
                    "ratio_inside_ci": None,
                    "note": refused,
                }
                for wl in workloads
            ],
        }
    cells = []
    for wl in workloads:
        o, r = figures(original_stats, arm, wl), figures(repro_stats, arm, wl)
        if o is None or r is None:
            missing = "original" if o is None else "reproduction"
            cells.append(
                {
                    "workload": wl,
                    "original": o,
                    "reproduction": r,
                    "verdict": UNDECIDED,
                    "median_inside_ci": None,
                    "ratio_inside_ci": None,
                    "note": f"the {missing} has no valid runs of {arm} on {wl}",
                }
            )
            continue
        cells.append({"workload": wl, "original": o, "reproduction": r, **judge(o, r)})
    kinds = [c["verdict"] for c in cells]
    overall = FAILS if FAILS in kinds else (HOLDS if kinds and all(k == HOLDS for k in kinds) else UNDECIDED)
    return {
        "arm": arm,
        "reference": repro_stats.get("reference"),
        "confidence": repro_stats.get("confidence"),
        "verdict": overall,
        "models": models,
        "cells": cells,
    }


def _r(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.2f}"


def _span(lo, hi) -> str:
    return f"{lo:.1f}{DASH}{hi:.1f}"


def _x(x) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def sentence(cell: dict) -> str:
    """ "was 68.57 over 5 runs; 10 fresh runs give 65.02, 56.6–69.3" plus the ratios of both sessions."""
    o, r = cell["original"], cell["reproduction"]
    s = (
        f"was {_r(o['median'])} over {o['n']} runs; {r['n']} fresh runs give {_r(r['median'])}, "
        f"{_span(r['min'], r['max'])} (median CI {_r(r['ci_low'])}{DASH}{_r(r['ci_high'])}, spread "
        f"{r['spread']:.1%})"
    )
    if o.get("ratio") is not None and r.get("ratio") is not None:
        ci = f" (CI {_x(r['ratio_ci_low'])}{DASH}{_x(r['ratio_ci_high'])})" if r.get("ratio_ci_low") is not None else ""
        s += f"; ratio to {r['reference']} in the same session {_x(r['ratio'])}{ci}, was {_x(o['ratio'])}"
    return s


def correction_entries(v: dict, base: str, repro_name: str, date: str) -> list[dict]:
    """Ledger entries (date, claim, correction, evidence) for every cell whose figures do not hold."""
    out = []
    for c in v["cells"]:
        if c["verdict"] != FAILS:
            continue
        o = c["original"]
        failed = [
            w
            for w, ok in (("the median", c["median_inside_ci"]), ("the ratio to the reference", c["ratio_inside_ci"]))
            if ok is False
        ]
        out.append(
            {
                "date": date,
                "claim": (
                    f"{v['arm']} / {c['workload']} decodes at {_r(o['median'])} tok/s "
                    f"({o['n']} runs, {_span(o['min'], o['max'])})"
                    + (f", {_x(o['ratio'])} the {o['reference']} arm" if o.get("ratio") is not None else "")
                ),
                "correction": sentence(c) + f". Outside the reproduction's CI: {' and '.join(failed)}.",
                "evidence": (
                    f"results/{repro_name}/verdict.json (snakemake reproduce, design bracket "
                    f"{v['reference']}/{v['arm']}/{v['reference']}); raw records in results/{repro_name}/raw/"
                ),
            }
        )
    return out


def read_verdicts(paths) -> list[dict]:
    """Reproductions' verdicts (results/BASE--repro-*/verdict.json, as the report rule names them), oldest first."""
    import json

    out = []
    for p in map(Path, paths or ()):
        if p.is_file():
            v = json.loads(p.read_text())
            v.setdefault("name", p.parent.name)
            out.append(v)
    return sorted(out, key=lambda v: str(v.get("created", "")))
