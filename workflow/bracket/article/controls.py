"""Reproductions and controls: ten-run reproductions, determinism, agreement, arena."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bracket import interop
from bracket.article.elements import Heading, Para, Pre, Section, Table
from bracket.article.inputs import Data, _read_json
from bracket.article.text import DASH, _missing, pct, rate, ratio, span
from bracket.controls.reproduce import OTHER_MODEL, read_verdicts, sentence


@dataclass
class Controls:
    """What the reproduction and control rules wrote beside the experiment's results (each may be absent)."""

    verdicts: list  # results/NAME--repro-*/verdict.json, oldest first
    determinism: dict | None  # results/NAME/determinism.json
    agreement: dict | None  # results/NAME/agreement.json
    arena: dict | None  # results/NAME/arena.json


def load_controls(agreement_json, arena_json, determinism_json, verdict_paths=()) -> Controls:
    """The controls' files the report rule names; a path that is empty or absent is a control not run."""
    return Controls(
        verdicts=read_verdicts(verdict_paths),
        determinism=_read_json(determinism_json),
        agreement=_read_json(agreement_json),
        arena=_read_json(arena_json),
    )


def _yes(x) -> str:
    return "n/a" if x is None else ("yes" if x else "no")


def reproduction_table(v: dict) -> pd.DataFrame:
    rows = []
    for c in v.get("cells", []):
        for who in ("original", "reproduction"):
            f = c.get(who)
            if not f:
                continue
            rows.append(
                {
                    "workload": c["workload"],
                    "session": who,
                    "runs": f["n"],
                    "median": rate(f["median"]),
                    "median CI": span(f.get("ci_low"), f.get("ci_high"), 2),
                    "range": span(f["min"], f["max"]),
                    "spread": pct(f["spread"]),
                    f"ratio to {f.get('reference')}": ratio(f.get("ratio")),
                    "ratio CI": (
                        f"{ratio(f['ratio_ci_low'])}{DASH}{ratio(f['ratio_ci_high'])}"
                        if not _missing(f.get("ratio_ci_low"))
                        else ""
                    ),
                    "verdict": c["verdict"] if who == "reproduction" else "",
                }
            )
    return pd.DataFrame(rows)


def section_reproductions(d: Data, c: Controls) -> Section | None:
    if not c.verdicts:
        return None
    s = Section([Heading("Reproductions")])
    s.add(
        Para(
            "Each reproduction ran one arm again in fresh servers, bracketed by the reference (reference, arm, "
            "reference), and compared it with the figures above. Ratios to the reference from the same session "
            "survive thermal drift; absolute numbers don't, so both are checked."
        )
    )
    s.add(Para(f"Rule: {c.verdicts[0].get('rule', '')}.", "note"))
    for v in c.verdicts:
        s.add(
            Heading(
                f"{v.get('arm')}: {v.get('verdict')} ({v.get('name')}, {v.get('runs')} runs per block, "
                f"{str(v.get('created', ''))[:16].replace('T', ' ')})",
                3,
            )
        )
        s.add(
            Table(reproduction_table(v), f"{v.get('arm')}: published vs reproduced", f"reproduction_{v.get('id')}.csv")
        )
        if v.get("verdict") == OTHER_MODEL:
            s.add(Para(f"Not compared: {v.get('refused')}.", "warn"))
            continue
        for cell in v.get("cells", []):
            if cell.get("original") and cell.get("reproduction"):
                s.add(
                    Para(
                        f"{cell['workload']}: {sentence(cell)}. Original median inside the reproduction's CI: "
                        f"{_yes(cell.get('median_inside_ci'))}; original ratio inside its ratio CI: "
                        f"{_yes(cell.get('ratio_inside_ci'))}.",
                        "warn" if cell["verdict"] == "does not hold" else "",
                    )
                )
            elif cell.get("note"):
                s.add(Para(f"{cell['workload']}: {cell['verdict']}: {cell['note']}.", "note"))
        if v.get("ledger", {}).get("entries"):
            s.add(Para("The figures that did not hold are entered in the corrections ledger (below).", "note"))
    return s


def determinism_table(arm: dict) -> pd.DataFrame:
    rows = [
        {
            "config": r["config"],
            "repeat": r["repeat"] + 1,
            "request": r["request"],
            "output sha256": (r["output_sha256"] or "")[:16] + "...",
            "tokens": r["completion_tokens"],
            "cached": r["cached_tokens"],
            "error": r["error"] or "",
        }
        for r in arm.get("rows", [])
    ]
    return pd.DataFrame(rows)


def section_determinism(d: Data, c: Controls) -> Section | None:
    det = c.determinism
    if not det:
        return None
    s = Section([Heading("Determinism control: batch 1 vs batch 2")])
    s.add(
        Para(
            f"The same request ({det['workload']} prompt {det['prompt_id']}, {det['max_tokens']} tokens, temperature 0) "
            f"sent alone (batch 1) and together with an identical second request (batch 2, requests A and B), "
            f"each repeated {det['repeats']} times in one fresh server, prefix cache {det['prefix_cache']}. "
            f"No arm's feature is needed to change the batch shape, so this tells whether batching alone "
            f"changes greedy output."
        )
    )
    for a in det.get("arms", []):
        s.add(Heading(f"{a['arm']}: {a['verdict']}", 3), Para(a.get("reading", "")))
        s.add(Table(determinism_table(a), f"Output hashes of {a['arm']}", f"determinism_{a['arm']}.csv"))
    return s


def agreement_table(agr: dict) -> pd.DataFrame:
    rows = []
    for r in agr.get("cells", []):
        rows.append(
            {
                "arm": r["arm"],
                "workload": r["workload"],
                "against": r["against"],
                "exact matches": f"{r['exact']} / {r['pairs']}",
                "rate": pct(r["exact_match_rate"], 0),
                "first difference (char), min": ""
                if r["first_difference_min"] is None
                else int(r["first_difference_min"]),
                "median": "" if r["first_difference_median"] is None else f"{r['first_difference_median']:g}",
                "should be lossless": _yes(r["lossless_expected"]),
                "flag": "FLAG" if r["flag"] else "",
            }
        )
    return pd.DataFrame(rows)


def section_agreement(d: Data, c: Controls) -> Section | None:
    agr = c.agreement
    if not agr or not agr.get("cells"):
        return None
    s = Section([Heading("Greedy agreement with the reference")])
    s.add(
        Para(
            f"Each arm's output compared with the {agr['reference']} arm's on the same prompt (same workload, prompt "
            f"and run index, so the same unique prefix): the share that is byte-identical, and where the first "
            f"difference falls, counted in characters of the output. The reference's later blocks are compared "
            f"with its first, which shows whether a fresh server reproduces itself."
        )
    )
    if not agr.get("judged"):
        s.add(
            Para(
                f"Requests ran at temperature {agr['temperature']}: outputs are sampled, so disagreement is "
                f"expected and nothing is flagged.",
                "note",
            )
        )
    s.add(Table(agreement_table(agr), "Greedy agreement per arm and workload", "agreement.csv"))
    for f in agr.get("flags", []):
        s.add(Para(f.replace("NAME", getattr(d, "name", "NAME")), "warn"))
    det = c.determinism
    if agr.get("flags") and det:
        verdicts = {a["arm"]: a["verdict"] for a in det.get("arms", [])}
        s.add(
            Para(
                "The determinism control above found: "
                + "; ".join(f"{k}: {v}" for k, v in verdicts.items())
                + (
                    ". Batch shape alone changes greedy output here, which explains a lossless arm's divergence "
                    "without blaming the arm."
                    if any("paths" in v for v in verdicts.values())
                    else "."
                )
            )
        )
    return s


def _pm(m: dict | None, digits: int = 1) -> str:
    """llama-benchy's way of showing a metric: mean ± population SD."""
    return "" if not m else f"{m['mean']:.{digits}f} ± {m['std']:.{digits}f}"


def _unresolved(cell: dict) -> str:
    """What the cell's window rate is when no run gave one: the runs' reasons, counted."""
    runs = cell.get("runs") or []
    bursts = sum(1 for r in runs if (r.get("invalid_reason") or {}).get("code") == "bursts")
    if runs and bursts == len(runs):
        return f"not known: in all {len(runs)} runs one read brought half a stream or more"
    return f"no valid run of {len(runs)}" + (f" ({bursts} in bursts)" if bursts else "")


def arena_table(ar: dict) -> pd.DataFrame:
    rows = []
    for cell in ar.get("cells", []):
        sm = cell.get("summary") or {}
        lb = cell.get("llama_benchy") or {}
        rows.append(
            {
                "arm": cell["arm"],
                "workload": cell["workload"],
                "depth + prompt (asked / served)": f"{cell['depth']} + {cell.get('prompt_tokens', 0)} / {cell.get('depth_measured')}",
                "users": cell["users"],
                "tokens per user": cell["tokens"],
                "runs": sm.get("n", 0),
                "window rate, median": rate(sm.get("median")) if sm else _unresolved(cell),
                "CI": span(sm.get("ci_low"), sm.get("ci_high"), 2) if sm else "",
                "spread": pct(sm.get("spread")) if sm else "",
                "llama-benchy tg": _pm(lb.get("tg_throughput")),
                "llama-benchy pp": _pm(lb.get("pp_throughput")),
                "llama-benchy ttfr (ms)": _pm(lb.get("ttfr"), 0),
                "coherence": (cell.get("coherence") or {}).get("status", "not checked"),
            }
        )
    return pd.DataFrame(rows)


def section_arena(d: Data, c: Controls) -> Section | None:
    ar = c.arena
    if not ar or not ar.get("cells"):
        return None
    s = Section([Heading("The Spark Arena cell")])
    s.add(
        Para(
            "Spark Arena ranks one cell, measured by llama-benchy: concurrent users at a fixed context depth, "
            "decode only. bracket sends llama-benchy's requests (a system message of depth tokens of text, a "
            "user message of prompt tokens more, chat streamed, every user at one instant, each its own slice "
            "of the text) and reads the cell both ways. bracket's window rate is the decode tokens of all users "
            "(each user's tokens after those of its first network read, which came at the window's start) over "
            "the window from the first user's first token to the last user's last token, given as the median of "
            "the runs with a bootstrap CI; a run where one read brought half a user's stream or more is invalid, "
            "since too few reads remain to time it. llama-benchy's tg counts the same tokens over the same "
            "window, and is given as mean ± SD over runs, "
            "with no interval. Neither is bracket's decode rate of single-stream workloads, which counts the "
            "first token and the prefill in its time. Set beside the leaderboard only at the same depth, "
            "prompt, users and tokens."
        )
    )
    s.add(Table(arena_table(ar), "The arena cell in both definitions, per arm", "arena.csv"))
    failed = [c for c in ar["cells"] if (c.get("coherence") or {}).get("status") == "failed"]
    if failed:
        co = failed[0]["coherence"]
        where = ", ".join(
            dict.fromkeys(
                f"{c['arm']} / {c['workload']}" + (f" ({c['phase']})" if c.get("phase") else "") for c in failed
            )
        )
        s.add(
            Para(
                f"The model failed llama-benchy's coherence check in {where}: asked {co['question']!r}, it "
                f'answered {(co["answers"] or [""])[0][:120]!r}, without "Paris". llama-benchy stops its run '
                f"there; bracket kept measuring, so these numbers are the speed of a model that does not answer "
                f"sensibly (a wrong chat template, a broken quantisation, or a model too small to know).",
                kind="warn",
            )
        )
    for arm in dict.fromkeys(cell["arm"] for cell in ar["cells"] if cell.get("llama_benchy")):
        s.add(
            Para(
                f"llama-benchy's own table of arm {arm}, as its --format md prints it, from the same runs "
                f"(bracket summarize results/NAME/arena.json --format llama-benchy): the rows the Spark Arena "
                f"reads are the tg and pp rows without ctx_."
            ),
            Pre(interop.benchy_markdown(interop.export_arena(ar, arm))),
        )
    return s
