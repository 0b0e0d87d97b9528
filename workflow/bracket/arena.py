"""The Spark Arena / llama-benchy cell: concurrent users at a fixed context depth.

Seed 004: Spark Arena ranks one cell, 128 generated tokens at a context depth of 16,384 with two
concurrent users, measured by llama-benchy, decode only. llama-benchy's rate (results.py, batch
throughput) is the decode tokens of all users, each user's tokens after its first, divided by the
window from the first user's first token to the last user's last token::

    window rate = sum_u (n_u - 1) / (max_u t_last,u - min_u t_first,u)

Prefill sits outside that window. Each run sends `users` identical-depth requests at one instant
(a barrier), each with its own unique prefix so no user's prefill is served from another's cache.
One raw record per user request (the contract's fields only); the window rate is recomputed from
them (`window_rate`): t_first = started_at + ttft_s, t_last = t_first + (n - 1) / tg_tok_s. The
client takes started_at a few hundred microseconds before its own clock starts, the same for
every user, which shifts the window by that much and changes nothing else.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import math
import threading
from pathlib import Path

from rich.console import Console

from bracket import records
from bracket.client import stream_completion

DEFAULTS = {"depth": 16384, "users": 2, "tokens": 128}
console = Console(stderr=True, highlight=False)
_calibrated: dict[tuple, int] = {}


def served_name(adapter, cfg: dict, http, base: str) -> str:
    """The model name requests carry (the adapter's, when it can ask the server)."""
    ask = getattr(adapter, "request_model", None)
    return ask(cfg, http, base) if ask else "bracket-model"


def spec(wl: dict) -> dict:
    """The cell of an arena workload: depth, users, tokens (schema defaults where absent)."""
    return {k: int(wl.get(k) or v) for k, v in DEFAULTS.items()}


def is_arena(wl: dict) -> bool:
    return (wl or {}).get("kind", "single") == "arena"


def _prefix(seed: int, workload: str, run: int, user: int) -> str:
    return f"# {hashlib.sha256(f'{seed}:{workload}:{run}:user{user}'.encode()).hexdigest()[:10]}\n"


def _corpus(prompts: list[dict]) -> str:
    return "\n\n".join(p["prompt"] for p in prompts)


def context(prompts: list[dict], chars: int) -> str:
    """The prompts' text, repeated and cut to `chars` characters."""
    corpus = _corpus(prompts)
    return (corpus * (chars // max(len(corpus), 1) + 1))[:chars]


def calibrate(count_tokens, prompts: list[dict], depth: int, tries: int = 6) -> int:
    """Characters of `context` that make `depth` prompt tokens, as the server counts them.

    `count_tokens(text)` returns the server's prompt_tokens for a text. Proportional steps, then
    stop within 0.5 % (or 2 tokens); the final count is what the records report.
    """
    chars = depth * 4
    best = chars
    for _ in range(tries):
        n = count_tokens(context(prompts, chars))
        if not n:
            raise RuntimeError("the server reported no prompt_tokens; the arena cell cannot set its depth")
        best = chars
        if abs(n - depth) <= max(2, depth * 0.005):
            break
        chars = max(1, int(chars * depth / n))
    return best


def window_rate(user_records: list[dict]) -> dict:
    """llama-benchy's batch decode rate over the window (module docstring), from one run's user records."""
    firsts, lasts, tokens = [], [], 0
    for r in user_records:
        n, t0, ttft = r.get("completion_tokens"), r.get("started_at"), r.get("ttft_s")
        if r.get("error") or not n or t0 is None or ttft is None:
            return {"window_s": None, "decode_tokens": None, "window_tok_s": None}
        first = t0 + ttft
        if r.get("tg_tok_s"):
            last = first + (n - 1) / r["tg_tok_s"]
        else:  # one stream event: the last token came with the first
            last = first
        firsts.append(first)
        lasts.append(last)
        tokens += n - 1
    window = max(lasts) - min(firsts)
    return {"window_s": window, "decode_tokens": tokens,
            "window_tok_s": tokens / window if window > 0 else None}


def run_cell(cfg: dict, experiment: str, block, arm: dict, adapter, wl_name: str, prompts: list[dict], http,
             base: str, server_id: str, run: int, warm: bool, draft_budget) -> list[dict]:
    """One run of the cell: `users` concurrent requests at `depth`; one raw record per user."""
    wl = spec(cfg["workloads"][wl_name])
    req = {**cfg["request"], "max_tokens": wl["tokens"]}
    url = base + getattr(adapter, "request_path", "/v1/completions")
    key = (server_id, wl_name)
    model = served_name(adapter, cfg, http, base)
    if key not in _calibrated:
        def count(text):
            body = adapter.request_body(model, "# calibrate\n" + text, {**req, "max_tokens": 1},
                                        seed=req["seed"])
            return stream_completion(http, url, body, req["timeout_s"]).prompt_tokens
        _calibrated[key] = calibrate(count, prompts, wl["depth"])
    text = context(prompts, _calibrated[key])
    seed = cfg["design"]["seed"]
    bodies = [adapter.request_body(model, _prefix(seed, wl_name, run, u) + text, req, seed=req["seed"])
              for u in range(wl["users"])]
    barrier = threading.Barrier(len(bodies))

    def one(body):
        barrier.wait()
        return stream_completion(http, url, body, req["timeout_s"])

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        ms = list(pool.map(one, bodies))
    recs = [records.new_record(
        experiment=experiment, arm=block.arm, block=block.position, round=block.round, position=block.position,
        run=run, warmup=warm, workload=wl_name, prompt_id=f"depth{wl['depth']}-user{u + 1}of{wl['users']}",
        server_id=server_id, draft_budget=draft_budget, max_tokens=wl["tokens"], **m.fields())
        for u, m in enumerate(ms)]
    w = window_rate(recs)
    tag = "warmup" if warm else f"run {run - cfg['design']['warmup_runs'] + 1}/{cfg['design']['runs_per_block']}"
    rate = f"{w['window_tok_s']:8.1f} tok/s" if w["window_tok_s"] else "   (no rate)"
    depth = ms[0].prompt_tokens
    console.print(f"  arena {block.arm:<12} {wl_name:<6} {tag:<9} {rate} over {wl['users']} users at depth {depth}")
    return recs


def summarize(raw: list[dict], cfg: dict) -> dict:
    """results/NAME/arena.json: per arm and arena workload, the window rate of each timed run and its summary."""
    from bracket.stats.summary import summarize as summarize_cell

    a = cfg["analysis"]
    out = {"definition": "sum over users of (completion_tokens - 1) / (last user's last token - first user's "
                         "first token), llama-benchy's batch decode rate", "cells": []}
    arena_wls = [w for w, wl in cfg["workloads"].items() if is_arena(wl)]
    for wl_name in arena_wls:
        wl = spec(cfg["workloads"][wl_name])
        for arm in cfg["arms"]:
            runs: dict[tuple, list] = {}
            for r in raw:
                if r.get("workload") == wl_name and r.get("arm") == arm and not r.get("warmup"):
                    runs.setdefault((r["block"], r["run"]), []).append(r)
            rows = []
            for (blk, run), recs in sorted(runs.items()):
                w = window_rate(recs)
                valid = w["window_tok_s"] is not None and all(not records.validity(x) for x in recs) \
                    and len(recs) == wl["users"]
                rows.append({"block": blk, "run": run, "users": len(recs),
                             "prompt_tokens": [x.get("prompt_tokens") for x in recs],
                             "valid": valid, **w})
            if not rows:
                continue
            vals = [r["window_tok_s"] for r in rows if r["valid"]]
            summary = None
            if vals:
                s = summarize_cell(vals, confidence=a["confidence"], n_resamples=a["bootstrap_resamples"],
                                   rng=a["seed"], spread_warning=a["spread_warning"], seed=a["seed"])
                summary = {"n": s.n, "median": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high, "min": s.min,
                           "max": s.max, "spread": s.spread, "warnings": list(s.warnings)}
            depths = [t for r in rows for t in r["prompt_tokens"] if t]
            out["cells"].append({"arm": arm, "workload": wl_name, **wl,
                                 "depth_measured": int(sorted(depths)[len(depths) // 2]) if depths else None,
                                 "runs": rows, "summary": summary})
    return out


def write_json(result: dict, path: str | Path) -> None:
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        return o
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1, default=clean))
