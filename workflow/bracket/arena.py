"""The Spark Arena / llama-benchy cell, parameter for parameter.

Seed 004: Spark Arena ranks one cell, 128 generated tokens at a context depth of 16,384 with two
concurrent users, measured by llama-benchy 0.4.0. Its cell, as llama_benchy/runner.py builds it:

- depth (--depth): context tokens, sent as a system message; pp (--pp, default 2048): prompt
  tokens on top of the depth, sent as the user message; the server's prompt_tokens is depth + pp
  (llama-benchy counts the chat template inside the depth);
- tg (--tg): response tokens (bracket pins them with ignore_eos and min_tokens: --exact-tg);
- concurrency (--concurrency): users sending at the same instant, each its own slice of the text;
- chat requests (/v1/chat/completions, streamed, usage and token ids asked for);
- cache: each request is a fresh random slice of the book, so nothing but the template repeats;
  --no-cache adds a unique suffix and cache_prompt false (`cache: no_cache`);
- one warmup run per cell, then --runs runs (bracket: design.warmup_runs and runs_per_block).

Its definitions (llama_benchy/results.py), per run, from each user's start, first response
event, first token event, last token event and tokens:

    pp   = sum_u prompt_tokens_u / (max_u t_first_token,u - min_u t_start,u)    (concurrency > 1)
         = prompt_tokens / (ttfr - latency)                                     (concurrency 1)
    tg   = sum_u decode_u / (max_u t_last,u - min_u t_first,u)                  (concurrency > 1)
         = decode / (t_last - t_first)                                          (concurrency 1)
    ttfr = t_first_response - t_start (ms; a chat stream's role chunk counts),
    e2e_ttft = t_first_token - t_start (ms), est_ppt = ttfr - latency (ms),

decode_u being the tokens after the first token event (n - 1, unless the first event carried
several), and each reported as mean +/- SD (numpy's population SD) over runs. bracket sets
latency to 0 (llama-benchy's --latency-mode none; its default subtracts the mean time of three
GET /v1/models, about a millisecond on one host). bracket's own number for the cell is the window
rate of each run, sum_u (n_u - 1) / (max t_last - min t_first), summarised as a median with a
bootstrap CI; the cell's records are ordinary raw records (started_at, ttft_s, tg_tok_s,
completion_tokens, prompt_tokens), plus ttfr_s and first_event_tokens for llama-benchy's reading.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import threading
from pathlib import Path

import numpy as np
from rich.console import Console

from bracket import arena_text, records, session

DEFAULTS = {"depth": 16384, "users": 2, "tokens": 128, "prompt_tokens": 2048}
console = Console(stderr=True, highlight=False)
_calibrated: dict[tuple, tuple] = {}


def spec(wl: dict) -> dict:
    """The cell of an arena workload: depth, users, tokens, prompt_tokens, api, cache (defaults where absent)."""
    out = {k: int(wl[k]) if wl.get(k) is not None else v for k, v in DEFAULTS.items()}
    out["api"] = wl.get("api") or "chat"
    out["cache"] = wl.get("cache") or "fresh"
    out["text"] = wl.get("text") or None
    return out


def is_arena(wl: dict) -> bool:
    return (wl or {}).get("kind", "single") == "arena"


def problems(cfg: dict) -> list[str]:
    """What makes an arena workload unrunnable on this engine, one sentence each, before anything starts."""
    out = []
    kind = cfg["engine"]["kind"]
    for name, wl in cfg["workloads"].items():
        if not is_arena(wl):
            continue
        s = spec(wl)
        why = arena_text.chat_refusal(kind) if s["api"] == "chat" else None
        if why:
            out.append(f"workloads.{name} is an arena cell with api: chat (llama-benchy's request), but {why}. "
                       f"Set workloads.{name}.api: completions (context and prompt as one text through /generate), "
                       f"or attach to the server's OpenAI-compatible endpoint (engine.kind: openai, engine.launch: "
                       f"attach, engine.base_url).")
        if s["text"] and not Path(s["text"]).is_file():
            out.append(f"workloads.{name}.text is {s['text']!r}, which is not a file; name a long text file "
                       f"(a book) or remove text to use the built-in deterministic text.")
    return out


# ---- calibration -----------------------------------------------------------------------------------------

def _solve(f, target: int, start: int, floor: int = 0, tries: int = 6) -> int:
    """Words w with f(w) within 0.5 % (or 2 tokens) of target, by secant steps from `start`."""
    w, best, best_err = max(start, 1), max(start, 1), math.inf
    for _ in range(tries):
        n = f(w)
        if not n:
            raise RuntimeError("the server reported no prompt_tokens; the arena cell cannot set its depth")
        err = abs(n - target)
        if err < best_err:
            best, best_err = w, err
        if err <= max(2, target * 0.005):
            break
        w = max(1, int(round(w * max(target - floor, 1) / max(n - floor, 1))))
    return best


def calibrate(count, words: tuple[str, ...], depth: int, pp: int) -> tuple[int, int]:
    """(context words, prompt words) that make `pp` prompt tokens and `depth + pp` in all, as the server counts.

    count(context, prompt) is the server's prompt_tokens for one request. The prompt is sized
    against the template's own tokens (a request whose prompt is "."); the context then fills
    the rest, so the total is depth + pp, as in llama-benchy (which counts the template inside
    the depth).
    """
    base = count("", ".") - 1  # the template's tokens around a one-token prompt
    if depth == 0:
        return 0, _solve(lambda w: count("", arena_text.join(words[:w])), pp, int(pp * 0.75), floor=base)
    pp_words = _solve(lambda w: count("", arena_text.join(words[:w])) - base, pp, int(pp * 0.75)) if pp else 0
    prompt = arena_text.join(words[len(words) // 2:len(words) // 2 + pp_words]) if pp_words else ""
    alone = count("", prompt)
    ctx_words = _solve(lambda w: count(arena_text.join(words[:w]), prompt), depth + pp, int(depth * 0.75),
                       floor=alone)
    return ctx_words, pp_words


# ---- one run ---------------------------------------------------------------------------------------------

def run_cell(cfg: dict, experiment: str, block, arm: dict, adapter, wl_name: str, prompts: list[dict], http,
             base: str, server_id: str, run: int, warm: bool, draft_budget) -> list[dict]:
    """One run of the cell: `users` requests sent at one instant; one raw record per user."""
    wl = spec(cfg["workloads"][wl_name])
    req = {**cfg["request"], "max_tokens": wl["tokens"]}
    model = session.served_name(adapter, cfg, http, base)
    words = arena_text.words_of(wl)
    no_cache = wl["cache"] == "no_cache"

    def send(context, prompt, request):
        return arena_text.send(adapter, http, base, model, context, prompt, request, req["seed"], arm, wl["api"],
                               no_cache)

    key = (server_id, wl_name)
    if key not in _calibrated:
        def count(context, prompt):
            m = send(context, prompt, {**req, "max_tokens": 1})[0]
            if m.error or not m.prompt_tokens:
                raise RuntimeError(f"the arena cell's calibration request failed: {m.error or 'no prompt_tokens'}")
            return m.prompt_tokens
        ctx_words, pp_words = calibrate(count, words, wl["depth"], wl["prompt_tokens"])
        tokens = arena_text.token_counter(http, base, model)
        ctx_tokens = tokens(arena_text.join(words[:ctx_words])) if tokens and ctx_words else 0
        pp_tokens = tokens(arena_text.join(words[len(words) // 2:len(words) // 2 + pp_words])) \
            if tokens and pp_words else 0
        _calibrated[key] = (ctx_words, pp_words, tokens, ctx_tokens, pp_tokens)
    ctx_words, pp_words, tokens, ctx_tokens, pp_tokens = _calibrated[key]
    seed = cfg["design"]["seed"]
    texts = [arena_text.request_texts(words, ctx_words, pp_words, seed, wl_name, block.position, run, u, no_cache,
                                      tokens, ctx_tokens, pp_tokens)
             for u in range(wl["users"])]
    barrier = threading.Barrier(len(texts))

    def one(ct):
        barrier.wait()
        return send(ct[0], ct[1], req)

    with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
        out = list(pool.map(one, texts))
    recs = [records.new_record(
        experiment=experiment, arm=block.arm, block=block.position, round=block.round, position=block.position,
        run=run, warmup=warm, workload=wl_name,
        prompt_id=f"d{wl['depth']}+pp{wl['prompt_tokens']}-user{u + 1}of{wl['users']}",
        server_id=server_id, draft_budget=draft_budget, max_tokens=wl["tokens"], **m.fields(), **extra)
        for u, (m, extra) in enumerate(out)]
    w = window_rate(recs)
    tag = "warmup" if warm else f"run {run - cfg['design']['warmup_runs'] + 1}/{cfg['design']['runs_per_block']}"
    rate = f"{w['window_tok_s']:8.1f} tok/s" if w["window_tok_s"] else "   (no rate)"
    errs = "; ".join(sorted({m.error for m, _ in out if m.error}))[:300]
    console.print(f"  arena {block.arm:<12} {wl_name:<6} {tag:<9} {rate} over {wl['users']} users at "
                  f"{out[0][0].prompt_tokens} prompt tokens" + (f"  [red]{errs}[/]" if errs else ""))
    return recs


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
    """bracket's window rate of one run: sum_u (n_u - 1) over the first user's first to the last user's last token."""
    firsts, lasts, tokens = [], [], 0
    for r in user_records:
        t = _times(r)
        if t is None:
            return {"window_s": None, "decode_tokens": None, "window_tok_s": None}
        firsts.append(t[2])
        lasts.append(t[3])
        tokens += r["completion_tokens"] - 1
    window = max(lasts) - min(firsts)
    return {"window_s": window, "decode_tokens": tokens,
            "window_tok_s": tokens / window if window > 0 else None}


def benchy_run(user_records: list[dict]) -> dict:
    """llama-benchy's values for one run (module docstring): batch pp and tg, and per-request tg, ttfr, e2e_ttft."""
    ts = [t for t in (_times(r) for r in user_records) if t is not None]
    prompts = [r.get("prompt_tokens") or 0 for r in user_records if _times(r) is not None]
    out = {"pp": None, "tg": None, "tg_req": [], "ttfr_ms": [], "e2e_ttft_ms": [], "pp_req": []}
    if not ts:
        return out
    for (t0, fr, ft, lt, dec), p in zip(ts, prompts):
        out["ttfr_ms"].append((fr - t0) * 1000)
        out["e2e_ttft_ms"].append((ft - t0) * 1000)
        if fr > t0 and p:
            out["pp_req"].append(p / (fr - t0))
        if lt > ft and dec > 0:
            out["tg_req"].append(dec / (lt - ft))
    if len(user_records) == 1:
        out["pp"] = out["pp_req"][0] if out["pp_req"] else None
        out["tg"] = out["tg_req"][0] if out["tg_req"] else None
        return out
    pp_window = max(t[2] for t in ts) - min(t[0] for t in ts)
    tg_window = max(t[3] for t in ts) - min(t[2] for t in ts)
    decode = sum(t[4] for t in ts)
    out["pp"] = sum(prompts) / pp_window if pp_window > 0 and sum(prompts) else None
    out["tg"] = decode / tg_window if tg_window > 0 and decode else None
    return out


def metric(values: list[float]) -> dict | None:
    """llama-benchy's BenchmarkMetric: mean, population SD (numpy's default), the raw values."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return None
    return {"mean": float(np.mean(v)), "std": float(np.std(v)), "values": v}


def benchy_cell(runs: list[dict], users: int) -> dict:
    """One llama-benchy BenchmarkRun's metrics from the per-run values of benchy_run."""
    pp_req = metric([x for r in runs for x in r["pp_req"]])
    tg_req = metric([x for r in runs for x in r["tg_req"]])
    pp, tg = metric([r["pp"] for r in runs]), metric([r["tg"] for r in runs])
    ttfr, e2e = metric([x for r in runs for x in r["ttfr_ms"]]), metric([x for r in runs for x in r["e2e_ttft_ms"]])
    return {"pp_throughput": pp, "pp_req_throughput": pp if users == 1 else pp_req,
            "tg_throughput": tg, "tg_req_throughput": tg if users == 1 else tg_req,
            "peak_throughput": None, "peak_req_throughput": None,
            "ttfr": ttfr, "est_ppt": ttfr, "e2e_ttft": e2e}


DEFINITION = ("window rate: sum over users of (completion_tokens - 1) / (last user's last token - first user's "
              "first token), per run; median and bootstrap CI over runs")
BENCHY_DEFINITION = ("llama-benchy 0.4.0: tg = decode tokens after each user's first token event / the same "
                     "window, pp = prompt tokens / (last first token - first start), ttfr to the first response "
                     "event; mean +/- population SD over runs; latency 0 (--latency-mode none)")


def summarize(raw: list[dict], cfg: dict) -> dict:
    """results/NAME/arena.json: per arm and arena workload, each timed run in both definitions and their summaries."""
    from bracket.stats.summary import summarize as summarize_cell

    a = cfg["analysis"]
    out = {"definition": DEFINITION, "llama_benchy_definition": BENCHY_DEFINITION, "cells": []}
    for wl_name in [w for w, wl in cfg["workloads"].items() if is_arena(wl)]:
        wl = spec(cfg["workloads"][wl_name])
        for arm in cfg["arms"]:
            runs: dict[tuple, list] = {}
            for r in raw:
                if r.get("workload") == wl_name and r.get("arm") == arm and not r.get("warmup"):
                    runs.setdefault((r["block"], r["run"]), []).append(r)
            rows, benchy = [], []
            for (blk, run), recs in sorted(runs.items()):
                w = window_rate(recs)
                valid = w["window_tok_s"] is not None and all(not records.validity(x) for x in recs) \
                    and len(recs) == wl["users"]
                b = benchy_run(recs)
                if valid:
                    benchy.append(b)
                rows.append({"block": blk, "run": run, "users": len(recs),
                             "prompt_tokens": [x.get("prompt_tokens") for x in recs], "valid": valid, **w,
                             "llama_benchy_tg": b["tg"], "llama_benchy_pp": b["pp"]})
            if not rows:
                continue
            vals = [r["window_tok_s"] for r in rows if r["valid"]]
            summary = None
            if vals:
                s = summarize_cell(vals, confidence=a["confidence"], n_resamples=a["bootstrap_resamples"],
                                   rng=a["seed"], spread_warning=a["spread_warning"], seed=a["seed"])
                summary = {"n": s.n, "median": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high, "min": s.min,
                           "max": s.max, "spread": s.spread, "warnings": list(s.warnings)}
            depths = sorted(t for r in rows for t in r["prompt_tokens"] if t)
            out["cells"].append({
                "arm": arm, "workload": wl_name, **{k: v for k, v in wl.items() if k != "text"},
                "text": wl["text"] or "built-in deterministic text (bracket.arena_text)",
                "depth_measured": int(depths[len(depths) // 2]) if depths else None,
                "runs": rows, "summary": summary,
                "llama_benchy": {"concurrency": wl["users"], "context_size": wl["depth"],
                                 "prompt_size": wl["prompt_tokens"], "response_size": wl["tokens"],
                                 "is_context_prefill_phase": False, **benchy_cell(benchy, wl["users"]),
                                 "throughput_over_time": None, "requests_throughput_over_time": None}})
    return out


def write_json(result: dict, path: str | Path) -> None:
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        return o
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1, default=clean))
