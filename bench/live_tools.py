"""The live harness's parts: each server's own per-request account, and each tool run against a server.

Used by bench/harness_live.py (its docstring says what is compared and how requests are paired).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
from bracket.engines.base import SERVED_NAME, prometheus_sums
from bracket.experiment import config
from harness_accuracy import PEERS_DIR, _tail

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.1
PROMPT_EVAL = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
EVAL = re.compile(r"(?<!prompt) eval time =\s+([\d.]+) ms /\s+(\d+) tokens")


# ---- the server's own account -----------------------------------------------------------------
class LlamaLog:
    """Per-request timings from llama-server's log: [(prompt_ms + predicted_ms, predicted_ms, N)], in order."""

    def __init__(self, path: Path):
        self.path = path

    def entries(self) -> list[dict]:
        text = self.path.read_text(errors="replace")
        prompts, evals = PROMPT_EVAL.findall(text), EVAL.findall(text)
        return [
            {"e2e_s": (float(p) + float(t)) / 1e3, "first_last_s": float(t) / 1e3, "n": int(n)}
            for (p, _), (t, n) in zip(prompts, evals)
        ]

    def start(self) -> int:
        return len(self.entries())

    def since(self, mark: int) -> list[dict]:
        time.sleep(0.3)  # the log line follows the last event
        return self.entries()[mark:]


class VllmMetrics:
    """Per-request deltas of vLLM's request histograms, polled while a tool runs."""

    NAMES = {
        "vllm:e2e_request_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:request_decode_time_seconds_sum",
        "vllm:request_generation_tokens_sum",
    }

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
                self.out.append(
                    {
                        "e2e_s": d["vllm:e2e_request_latency_seconds_sum"],
                        "first_last_s": d["vllm:request_decode_time_seconds_sum"],
                        "n": int(round(d["vllm:request_generation_tokens_sum"])),
                    }
                )
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
    lines = [
        json.loads(x)["prompt"]
        for f in sorted((ROOT / "experiments/prompts").glob("*.jsonl"))
        for x in f.read_text().splitlines()
        if x.strip()
    ]
    return " ".join(lines * 20)


def tokenizer_dir(work: Path, source: Path) -> Path:
    """The model's tokenizer.json alone, as a plain fast tokenizer: the peers' transformers load it offline
    (given the model directory, AIPerf's looks its config up on the hub and fails)."""
    out = work / "tokenizer"
    out.mkdir(exist_ok=True)
    (out / "tokenizer.json").write_bytes(Path(source).read_bytes())
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000})
    )
    return out


def greedy_request(n: int):
    """What each timed request asks for: n tokens, greedy, 300 s at most (the experiment's typed request)."""
    return config.validate(
        {"arms": {"a": {}}, "request": {"max_tokens": n, "temperature": 0.0, "timeout_s": 300}}
    ).request


def run_bracket(ctx, n, repeats) -> list[dict]:
    adapter, arm, request = ctx["adapter"], ctx["arm"], greedy_request(n)
    out = []
    with httpx.Client(timeout=60) as http:
        for i in range(repeats):
            m = adapter.measure(
                http, ctx["base"], SERVED_NAME, f"[{i}] " + ctx["book"][i * 300 : i * 300 + 200], request, 1234 + i, arm
            ).measurement
            if m.error:
                raise RuntimeError(f"bracket's request failed: {m.error}")
            out.append({"decode": m.decode_tok_s, "tg": m.tg_tok_s, "n": m.completion_tokens})
            time.sleep(ctx.get("gap_s", 0))  # as the runner's cooldown: the /metrics poller sees one finish at a time
    return out


def run_bare(ctx, n, repeats) -> list[dict]:
    """A bare OpenAI client: bracket's client sending the engine adapter's plain_body (model, prompt, max_tokens,
    temperature 0, stream with usage, ignore_eos), the body of the workflow's neutrality control."""
    adapter, request = ctx["adapter"], greedy_request(n)
    out = []
    with httpx.Client(timeout=60) as http:
        for i in range(repeats):
            m, _ = adapter.control(
                http,
                ctx["base"],
                SERVED_NAME,
                f"[bare {i}] " + ctx["book"][i * 300 : i * 300 + 200],
                request,
                1234 + i,
                ctx["arm"],
                "plain",
            )
            if m.error:
                raise RuntimeError(f"the bare client's request failed: {m.error}")
            out.append({"decode": m.decode_tok_s, "tg": m.tg_tok_s, "n": m.completion_tokens})
            time.sleep(ctx.get("gap_s", 0))
    return out


def _exec(argv, env=None, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    p = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd
    )
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
        p = _exec(
            [
                str(PEERS_DIR / "llama-benchy/bin/llama-benchy"),
                "--base-url",
                ctx["base"] + "/v1",
                "--model",
                SERVED_NAME,
                "--tokenizer",
                str(ctx["tokenizer"]),
                "--book-url",
                url,
                "--pp",
                "32",
                "--tg",
                str(n),
                "--runs",
                "1",
                "--latency-mode",
                "none",
                "--skip-coherence",
                "--no-warmup",
                "--no-adapt-prompt",
                "--exact-tg",
                "--format",
                "json",
                "--save-result",
                str(out),
            ],
            env={"HOME": str(work / "home"), "HF_HUB_OFFLINE": "1"},
            cwd=work,
        )
        if p.returncode or not out.exists():
            raise RuntimeError(f"llama-benchy failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
        tg = [
            v
            for b in json.loads(out.read_text())["benchmarks"]
            if b.get("tg_throughput")
            for v in b["tg_throughput"]["values"]
        ]
        values.append({"tg": tg[0] if tg else None})
    return values


def run_aiperf(ctx, n, repeats) -> list[dict]:
    art = ctx["work"] / f"aiperf-{time.monotonic_ns()}"
    p = _exec(
        [
            str(PEERS_DIR / "aiperf/bin/aiperf"),
            "profile",
            "--model",
            SERVED_NAME,
            "--url",
            ctx["base"],
            "--endpoint-type",
            "completions",
            "--streaming",
            "--tokenizer",
            str(ctx["tokenizer"]),
            "--use-server-token-count",
            "--isl",
            "32",
            "--osl",
            str(n),
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            f"min_tokens:{n}",
            "--request-count",
            str(repeats),
            "--concurrency",
            "1",
            "--artifact-dir",
            str(art),
            "--ui-type",
            "none",
        ],
        cwd=ctx["work"],
    )  # HF_HUB_OFFLINE=1 makes AIPerf 0.13 refuse a local directory
    recs = art / "profile_export.jsonl"
    if p.returncode or not recs.exists():
        raise RuntimeError(f"aiperf failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
    rows = [json.loads(x) for x in recs.read_text().splitlines() if x.strip()]
    rows.sort(key=lambda r: r.get("metadata", {}).get("request_start_ns", 0))
    out = []
    for r in rows:
        m = r["metrics"]
        out.append(
            {
                "decode": m.get("e2e_output_token_throughput", {}).get("value"),
                "tg": m.get("output_token_throughput_per_user", {}).get("value"),
                "n": m.get("output_sequence_length", {}).get("value"),
            }
        )
    return out


def run_guidellm(ctx, n, repeats) -> list[dict]:
    out = ctx["work"] / f"guidellm-{time.monotonic_ns()}.json"
    p = _exec(
        [
            str(PEERS_DIR / "guidellm/bin/guidellm"),
            "run",
            "--backend",
            f"kind=openai_http,target={ctx['base']},model={SERVED_NAME}",
            "--tokenizer",
            f"kind=huggingface_auto,model={ctx['tokenizer']}",
            "--profile",
            "kind=synchronous",
            "--constraint",
            f"kind=max_requests,count={repeats}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=32,output_tokens={n}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console-interactive",
        ],
        env={"HF_HUB_OFFLINE": "1"},
        cwd=ctx["work"],
    )
    if p.returncode or not out.exists():
        raise RuntimeError(f"guidellm failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
    reqs = [r for b in json.loads(out.read_text())["benchmarks"] for r in b["requests"]["successful"]]
    reqs.sort(key=lambda r: (r.get("info", {}).get("timings", {}) or {}).get("request_start") or 0)
    return [
        {
            "decode": r.get("output_tokens_per_second"),
            "tg": 1e3 / r["inter_token_latency_ms"] if r.get("inter_token_latency_ms") else None,
            "n": r.get("output_tokens"),
        }
        for r in reqs
    ]


def stream_shape(base: str, n: int, prompt: str) -> dict:
    """One raw streamed request: how many events, tokens in the first event (token_ids where the server
    sends them), and the share of events that reached the client within 1 ms of the one before (bursts)."""
    body = {
        "model": SERVED_NAME,
        "prompt": prompt,
        "max_tokens": n,
        "temperature": 0,
        "stream": True,
        "ignore_eos": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    times, sizes = [], []
    with httpx.Client(timeout=300) as http, http.stream("POST", base + "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:]).get("choices") or []
                if choices and (choices[0].get("text") or choices[0].get("token_ids")):
                    times.append(time.perf_counter())
                    sizes.append(len(choices[0]["token_ids"]) if choices[0].get("token_ids") is not None else None)
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {
        "events": len(times),
        "first_event_tokens": sizes[0] if sizes else None,
        "token_ids": sizes[0] is not None if sizes else False,
        "within_1ms": sum(g < 1e-3 for g in gaps) / len(gaps) if gaps else 0.0,
    }


TOOLS = {
    "bracket": (run_bracket, None),
    "bare client": (run_bare, None),
    "llama-benchy": (run_llama_benchy, "llama-benchy"),
    "aiperf": (run_aiperf, "aiperf"),
    "guidellm": (run_guidellm, "guidellm"),
}
