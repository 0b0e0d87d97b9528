"""The arena cell's analysis: bracket's window rate and llama-benchy's pp, tg and ttfr, per run and per cell.

The definitions are llama-benchy 0.4.0's (llama_benchy/results.py) and bracket's own, both
spelled out in bracket.arena.run's docstring; this module reads raw records only (bracket.arena.run runs
the cell, this one reads what it wrote).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from bracket import records
from bracket.arena import benchy as arena_benchy
from bracket.arena import coherence as arena_coherence
from bracket.experiment.arena_workload import is_arena, spec
from bracket.stats import findings as F
from bracket.stats.summary import summarize as summarize_cell
from bracket.typed.experiment import Experiment

# ---- the two definitions ---------------------------------------------------------------------------------


def _times(r: dict) -> tuple[float, float, float, float, int] | None:
    """(start, first response, first token, last token, decode tokens) of one user's record, or None."""
    n, t0, ttft = r.get("completion_tokens"), r.get("started_at"), r.get("ttft_s")
    if r.get("error") or not n or t0 is None or ttft is None:
        return None
    first = t0 + ttft
    last = first + (n - 1) / r["tg_tok_s"] if r.get("tg_tok_s") else first  # one event: all came at once
    ttfr = r.get("ttfr_s")
    k1 = r.get("first_event_tokens") or 1
    return t0, t0 + (ttfr if ttfr is not None else ttft), first, last, max(n - k1, 0)


def window_rate(user_records: list[dict]) -> dict:
    """bracket's window rate of one run: the tokens each user received after its first read (sum_u n_u - k1_u, k1
    the tokens the first text event carried, 1 when not recorded) over the first user's first to the last user's
    last token. A token that came in the first read came at the window's start, so it cannot be timed inside it:
    counting it would read 8 tokens per write 29 % fast (bench: eight per write at 200 tok/s)."""
    firsts, lasts, tokens = [], [], 0
    for r in user_records:
        t = _times(r)
        if t is None:
            return {"window_s": None, "decode_tokens": None, "window_tok_s": None}
        firsts.append(t[2])
        lasts.append(t[3])
        tokens += r["completion_tokens"] - first_read_tokens(r)
    window = max(lasts) - min(firsts)
    rate = tokens / window if window > 0 and tokens > 0 else None
    return {"window_s": window, "decode_tokens": tokens, "window_tok_s": rate}


def first_read_tokens(rec: dict) -> int:
    """The tokens a stream's first network read brought (its text_chunks at the first read's time; else the first
    text event's tokens; else 1), at least 1 and at most the stream's tokens."""
    n = int(rec["completion_tokens"])
    chunks = rec.get("text_chunks")
    if chunks and all(k is not None for _, k in chunks):
        t0 = chunks[0][0]
        k1 = sum(k for t, k in chunks if t == t0)
    else:
        k1 = int(rec.get("first_event_tokens") or 1)
    return min(max(k1, 1), n)


def burst_share(rec: dict) -> float | None:
    """The largest share of a stream's tokens that one network read brought (1.0: the whole stream at once).

    From the record's text_chunks (bracket.arena.text.send): chunks with one read time came in one
    read. None where the record keeps no chunks or no token ids.
    """
    chunks = rec.get("text_chunks")
    n = rec.get("completion_tokens")
    if not chunks or not n or any(k is None for _, k in chunks):
        return None
    per_read: dict[float, int] = {}
    for t, k in chunks:
        per_read[t] = per_read.get(t, 0) + k
    return max(per_read.values()) / n


BURST_SHARE = 0.25  # a read that brings a quarter of a stream or more: delivery in bursts
#: A read that brings half a stream or more leaves the window too few reads to time: the run's window rate is
#: not known (one write per stream read 16,779-46,650 tok/s where the truth was 400; the first 30 of 32 tokens
#: late, 9-22x), so the run is invalid, with this reason, and the cell says so instead of leading with it.
BURST_UNRESOLVED = 0.5


def burst_problem(user_records: list[dict]) -> dict | None:
    """Why a run's window rate cannot be known from its reads: a user whose one read brought BURST_UNRESOLVED of
    its stream or more (the largest share and whose), or None."""
    shares = [(burst_share(r), i) for i, r in enumerate(user_records)]
    worst = max(((x, i) for x, i in shares if x is not None), key=lambda xi: (xi[0], -xi[1]), default=None)
    if worst is None or worst[0] < BURST_UNRESOLVED:
        return None
    return {"code": "bursts", "user": worst[1], "share": round(worst[0], 4), "limit": BURST_UNRESOLVED}


def _expected_prompt(wl: dict, phase: str | None) -> int:
    """The prompt tokens llama-benchy expects of a request (its results.add's expected_pp_tokens)."""
    if phase == "ctx":
        return wl["depth"]
    if phase == "inference":
        return wl["prompt_tokens"]
    return wl["depth"] + wl["prompt_tokens"]


def benchy(runs: list[list[dict]], wl: dict, phase: str | None = None) -> tuple[dict, dict]:
    """llama-benchy's metrics of a cell from its timed runs' records, and what it dropped (bracket.arena.benchy).

    Every timed run counts, error records left out, as llama-benchy reads its runs; the latency is
    the one each run's records carry (0 unless the cell's latency mode measured one).
    """
    batches = [
        arena_benchy.batch(
            [arena_benchy.request_of(r) for r in recs],
            _expected_prompt(wl, phase),
            float(recs[0].get("latency_s") or 0.0),
        )
        for recs in runs
    ]
    return arena_benchy.cell(batches, wl["users"]), arena_benchy.dropped(batches, wl["users"])


DEFINITION = (
    "window rate: sum over users of (completion_tokens - the tokens of its first network read) / (last user's last "
    "token - first user's first token), per run; a run where one read brought half a stream or more is invalid (too "
    "few reads to time); median and bootstrap CI over runs"
)
BENCHY_DEFINITION = (
    "llama-benchy 0.4.0, computed as it computes them (bracket.arena.benchy): one time per network "
    "read, tokens placed by their token ids, tg = tokens later than each request's first token "
    "time / first to last token, pp = prompt tokens / (ttfr - latency) (concurrency 1) or over "
    "the last first token - first start, peak = most tokens in 1 s; mean +/- population SD over "
    "requests (concurrency 1) or runs; a window of 0 dropped, and counted here"
)


def _bursts(runs: list[list[dict]]) -> dict:
    """How many runs had a stream of which one network read brought BURST_SHARE of the tokens or more."""
    shares = [[burst_share(r) for r in recs] for recs in runs]
    known = [s for s in shares if any(x is not None for x in s)]
    top = [max(x for x in s if x is not None) for s in known]
    return {
        "runs": len(known),
        "bursty_runs": sum(1 for x in top if x >= BURST_SHARE),
        "share": BURST_SHARE,
        "unresolved_runs": sum(1 for x in top if x >= BURST_UNRESOLVED),
    }


def _findings(cell: dict) -> list[dict]:
    """The cell's findings (bracket.stats.findings records): bursty delivery, and what llama-benchy dropped."""
    K = F.FindingKind
    where = {"arm": cell["arm"], "workload": cell["workload"] + (f" ({cell['phase']})" if cell["phase"] else "")}
    out = []
    b, d = cell["bursts"], cell["llama_benchy_dropped"]
    if b["bursty_runs"]:
        payload = F.Bursty(b["runs"], b["bursty_runs"], b["share"], b.get("unresolved_runs", 0))
        out.append(F.Finding(K.BURSTY, payload, **where).record())
    co = cell.get("coherence") or {}
    if co.get("status") == "failed":
        answer = str((co["answers"] or [""])[0])
        payload = F.Coherence(co["failed"], co["checked"], str(co["question"]), answer)
        out.append(F.Finding(K.COHERENCE, payload, **where).record())
    if d["tg"]:
        payload = F.BenchyDropped(d["tg"], d["of"], str(d["unit"]), str(d["reason"]))
        out.append(F.Finding(K.BENCHY_DROPPED, payload, **where).record())
    return out


def summarize(raw: list[dict], exp: Experiment) -> dict:
    """results/NAME/arena.json: per arm, arena workload and phase, each timed run in both definitions and summaries.

    A prefix-caching cell (cache: prefix) has two phases, as llama-benchy's --enable-prefix-caching:
    "ctx" (the context load) and "inference" (the prompt on the cached context); each is its own cell.
    """
    a = exp.analysis
    checks = [r for r in raw if r.get("control") == "coherence"]
    out = {"definition": DEFINITION, "llama_benchy_definition": BENCHY_DEFINITION, "cells": []}
    for wl_name in [w for w, wl in exp.workloads.items() if is_arena(wl)]:
        wl = spec(exp.workloads[wl_name])
        for arm in exp.arms:
            by_phase: dict = {}
            for r in raw:
                if (
                    r.get("workload") == wl_name
                    and r.get("arm") == arm
                    and not r.get("warmup")
                    and not r.get("control")
                ):
                    by_phase.setdefault(r.get("arena_phase"), {}).setdefault((r["block"], r["run"]), []).append(r)
            for phase in sorted(by_phase, key=lambda p: {"ctx": 0, "inference": 1}.get(p, 2)):
                runs = by_phase[phase]
                rows = []
                for (blk, run), recs in sorted(runs.items()):
                    w = window_rate(recs)
                    bursts = burst_problem(recs)
                    valid = (
                        w["window_tok_s"] is not None
                        and bursts is None
                        and all(not records.validity(x) for x in recs)
                        and len(recs) == wl["users"]
                    )
                    rows.append(
                        {
                            "block": blk,
                            "run": run,
                            "users": len(recs),
                            "prompt_tokens": [x.get("prompt_tokens") for x in recs],
                            "cached_tokens": [x.get("cached_tokens") for x in recs],
                            "valid": valid,
                            "invalid_reason": bursts,
                            **w,
                        }
                    )
                timed = [recs for _, recs in sorted(runs.items())]
                metrics, dropped = benchy(timed, wl, phase)
                for row, recs in zip(rows, timed):  # each run's own llama-benchy tg and pp, beside the window rate
                    b = arena_benchy.batch(
                        [arena_benchy.request_of(r) for r in recs],
                        _expected_prompt(wl, phase),
                        float(recs[0].get("latency_s") or 0.0),
                    )
                    one = wl["users"] == 1
                    row["llama_benchy_tg"] = (b.tg_req[0] if b.tg_req else None) if one else b.tg
                    row["llama_benchy_pp"] = (b.pp_req[0] if b.pp_req else None) if one else b.pp
                vals = [r["window_tok_s"] for r in rows if r["valid"]]
                summary = None
                if vals:
                    sm = summarize_cell(
                        vals,
                        confidence=a.confidence,
                        n_resamples=a.bootstrap_resamples,
                        rng=a.seed,
                        spread_warning=a.spread_warning,
                        seed=a.seed,
                    )
                    summary = {
                        "n": sm.n,
                        "median": sm.median,
                        "ci_low": sm.ci_low,
                        "ci_high": sm.ci_high,
                        "min": sm.min,
                        "max": sm.max,
                        "spread": sm.spread,
                        "warnings": [w.record() for w in sm.warnings],  # as stats.json keeps findings
                    }
                depths = sorted(t for r in rows for t in r["prompt_tokens"] if t)
                latency = next((x["latency_s"] for recs in timed for x in recs if x.get("latency_s") is not None), None)
                cell = {
                    "arm": arm,
                    "workload": wl_name,
                    "phase": phase,
                    **{k: v for k, v in wl.items() if k != "text"},
                    "text": wl["text"] or "built-in deterministic text (bracket.arena.text)",
                    "depth_measured": int(depths[len(depths) // 2]) if depths else None,
                    "latency_ms": latency * 1000 if latency is not None else None,
                    "runs": rows,
                    "summary": summary,
                    "bursts": _bursts(timed),
                    "llama_benchy_dropped": dropped,
                    "coherence": arena_coherence.of_cell(checks, {x.get("server_id") for recs in timed for x in recs}),
                    "llama_benchy": {
                        "concurrency": wl["users"],
                        "context_size": wl["depth"],
                        "prompt_size": wl["prompt_tokens"],
                        "response_size": wl["tokens"],
                        "is_context_prefill_phase": phase == "ctx",
                        **metrics,
                        "throughput_over_time": None,
                        "requests_throughput_over_time": None,
                    },
                }
                cell["findings"] = _findings(cell)
                out["cells"].append(cell)
    out["llama_benchy_metadata"] = metadata(exp, out["cells"])
    return out


def metadata(exp: Experiment, cells: list[dict]) -> dict:
    """llama-benchy's report metadata for these cells, from what bracket ran (not constants).

    latency_mode from the arena workloads ("mixed" where they differ), latency_ms the mean of the
    latencies the cells measured (0 where none), prefix_caching_enabled where any cell cached.
    """
    wls = [spec(exp.workloads[w]) for w in sorted({c["workload"] for c in cells})]
    modes = sorted({w["latency"] for w in wls}) or ["none"]
    lat = [c["latency_ms"] for c in cells if c.get("latency_ms") is not None]
    return {
        "latency_mode": modes[0] if len(modes) == 1 else "mixed",
        "latency_ms": float(np.mean(lat)) if lat else 0.0,
        "prefix_caching_enabled": any(w["cache"] == "prefix" for w in wls),
    }


def write_json(result: dict, path: str | Path) -> None:
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        return o

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1, default=clean))
