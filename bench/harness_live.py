"""Harness accuracy on live servers: bracket and its peers beside the engine's own per-request timings.

bench/harness_accuracy.py judges the tools against a reference server whose schedule is known.
Here the truth is the engine's: each tool sends its own requests, one at a time, to a real server,
and every request the tool reports is paired with the server's account of the same request.

    llama-server   its log, per request: `prompt eval time = P ms` and `eval time = T ms / N tokens`
                   (the `timings` of the final event: prompt_ms, predicted_ms, predicted_n)
    vLLM           the /metrics request histograms, read every POLL_S while the tool runs: each
                   time vllm:e2e_request_latency_seconds_count grows by one, the growth of
                   request_decode_time (first -> last token), e2e_request_latency (arrival -> finish)
                   and request_generation_tokens is that request's own (requests finish one at a time;
                   a poll that sees two is left unpaired). vLLM puts the same numbers on the response
                   with --enable-per-request-metrics, but only the tool reads the response.

Two definitions are compared, each with its own server truth:

    tg rate      (n - 1) / (t_last_token - t_first_token)    server: (N - 1) / T   (vLLM: decode time)
    decode rate  n / request wall time                        server: N / (P + T)   (vLLM: e2e latency)

Servers: llama-server CPU (the cached build, the embedded model as GGUF) with ngram-simple and
with the model as its own draft, and the vLLM CPU engine with ngram. A peer that is not installed,
or fails, gets a row saying why.

    .venv/bin/python bench/harness_live.py                      # all servers, ~15 min on 2 cores
    .venv/bin/python bench/harness_live.py --servers llamacpp_ngram --tools bracket,llama-benchy --repeats 2
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "workflow"))

import harness_accuracy  # noqa: E402
from harness_accuracy import _tail  # noqa: E402

from bracket import config, embedded, engines  # noqa: E402
from bracket.engines import launch  # noqa: E402
from bracket.engines.base import SERVED_NAME, prometheus_sums  # noqa: E402

LLAMACPP = Path(os.environ.get("BRACKET_LLAMACPP_BUILD", Path.home() / ".cache/bracket/llama.cpp/0.3.36-cpu-8b5d08af36"))
ENGINE = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / embedded.ENGINE_VENV))
MODEL = Path(os.environ.get("BRACKET_TEST_MODEL", ROOT / "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"))
POLL_S = 0.1
PEERS_DIR = harness_accuracy.PEERS_DIR  # bench/.venv-peers, or BRACKET_PEERS_DIR
PROMPT_EVAL = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
EVAL = re.compile(r"(?<!prompt) eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
# Where the servers come from; main()'s options change them (the H200 run serves its own CUDA build and GGUF).
SETUP = {"llama_server": LLAMACPP / "bin/llama-server", "gguf": None, "tokenizer": MODEL / "tokenizer.json",
         "server_args": ["--ctx-size", "2048", "--threads", "2", "--slots"], "draft_args": [],
         "startup_timeout_s": 180}
SERVERS = {
    "llamacpp_plain": ("llamacpp", None, "llama-server, no speculation"),
    "llamacpp_ngram": ("llamacpp", {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 3},
                       "llama-server, ngram-simple, 4 tokens"),
    "llamacpp_draft": ("llamacpp", {"method": "draft_model", "draft_tokens": 4, "model": "GGUF"},
                       "llama-server, the model as its own draft, 4 tokens"),
    "vllm_ngram": ("vllm", {"method": "ngram", "draft_tokens": 4}, "vLLM 0.32 CPU, ngram, 4 tokens"),
}
DEFINITIONS = {
    "bracket": "decode = usage tokens / (request sent -> [DONE]); tg = (n - 1) / first -> last token event",
    "llama-benchy": "tg = (n - 1) / (t_last - t_first), n from token_ids (vLLM), else usage",
    "aiperf": "e2e_output_token_throughput = OSL / latency; per_user = (OSL - 1) / (latency - TTFT); OSL from usage",
    "guidellm": "output_tokens_per_second = tokens / latency; 1 / inter_token_latency = (n - 1) / (latency - TTFT)",
}


# ---- the server's own account -----------------------------------------------------------------
class LlamaLog:
    """Per-request timings from llama-server's log: [(prompt_ms + predicted_ms, predicted_ms, N)], in order."""

    def __init__(self, path: Path):
        self.path = path

    def entries(self) -> list[dict]:
        text = self.path.read_text(errors="replace")
        prompts, evals = PROMPT_EVAL.findall(text), EVAL.findall(text)
        return [{"e2e_s": (float(p) + float(t)) / 1e3, "first_last_s": float(t) / 1e3, "n": int(n)}
                for (p, _), (t, n) in zip(prompts, evals)]

    def start(self) -> int:
        return len(self.entries())

    def since(self, mark: int) -> list[dict]:
        time.sleep(0.3)  # the log line follows the last event
        return self.entries()[mark:]


class VllmMetrics:
    """Per-request deltas of vLLM's request histograms, polled while a tool runs."""

    NAMES = {"vllm:e2e_request_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum",
             "vllm:request_decode_time_seconds_sum", "vllm:request_generation_tokens_sum"}

    def __init__(self, base: str):
        self.base, self.http = base, httpx.Client(timeout=10)
        self._stop = threading.Event()
        self.out: list[dict] = []

    def _read(self) -> dict:
        return prometheus_sums(self.http.get(self.base + "/metrics").text, self.NAMES)

    def start(self) -> int:
        self.out, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return 0

    def _poll(self) -> None:
        prev = self._read()
        while not self._stop.is_set():
            time.sleep(POLL_S)
            cur = self._read()
            done = cur["vllm:e2e_request_latency_seconds_count"] - prev["vllm:e2e_request_latency_seconds_count"]
            if done == 1:
                # The histograms of one finish are not observed at one instant: read again once they settle.
                time.sleep(POLL_S / 4)
                again = self._read()
                if again["vllm:e2e_request_latency_seconds_count"] != cur["vllm:e2e_request_latency_seconds_count"]:
                    self.out += [None, None]
                    prev = again
                    continue
                cur = again
                d = {k: cur[k] - prev[k] for k in self.NAMES}
                self.out.append({"e2e_s": d["vllm:e2e_request_latency_seconds_sum"],
                                 "first_last_s": d["vllm:request_decode_time_seconds_sum"],
                                 "n": int(round(d["vllm:request_generation_tokens_sum"]))})
            elif done > 1:
                self.out += [None] * int(done)  # finished within one poll: not attributable
            prev = cur

    def since(self, mark: int) -> list[dict | None]:
        time.sleep(3 * POLL_S)
        self._stop.set()
        self._thread.join()
        return self.out[mark:]


# ---- the tools ----------------------------------------------------------------------------------
def book_text() -> str:
    """Real sentences (the experiments' prompts), repeated: the peers' prompt source, offline."""
    lines = [json.loads(x)["prompt"] for f in sorted((ROOT / "experiments/prompts").glob("*.jsonl"))
             for x in f.read_text().splitlines() if x.strip()]
    return " ".join(lines * 20)


def tokenizer_dir(work: Path) -> Path:
    """The model's tokenizer.json alone, as a plain fast tokenizer: the peers' transformers load it offline
    (given the model directory, AIPerf's looks its config up on the hub and fails)."""
    out = work / "tokenizer"
    out.mkdir(exist_ok=True)
    (out / "tokenizer.json").write_bytes(Path(SETUP["tokenizer"]).read_bytes())
    (out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                           "model_max_length": 1_000_000}))
    return out


def run_bracket(ctx, n, repeats) -> list[dict]:
    adapter, arm, request = ctx["adapter"], ctx["arm"], {"max_tokens": n, "temperature": 0.0, "timeout_s": 300}
    out = []
    with httpx.Client(timeout=60) as http:
        for i in range(repeats):
            m = adapter.measure(http, ctx["base"], SERVED_NAME, f"[{i}] " + ctx["book"][i * 300:i * 300 + 200],
                                request, 1234 + i, arm).measurement
            if m.error:
                raise RuntimeError(f"bracket's request failed: {m.error}")
            out.append({"decode": m.decode_tok_s, "tg": m.tg_tok_s, "n": m.completion_tokens})
            time.sleep(ctx.get("gap_s", 0))  # as the runner's cooldown: the /metrics poller sees one finish at a time
    return out


def _exec(argv, env=None, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
                       cwd=cwd)
    LAST_OUTPUT[0] = p.stdout + p.stderr
    return p


LAST_OUTPUT = [""]


def _why(output: str) -> str:
    """The tool's own words on a failure: its first line that mentions an error, else its last lines."""
    hits = [ln.strip() for ln in output.splitlines() if re.search(r"error|exception|failed", ln, re.I)]
    return hits[0][:200] if hits else _tail(output)


def run_llama_benchy(ctx, n, repeats) -> list[dict]:
    """One llama-benchy run per request: it leaves a request out of its tg values when the whole stream came
    in one network read (first -> last is 0), so a run of several could not be paired by order."""
    import hashlib

    work, url = ctx["work"], "file:///bracket-live/book.txt"
    cache = work / "home/.cache/llama-benchy"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / (hashlib.md5(url.encode()).hexdigest() + ".txt")).write_text(ctx["book"])
    values = []
    for _ in range(repeats):
        out = work / f"llama-benchy-{time.monotonic_ns()}.json"
        p = _exec([str(PEERS_DIR / "llama-benchy/bin/llama-benchy"), "--base-url", ctx["base"] + "/v1", "--model",
                   SERVED_NAME, "--tokenizer", str(ctx["tokenizer"]), "--book-url", url, "--pp", "32", "--tg", str(n),
                   "--runs", "1", "--latency-mode", "none", "--skip-coherence", "--no-warmup", "--no-adapt-prompt",
                   "--exact-tg", "--format", "json", "--save-result", str(out)],
                  env={"HOME": str(work / "home"), "HF_HUB_OFFLINE": "1"}, cwd=work)
        if p.returncode or not out.exists():
            raise RuntimeError(f"llama-benchy failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
        tg = [v for b in json.loads(out.read_text())["benchmarks"] if b.get("tg_throughput")
              for v in b["tg_throughput"]["values"]]
        values.append({"tg": tg[0] if tg else None})
    return values


def run_aiperf(ctx, n, repeats) -> list[dict]:
    art = ctx["work"] / f"aiperf-{time.monotonic_ns()}"
    p = _exec([str(PEERS_DIR / "aiperf/bin/aiperf"), "profile", "--model", SERVED_NAME, "--url", ctx["base"],
               "--endpoint-type", "completions", "--streaming", "--tokenizer", str(ctx["tokenizer"]), "--use-server-token-count",
               "--isl", "32", "--osl", str(n), "--extra-inputs", "ignore_eos:true", "--extra-inputs",
               f"min_tokens:{n}", "--request-count", str(repeats), "--concurrency", "1", "--artifact-dir", str(art),
               "--ui-type", "none"], cwd=ctx["work"])  # HF_HUB_OFFLINE=1 makes AIPerf 0.13 refuse a local directory
    recs = art / "profile_export.jsonl"
    if p.returncode or not recs.exists():
        raise RuntimeError(f"aiperf failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
    rows = [json.loads(x) for x in recs.read_text().splitlines() if x.strip()]
    rows.sort(key=lambda r: r.get("metadata", {}).get("request_start_ns", 0))
    out = []
    for r in rows:
        m = r["metrics"]
        out.append({"decode": m.get("e2e_output_token_throughput", {}).get("value"),
                    "tg": m.get("output_token_throughput_per_user", {}).get("value"),
                    "n": m.get("output_sequence_length", {}).get("value")})
    return out


def run_guidellm(ctx, n, repeats) -> list[dict]:
    out = ctx["work"] / f"guidellm-{time.monotonic_ns()}.json"
    p = _exec([str(PEERS_DIR / "guidellm/bin/guidellm"), "run",
               "--backend", f"kind=openai_http,target={ctx['base']},model={SERVED_NAME}",
               "--tokenizer", f"kind=huggingface_auto,model={ctx['tokenizer']}",
               "--profile", "kind=synchronous", "--constraint", f"kind=max_requests,count={repeats}",
               "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={n}",
               "--output", f"kind=json,path={out}", "--disable-console-interactive"],
              env={"HF_HUB_OFFLINE": "1"}, cwd=ctx["work"])
    if p.returncode or not out.exists():
        raise RuntimeError(f"guidellm failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
    reqs = [r for b in json.loads(out.read_text())["benchmarks"] for r in b["requests"]["successful"]]
    reqs.sort(key=lambda r: (r.get("info", {}).get("timings", {}) or {}).get("request_start") or 0)
    return [{"decode": r.get("output_tokens_per_second"),
             "tg": 1e3 / r["inter_token_latency_ms"] if r.get("inter_token_latency_ms") else None,
             "n": r.get("output_tokens")} for r in reqs]


def stream_shape(base: str, n: int, prompt: str) -> dict:
    """One raw streamed request: how many events, tokens in the first event (token_ids where the server
    sends them), and the share of events that reached the client within 1 ms of the one before (bursts)."""
    body = {"model": SERVED_NAME, "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
            "ignore_eos": True, "return_token_ids": True, "stream_options": {"include_usage": True}}
    times, sizes = [], []
    with httpx.Client(timeout=300) as http, http.stream("POST", base + "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:]).get("choices") or []
                if choices and (choices[0].get("text") or choices[0].get("token_ids")):
                    times.append(time.perf_counter())
                    sizes.append(len(choices[0]["token_ids"]) if choices[0].get("token_ids") is not None else None)
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"events": len(times), "first_event_tokens": sizes[0] if sizes else None,
            "token_ids": sizes[0] is not None if sizes else False,
            "within_1ms": sum(g < 1e-3 for g in gaps) / len(gaps) if gaps else 0.0}


TOOLS = {"bracket": (run_bracket, None), "llama-benchy": (run_llama_benchy, "llama-benchy"),
         "aiperf": (run_aiperf, "aiperf"), "guidellm": (run_guidellm, "guidellm")}


# ---- one server -----------------------------------------------------------------------------------
def gguf(work: Path) -> Path:
    """The embedded model as GGUF, converted as the workflow's embedded_gguf rule does."""
    out = work / "embedded.gguf"
    if SETUP["gguf"]:
        return Path(SETUP["gguf"])
    if not out.exists():
        source = json.loads((LLAMACPP / "build.json").read_text())["source_dir"]
        subprocess.run([str(ENGINE / "bin/python"), str(ROOT / "workflow/bracket/embedded/to_gguf.py"), source,
                        str(MODEL), str(out)], check=True, capture_output=True, timeout=600)
    return out


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def serve(name: str, work: Path, port: int):
    kind, spec, _ = SERVERS[name]
    if kind == "llamacpp":
        model = str(gguf(work))
        spec = {**spec, "model": model} if spec and spec.get("model") == "GGUF" else spec
        eng = {"kind": "llamacpp", "embedded": False, "model": "unused", "port": port,
               "executable": str(SETUP["llama_server"]), "startup_timeout_s": SETUP["startup_timeout_s"],
               "args": list(SETUP["server_args"]) + (list(SETUP["draft_args"]) if spec and spec.get("model") else [])}
    else:
        model = str(MODEL)
        # The tiny model's tokenizer has no chat template and llama-benchy only speaks chat: ChatML, as
        # llama-server falls back to.
        template = work / "chatml.jinja"
        template.write_text(CHATML)
        eng = {"kind": "vllm", "embedded": True, "port": port, "per_request_metrics": True, "startup_timeout_s": 900,
               "args": ["--chat-template", str(template)]}
    arms = {"spec": {"speculative": spec}} if spec else {"spec": {}}
    cfg = config.validate({"engine": eng, "arms": arms, "request": {"max_tokens": 128}})
    adapter = engines.get(kind)
    arm = cfg["arms"]["spec"]
    python = str(ENGINE / "bin/python")
    argv = launch.server_argv(cfg, adapter, arm, model, python, name="unused")
    log = work / f"{name}.log"
    server = launch.make_server(cfg, adapter, argv=argv, env=launch.launch_env(cfg, adapter, arm), log_path=log,
                                base_url=launch.base_url(cfg), secret_names=[])
    return cfg, adapter, arm, argv, server, log


def measure_server(name: str, tools: list[str], n: int, repeats: int, work: Path, port: int) -> tuple[list, str]:
    cfg, adapter, arm, argv, server, log = serve(name, work, port)
    rows = []
    with server:
        server.wait_ready(cfg["engine"]["startup_timeout_s"])
        base = launch.base_url(cfg)
        ctx = {"adapter": adapter, "arm": arm, "base": base, "work": work, "book": book_text(),
               "tokenizer": tokenizer_dir(work)}
        truth = LlamaLog(log) if SERVERS[name][0] == "llamacpp" else VllmMetrics(base)
        ctx["gap_s"] = 0 if SERVERS[name][0] == "llamacpp" else 3 * POLL_S
        run_bracket(ctx, 16, 1)  # warm the server up
        shape = stream_shape(base, n, "[shape] " + ctx["book"][:200])
        rows.append({"server": name, "tool": "stream shape (one raw request)", "note": (
            f"{shape['events']} events for {n} tokens; first event "
            f"{shape['first_event_tokens'] if shape['token_ids'] else '(no token_ids)'} token(s); "
            f"{shape['within_1ms']:.0%} of events within 1 ms of the one before")})
        for tool in tools:
            fn, venv = TOOLS[tool]
            if venv and not (PEERS_DIR / venv / "bin/python").exists():
                rows.append({"server": name, "tool": tool, "note": f"not installed: {PEERS_DIR / venv} is missing"})
                continue
            mark = truth.start()
            try:
                values = fn(ctx, n, repeats)
                err = None
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                values, err = [], str(exc)
            accounts = truth.since(mark)
            if err:
                rows.append({"server": name, "tool": tool, "note": err[:300]})
                continue
            if len(values) != repeats:  # a tool that leaves out a failed request cannot be paired by order
                rows.append({"server": name, "tool": tool, "note": f"{len(values)} of {repeats} requests reported "
                                                                   f"({len(accounts)} served): {_why(LAST_OUTPUT[0])}"})
                continue
            if len(accounts) < len(values):
                rows.append({"server": name, "tool": tool, "note": f"{len(values)} requests reported, "
                                                                   f"{len(accounts)} in the server's account"})
                continue
            # Anything the tool sent first (a warm-up) is earlier in the account: pair from the end.
            for i, (v, t) in enumerate(zip(values, accounts[len(accounts) - len(values):])):
                ok = t is not None and t["first_last_s"] > 0 and t["e2e_s"] > 0
                row = {"server": name, "tool": tool, "request": i, "server_n": t and t["n"], "tool_n": v.get("n"),
                       "server_tg": (t["n"] - 1) / t["first_last_s"] if ok else None,
                       "server_decode": t["n"] / t["e2e_s"] if ok else None,
                       "tool_tg": v.get("tg"), "tool_decode": v.get("decode")}
                if t is not None and not ok:  # a torn read of the histograms: not attributable
                    row["server_n"] = None
                rows.append(row)
            print(f"{name} {tool}: {len(values)} requests", flush=True)
    return rows, " ".join(shlex.quote(a) for a in argv)


# ---- the report -----------------------------------------------------------------------------------
def ratios(rows, key):
    return [r[f"tool_{key}"] / r[f"server_{key}"] for r in rows
            if r.get(f"tool_{key}") and r.get(f"server_{key}")]


def fmt(vals) -> str:
    if not vals:
        return "–"
    return f"{statistics.median(vals):.4f} ({min(vals):.3f}-{max(vals):.3f}, {len(vals)})"


def render(rows, argvs, args, started, elapsed, load) -> str:
    cmd = " ".join([".venv/bin/python", "bench/harness_live.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    L = [f"Made by `{cmd}` on {started} ({elapsed / 60:.1f} min; load average {load[0]} before, {load[1]} after; "
         f"{args.repeats} requests of {args.tokens} tokens per tool and server, one at a time, on {args.machine}: "
         "one run's numbers).", "",
         "Each cell: the tool's rate / the server's own rate for the same request, median (min-max, requests). "
         "tg: (n - 1) / first -> last token, server (N - 1) / T (llama-server's predicted_ms; vLLM's "
         "request_decode_time). decode: n / request wall time, server N / (P + T) (llama-server's prompt_ms + "
         "predicted_ms; vLLM's e2e_request_latency, arrival to finish). A perfect client reads 1 on tg and "
         "slightly under 1 on decode (its wall time adds HTTP and the server's tokenization).", "",
         "| server | tool | tg / server | decode / server | tool's n = server's N | no tg value |",
         "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["server"] for r in rows):
        for tool in dict.fromkeys(r["tool"] for r in rows if r["server"] == name):
            rs = [r for r in rows if r["server"] == name and r["tool"] == tool]
            if rs[0].get("note"):
                L.append(f"| {SERVERS[name][2]} | {tool} | {rs[0]['note']} | | | |")
                continue
            paired = [r for r in rs if r["server_n"] is not None and r["tool_n"] is not None]
            same, has_n = sum(1 for r in paired if r["tool_n"] == r["server_n"]), len(paired)
            L.append(f"| {SERVERS[name][2]} | {tool} | {fmt(ratios(rs, 'tg'))} | {fmt(ratios(rs, 'decode'))} | "
                     f"{f'{same}/{has_n}' if has_n else '–'} | "
                     f"{sum(1 for r in rs if r['server_n'] is not None and r['tool_tg'] is None)} |")
    L += ["", "Definitions:", ""] + [f"- {t}: {d}" for t, d in DEFINITIONS.items()]
    L += ["", "Server commands:", ""] + [f"- {name}: `{a}`" for name, a in argvs.items()]
    return "\n".join(L)


def write(rows, argvs, args, started, t0, load0) -> str:
    load1 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    fields = ["server", "tool", "request", "server_n", "tool_n", "server_tg", "tool_tg", "server_decode", "tool_decode",
              "note"]
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        w.writerows({"server": name, "tool": "server command", "note": a} for name, a in argvs.items())
    table = render(rows, argvs, args, started, time.monotonic() - t0, (load0, load1))
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    begin, end = "<!-- harness_live.py: begin -->", "<!-- harness_live.py: end -->"
    if begin in text:
        text = text[:text.index(begin) + len(begin)] + "\n" + table + "\n" + text[text.index(end):]
    else:
        text += f"\n## Side by side on live servers\n\n{begin}\n{table}\n{end}\n"
    out.write_text(text)
    return table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="llamacpp_ngram,llamacpp_draft,vllm_ngram", help=f"of {', '.join(SERVERS)}")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--port", type=int, default=8071)
    ap.add_argument("--out", default=str(HERE / "results" / "harness_accuracy_live.md"))
    ap.add_argument("--csv", default=str(HERE / "results" / "harness_live.csv"))
    ap.add_argument("--llama-server", help="llama-server to serve (default: the cached CPU build)")
    ap.add_argument("--gguf", help="GGUF to serve (default: the embedded model, converted)")
    ap.add_argument("--tokenizer", help="tokenizer.json for the peers' prompts (default: the embedded model's)")
    ap.add_argument("--server-args", help="llama-server's own arguments, one string (default: CPU, 2 threads)")
    ap.add_argument("--draft-args", default="", help="added for the draft-model server (e.g. --spec-draft-ngl 999)")
    ap.add_argument("--startup-timeout", type=float, default=180)
    ap.add_argument("--machine", default="the shared 2-core CPU machine", help="where it ran, for the report")
    args = ap.parse_args(argv)
    SETUP.update({key: v for key, v in (("llama_server", args.llama_server), ("gguf", args.gguf),
                                         ("tokenizer", args.tokenizer)) if v})
    if args.server_args:
        SETUP["server_args"] = shlex.split(args.server_args)
    SETUP["draft_args"], SETUP["startup_timeout_s"] = shlex.split(args.draft_args), args.startup_timeout
    os.chdir(ROOT)  # embedded paths (resources/...) are relative to the checkout
    started, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
    load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bracket-live-"))
    rows, argvs = [], {}
    for name in args.servers.split(","):
        r, a = measure_server(name, args.tools.split(","), args.tokens, args.repeats, work, args.port)
        rows += r
        argvs[name] = a
        table = write(rows, argvs, args, started, t0, load0)  # after each server: a run cut short keeps what it made
    print(table)


if __name__ == "__main__":
    main()
