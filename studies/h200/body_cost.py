"""What bracket's request body costs llama-server, against a plain client's, on one fresh server.

    python studies/h200/body_cost.py EXPERIMENT.yaml ARM [--rounds 8] [--max-tokens 256] [--json OUT.json]

Starts one llama-server exactly as a block of ARM would (the adapter's launch argv, the workflow's
build) and sends, in every round, the same prompt once with each body, in an order that rotates from
round to round:

- `bracket`: the adapter's own body (bracket.engines.llamacpp request_body), as the blocks send it;
- `plain`: what a bare OpenAI client sends: model, prompt, max_tokens, temperature 0, stream;
- `top_k_1`: bracket's body with top_k 1 (greedy by construction);
- `top_k_0`: bracket's body with top_k 0, the body before 2026-12-01 (llama.cpp reads top_k <= 0 as
  "no top-k sampler", so every token's greedy pick walks the whole vocabulary).

The cost of a body is llama-server's own decode time per token, `timings.predicted_ms /
timings.predicted_n` of the request's final event: the server's work, not the client's. Each
round gives a ratio to `plain`; the table gives the geometric mean of those ratios with a t interval
over rounds, and whether each body's text equals plain's (greedy outputs of the same prompt).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from bracket import embedded, engines  # noqa: E402
from bracket.engines import launch  # noqa: E402
from bracket.engines.base import SERVED_NAME  # noqa: E402
from bracket.experiment import config, prompts  # noqa: E402

BODIES = ("bracket", "plain", "top_k_1", "top_k_0")


def bodies(adapter, cfg, arm, prompt: str, max_tokens: int) -> dict[str, dict]:
    request = cfg.request.model_copy(update={"max_tokens": max_tokens})
    ours = adapter.request_body(SERVED_NAME, prompt, request, int(cfg.request.seed), arm)
    return {
        "bracket": ours,
        "plain": {"model": SERVED_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True},
        "top_k_1": {**ours, "top_k": 1},
        "top_k_0": {**ours, "top_k": 0},
    }


def send(http: httpx.Client, base: str, body: dict) -> dict:
    """One streamed completion: its text and the final event's timings."""
    t0 = time.perf_counter()
    text, timings, usage = [], None, None
    with http.stream("POST", base + "/v1/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices") or []:
                text.append(ch.get("text") or "")
            timings = ev.get("timings") or timings
            usage = ev.get("usage") or usage
    if not timings:
        raise SystemExit("llama-server sent no timings: this script needs a llama-server that reports them")
    out = "".join(text)
    return {
        "wall_s": time.perf_counter() - t0,
        "predicted_n": timings["predicted_n"],
        "predicted_ms": timings["predicted_ms"],
        "prompt_n": timings.get("prompt_n"),
        "prompt_ms": timings.get("prompt_ms"),
        "cache_n": timings.get("cache_n"),
        "completion_tokens": (usage or {}).get("completion_tokens"),
        "text_sha256": hashlib.sha256(out.encode()).hexdigest()[:16],
    }


def t_quantile(df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def summarize(records: list[dict]) -> list[dict]:
    rounds = sorted({r["round"] for r in records})
    by = {(r["round"], r["body"]): r for r in records}
    plain_sha = {k: by[(k, "plain")]["text_sha256"] for k in rounds}
    out = []
    for b in BODIES:
        ms = [by[(k, b)]["predicted_ms"] / by[(k, b)]["predicted_n"] for k in rounds]
        logs = [
            math.log(
                by[(k, b)]["predicted_ms"]
                / by[(k, b)]["predicted_n"]
                / (by[(k, "plain")]["predicted_ms"] / by[(k, "plain")]["predicted_n"])
            )
            for k in rounds
        ]
        mean = statistics.fmean(logs)
        half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.nan
        out.append(
            {
                "body": b,
                "rounds": len(rounds),
                "ms_per_token_median": statistics.median(ms),
                "tok_s_median": 1000 / statistics.median(ms),
                "cost_vs_plain": math.exp(mean),
                "cost_vs_plain_ci95": [math.exp(mean - half), math.exp(mean + half)],
                "same_text_as_plain": sum(by[(k, b)]["text_sha256"] == plain_sha[k] for k in rounds),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("arm")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--port", type=int, default=None, help="default: the experiment's engine.port")
    ap.add_argument("--log", type=Path, default=Path("body_cost-server.log"))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cfg = config.load(a.experiment)
    if a.port:
        cfg = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"port": a.port})})
    cfg = embedded.with_llama_server(cfg, ROOT)
    adapter = engines.get(cfg.engine.kind)
    if adapter.kind != "llamacpp":
        sys.exit(f"{a.experiment}: body_cost.py measures llama-server's own timings; engine.kind is {adapter.kind}")
    arm = cfg.arms[a.arm]
    argv = launch.server_argv(cfg, adapter, arm, cfg.engine.model, "python3", name="body-cost")
    texts = [p["prompt"] for wl in cfg.workloads.values() for p in prompts.load(ROOT / wl.prompts)]
    base = launch.base_url(cfg)
    print("server:", " ".join(argv), flush=True)
    with open(a.log, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    records = []
    try:
        t0 = time.monotonic()
        with httpx.Client() as http:
            while True:
                try:
                    if http.get(base + "/health", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() - t0 > cfg.engine.startup_timeout_s:
                    sys.exit(f"llama-server did not become ready (see {a.log})")
                time.sleep(0.25)
            ready_s = time.monotonic() - t0
            send(http, base, bodies(adapter, cfg, arm, "warm up", 16)["plain"])
            for k in range(a.rounds):
                prompt = f"[body-cost {k:03d}] " + texts[k % len(texts)]
                bs = bodies(adapter, cfg, arm, prompt, a.max_tokens)
                order = [BODIES[(k + j) % len(BODIES)] for j in range(len(BODIES))]
                for pos, b in enumerate(order):
                    rec = {"round": k, "position": pos, "body": b, **send(http, base, bs[b])}
                    records.append(rec)
                    print(json.dumps(rec), flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    summary = summarize(records)
    print(
        f"\nllama-server ready in {ready_s:.1f} s; {a.rounds} rounds, each body once per round, order rotating; "
        f"cost = server decode ms per token (timings.predicted_ms / predicted_n)\n"
    )
    print(
        "| body | server tok/s (median) | ms/token (median) | cost vs plain (geometric mean, 95% CI) | same text as plain |"
    )
    print("|---|---|---|---|---|")
    for s in summary:
        lo, hi = s["cost_vs_plain_ci95"]
        print(
            f"| {s['body']} | {s['tok_s_median']:.1f} | {s['ms_per_token_median']:.3f} | "
            f"{s['cost_vs_plain']:.4f} ({lo:.4f}-{hi:.4f}) | {s['same_text_as_plain']}/{s['rounds']} |"
        )
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "argv": argv,
                    "ready_s": ready_s,
                    "bodies": {b: v for b, v in bodies(adapter, cfg, arm, "<prompt>", a.max_tokens).items()},
                    "summary": summary,
                    "records": records,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
