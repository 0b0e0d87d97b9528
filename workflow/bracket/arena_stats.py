"""The arena cell's analysis: bracket's window rate and llama-benchy's pp, tg and ttfr, per run and per cell.

The definitions are llama-benchy 0.4.0's (llama_benchy/results.py) and bracket's own, both
spelled out in bracket.arena's docstring; this module reads raw records only (bracket.arena runs
the cell, this one reads what it wrote).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from bracket import records
from bracket.arena import is_arena, spec


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
