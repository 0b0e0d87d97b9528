"""Greedy agreement: each arm's outputs against the reference arm's, on the same prompts.

Seed 004: every configuration change passed a greedy-agreement check before it was timed. At
temperature 0, speculative decoding is lossless in exact arithmetic, so an arm that only adds
speculation should reproduce the reference's output. When it does not, the first suspect is the
batch shape (seed 000: the verify step scores several positions at once, which changes the
reduction order, as a second concurrent request does); the determinism control tells.

Prompts are matched by (workload, prompt_id, run): the runner's unique prefix depends on the
experiment's design seed, the workload and the run index, not on the block, so every arm sees
the same prompt text at the same run index (and the prefix still differs between runs, so the
cache never engages). Outputs are compared as text; the first difference is a character index
(the raw records keep text, not token ids).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bracket.typed.experiment import Experiment

LOSSLESS_NOTE = (
    "{arm} should be lossless (speculative decoding at temperature 0) but its greedy output differs from the "
    "reference's{where}; first suspect: batch shape (run the determinism control: "
    "snakemake --cores 1 determinism --config experiment=NAME)"
)
SELF_NOTE = (
    "the reference disagrees with itself across blocks at temperature 0{where}: outputs are not "
    "reproducible between servers, so no arm's disagreement can be read as the arm's doing"
)


def first_difference(a: str, b: str) -> int | None:
    """Index of the first character where `a` and `b` differ; None when equal; the shorter length on a prefix."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _key(r: dict) -> tuple:
    return (r.get("workload"), r.get("prompt_id"), r.get("run"))


def agreement(records: list[dict], reference: str, lossless: dict[str, bool], temperature: float) -> dict:
    """Exact-match rate and first differing character per (arm, workload), the reference's self-agreement included.

    Parameters
    ----------
    records : raw records (with output_text and output_sha256); errors are skipped.
    reference : the arm compared against. Its first occurrence (block) of each prompt is the
        reference output; its later blocks are compared with it too (self-agreement across servers).
    lossless : arm -> whether it should reproduce the reference exactly (speculative, temperature 0).
    temperature : the requests' temperature; above 0 the comparison is reported but not judged.
    """
    ok = [r for r in records if not r.get("error") and r.get("output_text") is not None]
    ref_out: dict[tuple, dict] = {}
    for r in sorted((r for r in ok if r["arm"] == reference), key=lambda r: (r["block"], r.get("started_at") or 0)):
        ref_out.setdefault(_key(r), r)
    cells: dict[tuple, list] = {}
    for r in ok:
        k = _key(r)
        base = ref_out.get(k)
        if base is None or base is r:
            continue
        same = (
            r["output_sha256"] == base["output_sha256"]
            if r.get("output_sha256") and base.get("output_sha256")
            else r["output_text"] == base["output_text"]
        )
        cells.setdefault((r["arm"], r["workload"]), []).append(
            (same, None if same else first_difference(base["output_text"], r["output_text"]), r["block"], r["run"])
        )
    greedy = temperature == 0
    rows = []
    for (arm, wl), pairs in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0] != reference, kv[0][0])):
        n = len(pairs)
        matches = sum(p[0] for p in pairs)
        firsts = [p[1] for p in pairs if p[1] is not None]
        is_ref = arm == reference
        flag = None
        if greedy and matches < n:
            if is_ref:
                flag = SELF_NOTE
            elif lossless.get(arm):
                flag = LOSSLESS_NOTE
        rows.append(
            {
                "arm": arm,
                "workload": wl,
                "against": f"{reference} (first block)" if not is_ref else f"{reference} (its own first block)",
                "pairs": n,
                "exact": matches,
                "exact_match_rate": matches / n if n else None,
                "first_difference_min": min(firsts) if firsts else None,
                "first_difference_median": statistics.median(firsts) if firsts else None,
                "lossless_expected": bool(lossless.get(arm)) and greedy,
                "flag": flag and flag.format(arm=arm, where=""),
                "_note": flag,
            }
        )
    return {
        "reference": reference,
        "temperature": temperature,
        "judged": greedy,
        "position_unit": "character",
        "match_key": ["workload", "prompt_id", "run"],
        "cells": [{k: v for k, v in r.items() if k != "_note"} for r in rows],
        "flags": _flags(rows),
    }


def _flags(rows: list[dict]) -> list[str]:
    """Each arm's flag once, naming the workloads it was raised on where there are several."""
    where: dict[tuple, list[str]] = {}
    for r in rows:
        if r["_note"]:
            where.setdefault((r["arm"], r["_note"]), []).append(str(r["workload"]))
    several = len({r["workload"] for r in rows}) > 1
    return [
        note.format(arm=arm, where=f" on {', '.join(wls)}" if several else "") for (arm, note), wls in where.items()
    ]


def lossless_arms(exp: Experiment) -> dict[str, bool]:
    """Arms that differ from the reference only by speculative decoding (same args and env)."""
    ref = exp.arms[exp.reference]
    out = {}
    for name, arm in exp.arms.items():
        out[name] = (
            arm.speculative is not None and ref.speculative is None and arm.args == ref.args and arm.env == ref.env
        )
    return out


def from_experiment(records: list[dict], exp: Experiment) -> dict:
    if exp.engine.launch == "attach":
        # An attached server keeps its cache across blocks, so each block's prompts carry their own
        # prefix (bracket.block.runner.unique_prefix): arms never see the same prompt text to compare.
        return {
            "reference": exp.reference,
            "temperature": float(exp.request.temperature),
            "judged": False,
            "cells": [],
            "flags": [],
            "skipped": "attach mode: every block's prompts carry a per-block prefix, so no two arms "
            "answered the same prompt",
        }
    # Arena requests run concurrently at a long depth; their outputs are batch-2 outputs, kept out of the gate.
    single = {w for w, wl in exp.workloads.items() if wl.kind != "arena"}
    recs = [r for r in records if r.get("workload") in single and not r.get("control")]  # controls are no arm's
    return agreement(recs, exp.reference, lossless_arms(exp), float(exp.request.temperature))


def write_json(result: dict, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1))
