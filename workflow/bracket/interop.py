"""The community's result files both ways: llama-benchy 0.4.0 JSON and `vllm bench serve` JSON.

Import. A cell is everything that defines it, kept apart: llama-benchy's prompt size (pp),
context size (depth), concurrency, response size (tg) and phase (a prefix-caching run's context
load is its own cell); vllm bench's input and output length, max concurrency and request rate.
Each imported row says which metric it is, in its workload name, because the tools' rates are
not bracket's decode rate:

- llama-benchy `tg_throughput` (the default): decode tokens after each request's first token event
  over the window from the first first-token to the last last-token (concurrency > 1: all users
  together); the first token and the prefill are outside it. bracket's decode rate is
  completion_tokens / wall time, first token and prefill included, so it reads lower.
- llama-benchy `pp_throughput`, `tg_req_throughput`, `ttfr`, `e2e_ttft` on request (metric=...).
- vllm bench: output_len / (ttft + sum(itl)) per request, bracket's decode rate (first token
  included), from --save-result --save-detailed.

Export. bracket's arena cells (results/NAME/arena.json, bracket.arena.readings.summarize) become a
llama-benchy report (metadata + "benchmarks", the schema of llama_benchy/results.py); raw records
of one workload become a vllm bench serve detailed result. Export then import gives the same
cells (tests/test_interop.py).
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

import numpy as np

BENCHY_METRICS = (
    "pp_throughput",
    "pp_req_throughput",
    "tg_throughput",
    "tg_req_throughput",
    "peak_throughput",
    "peak_req_throughput",
    "ttfr",
    "est_ppt",
    "e2e_ttft",
)
BENCHY_KEYS = ("concurrency", "context_size", "prompt_size", "response_size", "is_context_prefill_phase")
BENCHY_META = {"version": "0.4.0", "latency_mode": "none", "latency_ms": 0.0, "prefix_caching_enabled": False}
METRIC_WORDS = {
    "tg_throughput": "tg",
    "tg_req_throughput": "tg/req",
    "pp_throughput": "pp",
    "pp_req_throughput": "pp/req",
    "ttfr": "ttfr ms",
    "e2e_ttft": "e2e_ttft ms",
    "est_ppt": "est_ppt ms",
}


def benchy_cell_name(b: dict, metric: str = "tg_throughput") -> str:
    """llama-benchy's own test name with every defining parameter: 'tg pp512 tg128 @ d0 c1' (+ ' ctx')."""
    name = (
        f"{METRIC_WORDS.get(metric, metric)} pp{b.get('prompt_size')} tg{b.get('response_size')} "
        f"@ d{b.get('context_size') or 0} c{b.get('concurrency') or 1}"
    )
    return name + (" ctx" if b.get("is_context_prefill_phase") else "")


def benchy_cells(doc: dict) -> list[dict]:
    """A llama-benchy report's cells: defining parameters and every metric, one per BenchmarkRun."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError(
            "not a llama-benchy report: expected a JSON object with 'benchmarks' (llama-benchy "
            "--format json --save-result FILE)"
        )
    cells = []
    for i, b in enumerate(doc["benchmarks"]):
        missing = [k for k in ("prompt_size", "response_size") if b.get(k) is None]
        if missing:
            raise ValueError(
                f"llama-benchy benchmarks[{i}] has no {', '.join(missing)}; without them cells of "
                f"different sizes would merge. Re-run with llama-benchy 0.4 or later."
            )
        cell = {
            "concurrency": int(b.get("concurrency") or 1),
            "context_size": int(b.get("context_size") or 0),
            "prompt_size": int(b["prompt_size"]),
            "response_size": int(b["response_size"]),
            "is_context_prefill_phase": bool(b.get("is_context_prefill_phase", False)),
        }
        for m in BENCHY_METRICS:
            v = b.get(m)
            cell[m] = (
                {"mean": float(v["mean"]), "std": float(v["std"]), "values": [float(x) for x in v["values"]]}
                if isinstance(v, dict) and v.get("values") is not None
                else None
            )
        cells.append(cell)
    keys = [tuple(c[k] for k in BENCHY_KEYS) for c in cells]
    if len(set(keys)) != len(keys):
        raise ValueError(
            "llama-benchy report lists one cell (pp, tg, depth, concurrency, phase) twice; "
            "split the file by run before importing."
        )
    return cells


def llama_benchy_rows(doc: dict, arm: str, block: int, metric: str = "tg_throughput") -> list[dict]:
    """Rows (arm, workload, block, run, value) for the statistics: one per raw value of `metric`, cells apart.

    A cell without the metric (llama-benchy writes null where it dropped every run, e.g. streams that
    arrived in one read) is not left out: it gives one invalid row that names it and says why.
    """
    if metric not in BENCHY_METRICS:
        raise ValueError(f"metric {metric!r} is not a llama-benchy metric; one of {', '.join(BENCHY_METRICS)}")
    rows = []
    for c in benchy_cells(doc):
        name = benchy_cell_name(c, metric)
        unit = benchy_unit(c, metric)
        if not c[metric] or not c[metric]["values"]:
            rows.append(
                {
                    "arm": arm,
                    "workload": name,
                    "block": block,
                    "run": 0,
                    "value": math.nan,
                    "valid": False,
                    "unit": unit,
                    "invalid_reason": f"llama-benchy reported no {metric} for this cell (null: it dropped "
                    f"every run, or never measured it)",
                }
            )
            continue
        rows += [
            {
                "arm": arm,
                "workload": name,
                "block": block,
                "run": i,
                "value": v,
                "valid": True,
                "invalid_reason": "",
                "unit": unit,
            }
            for i, v in enumerate(c[metric]["values"])
        ]
    if not any(r["valid"] for r in rows):
        raise ValueError(_no_values(doc, metric))
    return rows


def _no_values(doc: dict, metric: str) -> str:
    """Why no cell of a report gave a value of `metric`: every one null (llama-benchy dropped every run), or
    written without raw values (a llama-benchy before the schema with 'values')."""
    raw = [b.get(metric) for b in doc["benchmarks"]]
    if raw and all(v is None for v in raw):
        return (
            f"llama-benchy dropped every run: {metric} is null in all {len(raw)} cells of this report (llama-benchy "
            f"writes null where no run of a cell gave a value, e.g. when each stream arrived in one read); nothing "
            f"to import. Re-run llama-benchy against a server that streams token by token, or import another metric "
            f"(--metric)."
        )
    return (
        f"llama-benchy report has no {metric}.values (raw per-run values) in any cell; re-run "
        f"with a llama-benchy version that writes them (schema with 'values'), or import "
        f"another metric (--metric)."
    )


def benchy_unit(cell: dict, metric: str) -> str:
    """What one imported value is: a request's or a run's (llama-benchy's totals above concurrency 1 are per run)."""
    per_request = metric in (
        "pp_req_throughput",
        "tg_req_throughput",
        "peak_req_throughput",
        "ttfr",
        "est_ppt",
        "e2e_ttft",
    )
    return "requests" if per_request or cell["concurrency"] == 1 else "runs"


def benchy_metadata(doc: dict) -> dict:
    """A llama-benchy report's metadata (everything but its benchmarks), kept to be written back unchanged."""
    return {k: v for k, v in doc.items() if k != "benchmarks"}


def export_llama_benchy(
    cells: list[dict], model: str, timestamp: str | None = None, metadata: dict | None = None
) -> dict:
    """A llama-benchy report (metadata + benchmarks) from cells in llama-benchy's BenchmarkRun form.

    `cells` are the "llama_benchy" entries of bracket's arena.json, or benchy_cells() of a report.
    metadata: what the cells were measured with (benchy_metadata of an imported report, or
    arena.json's llama_benchy_metadata); its keys replace bracket's defaults, so a report read in
    and written back keeps its latency mode, latency and prefix caching.
    """
    runs = []
    for c in cells:
        run = {k: c[k] for k in BENCHY_KEYS}
        run.update({m: c.get(m) for m in BENCHY_METRICS})
        run["throughput_over_time"] = None
        run["requests_throughput_over_time"] = None
        runs.append(run)
    ts = timestamp or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return {
        **BENCHY_META,
        "timestamp": ts,
        "model": model,
        "max_concurrency": max((c["concurrency"] for c in cells), default=1),
        **(metadata or {}),
        "benchmarks": runs,
    }


def benchy_rows(doc: dict) -> list[dict]:
    """The rows of llama-benchy's table (its results.py _generate_rows): per cell a pp row and a tg row; a
    context-load cell's are named ctx_pp / ctx_tg; a row is left out where llama-benchy leaves it (no pp; no tg
    and no peak); " (cN)" where the report's max_concurrency is above 1."""
    many = (doc.get("max_concurrency") or 1) > 1
    model = doc.get("model") or "Unknown"
    rows = []
    for b in doc["benchmarks"]:
        c = f" (c{b.get('concurrency')})" if many else ""
        d = b.get("context_size") or 0
        if b.get("is_context_prefill_phase"):
            pp_name, tg_name = f"ctx_pp @ d{d}{c}", f"ctx_tg @ d{d}{c}"
        else:
            at = f" @ d{d}" if d > 0 else ""
            pp_name, tg_name = f"pp{b.get('prompt_size')}{at}{c}", f"tg{b.get('response_size')}{at}{c}"
        if b.get("pp_throughput") is not None:
            rows.append(
                {
                    "model": model,
                    "test": pp_name,
                    "t_s": b.get("pp_throughput"),
                    "t_s_req": b.get("pp_req_throughput"),
                    "peak_ts": None,
                    "peak_ts_req": None,
                    "ttfr": b.get("ttfr"),
                    "est_ppt": b.get("est_ppt"),
                    "e2e_ttft": b.get("e2e_ttft"),
                }
            )
        if b.get("tg_throughput") is not None or b.get("peak_throughput") is not None:
            rows.append(
                {
                    "model": model,
                    "test": tg_name,
                    "t_s": b.get("tg_throughput"),
                    "t_s_req": b.get("tg_req_throughput"),
                    "peak_ts": b.get("peak_throughput"),
                    "peak_ts_req": b.get("peak_req_throughput"),
                    "ttfr": None,
                    "est_ppt": None,
                    "e2e_ttft": None,
                }
            )
    return rows


def benchy_markdown(doc: dict) -> str:
    """llama-benchy 0.4.0's markdown table of a report (--format md), column for column and digit for digit
    (its results.py _generate_md_report): "mean ± std" to two decimals, the per-request columns only where
    max_concurrency is above 1, tabulate's pipe format."""
    from tabulate import tabulate

    rows = benchy_rows(doc)
    if not rows:
        return "No results collected. Check if the model is generating tokens."

    def fmt(m) -> str:
        return "" if m is None else f"{m['mean']:.2f} ± {m['std']:.2f}"

    conc = doc.get("max_concurrency") or 1
    ts = "t/s (total)" if conc > 1 else "t/s"
    if conc > 1:
        keys = ("t_s", "t_s_req", "peak_ts", "peak_ts_req", "ttfr", "est_ppt", "e2e_ttft")
        headers = [
            "model",
            "test",
            ts,
            "t/s (req)",
            "peak t/s",
            "peak t/s (req)",
            "ttfr (ms)",
            "est_ppt (ms)",
            "e2e_ttft (ms)",
        ]
    else:
        keys = ("t_s", "peak_ts", "ttfr", "est_ppt", "e2e_ttft")
        headers = ["model", "test", ts, "peak t/s", "ttfr (ms)", "est_ppt (ms)", "e2e_ttft (ms)"]
    data = [[r["model"], r["test"], *(fmt(r[k]) for k in keys)] for r in rows]
    return tabulate(data, headers=headers, tablefmt="pipe", colalign=("left",) + ("right",) * (len(headers) - 1))


def export_arena(arena: dict, arm: str, model: str | None = None) -> dict:
    """One arm's arena cells (results/NAME/arena.json) as a llama-benchy report."""
    cells = [c["llama_benchy"] for c in arena.get("cells", []) if c["arm"] == arm and c.get("llama_benchy")]
    if not cells:
        arms = sorted({c["arm"] for c in arena.get("cells", [])})
        raise ValueError(f"no arena cell of arm {arm!r}; arms with cells: {', '.join(arms) or 'none'}")
    return export_llama_benchy(cells, model or arm, metadata=arena.get("llama_benchy_metadata"))


# ---- vllm bench serve ------------------------------------------------------------------------------------


def vllm_cell_name(doc: dict) -> str:
    ins = [int(x) for x in doc.get("input_lens") or [] if x is not None]
    outs = [int(x) for x in doc.get("output_lens") or [] if x]
    inp = f"in{int(np.median(ins))}" if ins else "in?"
    out = f"out{int(np.median(outs))}" if outs else "out?"
    conc = doc.get("max_concurrency")
    rate = doc.get("request_rate")
    return f"decode {inp} {out} c{conc if conc is not None else 'inf'} rate{rate if rate is not None else 'inf'}"


def vllm_rows(doc: dict, arm: str, block: int) -> list[dict]:
    """Rows of a `vllm bench serve --save-result --save-detailed` result: output_len / (ttft + sum itl)."""
    out, ttfts, itls = doc["output_lens"], doc["ttfts"], doc["itls"]
    errors = doc.get("errors") or [""] * len(out)
    if not (len(out) == len(ttfts) == len(itls) == len(errors)):
        raise ValueError("vllm bench result: output_lens, ttfts, itls and errors differ in length.")
    name = vllm_cell_name(doc)
    rows = []
    for i, (n, t0, itl, err) in enumerate(zip(out, ttfts, itls, errors)):
        wall = (t0 or 0.0) + float(np.sum(itl or []))
        ok = bool(not err and n and wall > 0)
        rows.append(
            {
                "arm": arm,
                "workload": name,
                "block": block,
                "run": i,
                "value": (n / wall) if ok else math.nan,
                "valid": ok,
                "invalid_reason": "" if ok else ("error" if err else "no tokens"),
            }
        )
    return rows


def export_vllm(recs: list[dict], max_concurrency: int | None = 1, model: str = "bracket-model") -> dict:
    """Timed raw records of one arm and workload as a vllm bench serve detailed result.

    bracket records no per-token times, so each request's itls are its mean inter-token interval
    repeated (t_last - t_first over n - 1, from tg_tok_s), which keeps ttft + sum(itl) = the time to
    the last token; the per-request decode rate vllm_rows reads back is n / (ttft + t_last - t_first).
    """
    timed = [r for r in recs if not r.get("warmup")]
    if not timed:
        raise ValueError("no timed records to export (all are warmup, or the list is empty)")
    cells = {(r.get("arm"), r.get("workload")) for r in timed}
    if len(cells) > 1:
        raise ValueError(
            f"records of {len(cells)} cells (arm, workload): export one at a time, e.g. {sorted(map(str, cells))[:3]}"
        )
    phases = sorted({str(r.get("arena_phase")) for r in timed if r.get("arena_phase")})
    if len(phases) > 1 or (phases and len(phases) != len({r.get("arena_phase") for r in timed})):
        raise ValueError(
            f"records of an Arena cell in {len(phases)} phases ({', '.join(phases)}): a context load and an inference "
            f"request are two kinds of request, and one vllm run of both would average them. Export one phase at a "
            f"time (bracket export vllm --phase {phases[-1]})."
        )
    ins, outs, ttfts, itls, lat, errs = [], [], [], [], [], []
    for r in timed:
        n = r.get("completion_tokens") or 0
        gap = 1.0 / r["tg_tok_s"] if r.get("tg_tok_s") else 0.0
        ins.append(r.get("prompt_tokens"))
        outs.append(n)
        ttfts.append(r.get("ttft_s") or 0.0)
        itls.append([gap] * max(n - 1, 0))
        lat.append(r.get("wall_s"))
        errs.append(r.get("error") or "")
    ok = [e == "" for e in errs]
    duration = busy_time([(r.get("started_at"), r.get("wall_s")) for r in timed])
    summary = vllm_summary(ins, outs, ttfts, itls, lat, ok, duration)
    return {
        "date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "backend": "bracket",
        "endpoint_type": "bracket",
        "label": f"{timed[0].get('arm')} / {timed[0].get('workload')}"
        + (f" ({timed[0]['arena_phase']})" if timed[0].get("arena_phase") else ""),
        "model_id": model,
        "num_prompts": len(timed),
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": max_concurrency,
        **summary,
        "input_lens": ins,
        "output_lens": outs,
        "ttfts": ttfts,
        "itls": itls,
        "latencies": lat,
        "start_times": [r.get("started_at") for r in timed],
        "errors": errs,
        "bracket_note": "itls are each request's mean inter-token interval repeated (bracket records no "
        "per-token times), so the itl percentiles are of those means; duration is the time "
        "at least one of these requests was in flight, not the experiment's span (its other "
        "cells, cooldowns and server starts are not this cell's)",
    }


def busy_time(spans: list[tuple[float | None, float | None]]) -> float | None:
    """Seconds during which at least one request was in flight: the union of [start, start + wall].

    vllm bench serve's duration is one run's span, requests back to back; bracket's requests of one
    cell lie in several blocks with other cells, cooldowns and server starts between them, so their
    first-to-last span is not the cell's duration, the union of their own intervals is.
    """
    iv = sorted((a, a + w) for a, w in spans if a is not None and w)
    if not iv:
        return None
    total, (lo, hi) = 0.0, iv[0]
    for a, b in iv[1:]:
        if a > hi:
            total += hi - lo
            lo, hi = a, b
        else:
            hi = max(hi, b)
    return total + hi - lo


def vllm_summary(ins, outs, ttfts, itls, latencies, ok, duration, percentiles=(99.0,)) -> dict:
    """vllm bench serve's summary keys, computed as vLLM computes them (vllm/benchmarks/serve.py,
    calculate_metrics and process_one_metric, default --percentile-metrics ttft,tpot,itl and
    --metric-percentiles 99): over successful requests, tpot = (latency - ttft) / (output_len - 1) where
    output_len > 1, itl every inter-token interval, mean / median / population SD / percentiles in ms,
    throughputs over the duration."""
    good = [i for i, o in enumerate(ok) if o]
    total_in = sum(ins[i] or 0 for i in good)
    total_out = sum(outs[i] or 0 for i in good)
    ttft = [ttfts[i] for i in good]
    tpot = [
        (latencies[i] - ttfts[i]) / (outs[i] - 1) for i in good if outs[i] and outs[i] > 1 and latencies[i] is not None
    ]
    itl = [x for i in good for x in itls[i]]
    out = {
        "duration": duration,
        "completed": len(good),
        "failed": len(ok) - len(good),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(good) / duration if duration else None,
        "request_goodput": None,
        "output_throughput": total_out / duration if duration else None,
        "total_token_throughput": (total_in + total_out) / duration if duration else None,
    }
    for name, v in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        v = v or 0
        out[f"mean_{name}_ms"] = float(np.mean(v)) * 1000
        out[f"median_{name}_ms"] = float(np.median(v)) * 1000
        out[f"std_{name}_ms"] = float(np.std(v)) * 1000
        for q in percentiles:
            word = str(int(q)) if int(q) == q else str(q)
            out[f"p{word}_{name}_ms"] = float(np.percentile(v, q)) * 1000
    return out


def write(doc: dict, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=2))
