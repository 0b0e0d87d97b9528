"""What each field of a request body costs the server: bodies interleaved on one server, server-timed.

A benchmark's request is part of its instrument: a field the engine must honour (a sampler switched
off, a seed, a cache flag) can cost the server more than the effect under test (top_k 0 cost
llama.cpp 23 % per token on an H200, docs/llamacpp.md). This script sends, to one server, the plainest
greedy body a bare OpenAI client sends (model, prompt, max_tokens, temperature 0, stream) and that body
with one field added at a time, plus bracket's body before and after it was made cheap, in a fresh
random order each round, every variant on the same prompt within a round.

Timing is the server's own: llama-server's `timings.predicted_ms / predicted_n` of each response;
vLLM's `vllm:request_decode_time_seconds` histogram sum, read from /metrics before and after each
request (one request at a time, so the difference is that request's), divided by its generated
tokens less one (the decode time runs first -> last token). Wall time per token is kept beside it.

The ratio to the plain body is paired by round: per round, log(variant ms/token / plain ms/token);
the table gives exp(mean) with a t interval on the rounds (95 %). "same tokens" says whether the
variant's output and the plain body's agree on every round (the shorter one a prefix of the longer:
the plain body stops at the end-of-text token, bodies with ignore_eos do not).

Servers (CPU builds, the machine's cores shared with the client):
    llamacpp_embedded  llama-server (the cached CPU build) serving the embedded model as GGUF (vocabulary 4,096)
    llamacpp_vocab152k llama-server serving the package's synthetic.py --shape tiny: 2 layers, hidden 64,
                       Qwen's 151,936-token vocabulary, where the sampler's walk over the vocabulary shows
    vllm_embedded      the vLLM CPU engine serving the embedded model

    .venv/bin/python bench/request_cost.py                          # all three, ~10 min on 2 cores
    .venv/bin/python bench/request_cost.py --servers llamacpp_vocab152k --rounds 6
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from scipy import stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "workflow"))

from bracket import embedded, engines  # noqa: E402
from bracket.engines import launch  # noqa: E402
from bracket.engines.base import SERVED_NAME, prometheus_sums  # noqa: E402
from bracket.experiment import config  # noqa: E402
from bracket.wire.transport import timed_client  # noqa: E402


# The workflow's own llama.cpp build (rule llamacpp_build names its cache folder in build.json).
def llamacpp_build() -> Path:
    return embedded.llamacpp_build_dir(ROOT)  # read when a server is wanted: the script imports with no build


ENGINE = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / embedded.ENGINE_VENV))
MODEL = Path(os.environ.get("BRACKET_TEST_MODEL", ROOT / "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"))
SEED = 1234

PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "import os\nimport sys\nimport json\nimport",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):",
    "Once upon a time, in a small village by the sea, there lived",
]

# One field at a time on top of the plain body, then whole bodies. bracket's body "before" is the one
# engines/*.py request_body sent until this benchmark (top_k 0 and the rest); "now" is built by the
# adapter itself, so the table measures what the code sends.
LLAMACPP_FIELDS = {
    "+ top_k 0": {"top_k": 0},
    "+ top_k 1": {"top_k": 1},
    "+ top_k 40 (the server's default)": {"top_k": 40},
    "+ top_p 1, min_p 0": {"top_p": 1.0, "min_p": 0.0},
    "+ seed": {"seed": SEED},
    "+ repeat_penalty 1": {"repeat_penalty": 1.0},
    "+ ignore_eos": {"ignore_eos": True},
    "+ cache_prompt false": {"cache_prompt": False},
    "+ stream_options.include_usage": {"stream_options": {"include_usage": True}},
}
LLAMACPP_BEFORE = {
    "seed": SEED,
    "ignore_eos": True,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "cache_prompt": False,
    "stream_options": {"include_usage": True},
}
VLLM_FIELDS = {
    "+ top_k -1": {"top_k": -1},
    "+ top_k 1": {"top_k": 1},
    "+ top_p 1, min_p 0": {"top_p": 1.0, "min_p": 0.0},
    "+ seed": {"seed": SEED},
    "+ repetition_penalty 1": {"repetition_penalty": 1.0},
    "+ ignore_eos": {"ignore_eos": True},
    "+ stream_options.include_usage": {"stream_options": {"include_usage": True}},
}
VLLM_BEFORE = {"seed": SEED, "ignore_eos": True, "stream_options": {"include_usage": True}}

SERVERS = {
    "llamacpp_embedded": ("llamacpp", "embedded", "llama-server CPU, the embedded model as GGUF (vocabulary 4,096)"),
    "llamacpp_vocab152k": (
        "llamacpp",
        "vocab152k",
        "llama-server CPU, synthetic.py --shape tiny (2 layers, hidden 64, vocabulary 151,936)",
    ),
    "vllm_embedded": ("vllm", "embedded", "vLLM 0.32 CPU, the embedded model (vocabulary 4,096)"),
}
DECODE_NAMES = {
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_decode_time_seconds_count",
    "vllm:request_generation_tokens_sum",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def source_dir() -> str:
    return json.loads((llamacpp_build() / "build.json").read_text())["source_dir"]


def gguf(which: str, work: Path) -> Path:
    """The embedded model converted as the workflow's embedded_gguf rule does, or the full-vocabulary tiny shape."""
    out = work / f"{which}.gguf"
    if out.exists():
        return out
    if which == "embedded":
        argv = [
            str(ROOT / embedded.TRAINER_VENV / "bin/python"),
            str(ROOT / "workflow/bracket/embedded/to_gguf.py"),
            source_dir(),
            str(MODEL),
            str(out),
        ]
    else:
        argv = [
            sys.executable,
            str(ROOT / "workflow/bracket/embedded/synthetic.py"),
            source_dir(),
            str(out),
            "--shape",
            "tiny",
        ]
    subprocess.run(argv, check=True, capture_output=True, timeout=900)
    return out


def serve(name: str, work: Path):
    kind, model_kind, _ = SERVERS[name]
    port = free_port()
    if kind == "llamacpp":
        model, python = str(gguf(model_kind, work)), "unused"
        eng = {
            "kind": "llamacpp",
            "embedded": False,
            "model": "unused",
            "port": port,
            "executable": str(llamacpp_build() / "bin/llama-server"),
            "startup_timeout_s": 180,
            "args": ["--ctx-size", "2048", "--threads", "2"],
        }
    else:
        model, python = str(MODEL), str(ENGINE / "bin/python")
        eng = {"kind": "vllm", "embedded": True, "port": port, "startup_timeout_s": 900}
    cfg = config.validate({"engine": eng, "arms": {"base": {}}, "request": {"max_tokens": 128}})
    adapter = engines.get(kind)
    arm = cfg.arms["base"]
    argv = launch.server_argv(cfg, adapter, arm, model, python, name="unused")
    server = launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=work / f"{name}.log",
        base_url=launch.base_url(cfg),
        secret_names=[],
    )
    return cfg, adapter, argv, server


def plain(prompt: str, max_tokens: int) -> dict:
    """What a bare OpenAI client sends for a greedy streamed completion."""
    return {"model": SERVED_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}


def variants(kind: str, adapter, prompt: str, max_tokens: int) -> dict[str, dict]:
    base = plain(prompt, max_tokens)
    fields, before = (LLAMACPP_FIELDS, LLAMACPP_BEFORE) if kind == "llamacpp" else (VLLM_FIELDS, VLLM_BEFORE)
    out = {"plain": base}
    out.update({k: {**base, **v} for k, v in fields.items()})
    out["bracket before"] = {**base, **before}
    req = config.validate({"arms": {"a": {}}, "request": {"max_tokens": max_tokens, "timeout_s": 120}}).request
    out["bracket now"] = adapter.request_body(SERVED_NAME, prompt, req, seed=SEED)
    return out


def send(http: httpx.Client, base: str, body: dict) -> dict:
    """One streamed completion: its text, wall time and llama-server's timings (None elsewhere).

    A kept-alive connection the server closed between two requests is opened again once (llama-server
    closed one in a run of a few hundred requests: 'Server disconnected without sending a response')."""
    try:
        return _send(http, base, body)
    except httpx.RemoteProtocolError:
        return _send(http, base, body)


def _send(http: httpx.Client, base: str, body: dict) -> dict:
    text, timings, t0 = [], None, time.perf_counter()
    with http.stream("POST", base + "/v1/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:300]!r} for {sorted(body)}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            text += [c.get("text") or "" for c in event.get("choices") or []]
            timings = event.get("timings") or timings
    return {"wall_s": time.perf_counter() - t0, "text": "".join(text), "timings": timings}


def decode_sums(http: httpx.Client, base: str) -> dict[str, float]:
    return prometheus_sums(http.get(base + "/metrics").text, DECODE_NAMES)


def measure(kind: str, http: httpx.Client, base: str, body: dict) -> dict:
    before = decode_sums(http, base) if kind == "vllm" else None
    out = send(http, base, body)
    if kind == "llamacpp":
        t = out["timings"]
        n, server_ms = t["predicted_n"], t["predicted_ms"] / t["predicted_n"]
    else:
        for _ in range(50):  # the histograms are observed just after the last event
            after = decode_sums(http, base)
            if after["vllm:request_decode_time_seconds_count"] > before["vllm:request_decode_time_seconds_count"]:
                break
            time.sleep(0.02)
        d = {k: after[k] - before[k] for k in DECODE_NAMES}
        n = int(round(d["vllm:request_generation_tokens_sum"]))
        server_ms = 1e3 * d["vllm:request_decode_time_seconds_sum"] / max(n - 1, 1)
    return {
        "n": n,
        "server_ms_per_token": server_ms,
        "wall_ms_per_token": 1e3 * out["wall_s"] / max(n, 1),
        "text": out["text"],
    }


def run_server(name: str, rounds: int, max_tokens: int, work: Path, rng: random.Random) -> tuple[list[dict], str]:
    kind = SERVERS[name][0]
    cfg, adapter, argv, server = serve(name, work)
    rows = []
    with server, timed_client() as http:
        server.wait_ready(cfg.engine.startup_timeout_s)
        base = launch.base_url(cfg)
        for i in range(3):  # warm-up, discarded
            measure(kind, http, base, plain(PROMPTS[i % len(PROMPTS)], max_tokens))
        for r in range(rounds):
            prompt = PROMPTS[r % len(PROMPTS)]
            bodies = variants(kind, adapter, prompt, max_tokens)
            order = list(bodies)
            rng.shuffle(order)
            for pos, v in enumerate(order):
                m = measure(kind, http, base, bodies[v])
                rows.append(
                    {
                        "server": name,
                        "round": r,
                        "position": pos,
                        "variant": v,
                        "variant_index": list(bodies).index(v),
                        "fields": json.dumps({k: x for k, x in bodies[v].items() if k != "prompt"}, sort_keys=True),
                        **{k: m[k] for k in ("n", "server_ms_per_token", "wall_ms_per_token")},
                        "text_sha256": hashlib.sha256(m["text"].encode()).hexdigest()[:16],
                        "_text": m["text"],
                    }
                )
            print(f"{name}: round {r + 1}/{rounds}", flush=True)
    return rows, " ".join(shlex.quote(a) for a in argv)


def ratio_ci(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """exp(mean log(v / p)) over rounds, with the two-sided 95 % t interval on the rounds."""
    logs = [math.log(v / p) for v, p in pairs]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def same_tokens(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def table(rows: list[dict], name: str) -> list[str]:
    by = {}
    for row in sorted(rows, key=lambda x: x["variant_index"]):
        by.setdefault(row["variant"], {})[row["round"]] = row
    ref = by["plain"]
    lines = [
        "| body | fields beyond the plain body | tokens | server ms/token (median) | ratio to plain, "
        "server-timed (95 % CI) | wall ms/token (median) | same tokens as plain |",
        "|---|---|---|---|---|---|---|",
    ]
    plain_fields = json.loads(next(iter(ref.values()))["fields"])
    for v, per in by.items():
        fields = json.loads(next(iter(per.values()))["fields"])
        extra = (
            ", ".join(f"{k} {json.dumps(fields[k])}" for k in sorted(fields) if fields[k] != plain_fields.get(k)) or "–"
        )
        rounds = sorted(set(per) & set(ref))
        rat, lo, hi = ratio_ci([(per[r]["server_ms_per_token"], ref[r]["server_ms_per_token"]) for r in rounds])
        ns = sorted({per[r]["n"] for r in rounds})
        same = sum(same_tokens(per[r]["_text"], ref[r]["_text"]) for r in rounds)
        lines.append(
            f"| {v} | {extra} | {'-'.join(map(str, (ns[0], ns[-1]))) if len(ns) > 1 else ns[0]} | "
            f"{statistics.median(per[r]['server_ms_per_token'] for r in rounds):.3f} | "
            f"{rat:.3f} ({lo:.3f}-{hi:.3f}) | "
            f"{statistics.median(per[r]['wall_ms_per_token'] for r in rounds):.3f} | {same}/{len(rounds)} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default=",".join(SERVERS), help="comma-separated, of " + ", ".join(SERVERS))
    ap.add_argument("--rounds", type=int, default=8, help="rounds; each sends every body once (default 8)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random order within rounds")
    ap.add_argument("--out", type=Path, default=HERE / "results/request_cost.md")
    ap.add_argument("--machine", default="the project's 2-core CPU machine, shared")
    ap.add_argument("--work", type=Path, help="keep the GGUFs and server logs here (default: a temporary folder)")
    a = ap.parse_args()
    names = [s.strip() for s in a.servers.split(",") if s.strip()]
    unknown = [s for s in names if s not in SERVERS]
    if unknown:
        ap.error(f"unknown server(s) {unknown}; choose from {', '.join(SERVERS)}")
    server = llamacpp_build() / "bin/llama-server"
    if any(SERVERS[n][0] == "llamacpp" for n in names) and not server.exists():
        ap.error(
            f"{server} does not exist: build it (`snakemake --cores 2 {embedded.LLAMACPP_BUILD}`, or "
            f"workflow/scripts/build_llamacpp.sh), point BRACKET_LLAMACPP_BUILD at a build folder with "
            f"bin/llama-server, or leave the llama.cpp servers out with --servers vllm_embedded"
        )
    rng = random.Random(a.seed)
    started, t0, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.time(), os.getloadavg()[0]
    all_rows, argvs = [], {}
    with tempfile.TemporaryDirectory(prefix="request-cost-") as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in names:
            rows, argvs[name] = run_server(name, a.rounds, a.max_tokens, work, rng)
            all_rows += rows
    env = [
        f"{k}={shlex.quote(os.environ[k])}"
        for k in ("BRACKET_LLAMACPP_BUILD", "BRACKET_TEST_ENGINE", "BRACKET_TEST_MODEL")
        if os.environ.get(k)
    ]
    cmd = " ".join(env + [".venv/bin/python", "bench/request_cost.py"] + [shlex.quote(x) for x in sys.argv[1:]])
    out = [
        f"Made by `{cmd}` on {started} ({(time.time() - t0) / 60:.1f} min; load average {load0:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {a.rounds} rounds of {a.max_tokens}-token greedy requests, every body "
        f"once per round in a random order (seed {a.seed}), on {a.machine}: one run's numbers).",
        "",
        "The plain body is what a bare OpenAI client sends: model, prompt, max_tokens, temperature 0, stream. "
        "Server ms/token: llama-server's timings.predicted_ms / predicted_n; vLLM's request_decode_time "
        "histogram delta / (tokens - 1). Ratio: exp(mean over rounds of log(body / plain)), paired by round, "
        "95 % t interval on the rounds; under 1 is cheaper than the plain body. Same tokens: rounds whose "
        "output agrees with the plain body's (one a prefix of the other; the plain body stops at "
        "end-of-text).",
        "",
    ]
    built = MODEL / "build.json"
    steps = json.loads(built.read_text()).get("steps") if built.exists() else None
    out += [
        f"The embedded model: `{MODEL}` (trained {steps} steps; the workflow's is 300, and only its shape "
        "matters to the cost of a field).",
        "",
    ]
    for name in names:
        out += [f"## {name}: {SERVERS[name][2]}", "", f"`{argvs[name]}`", ""]
        out += table([r for r in all_rows if r["server"] == name], name) + [""]
    text = "\n".join(out)
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    with open(a.out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[k for k in all_rows[0] if not k.startswith("_")], extrasaction="ignore")
        w.writeheader()
        w.writerows(all_rows)
    print(f"wrote {a.out} and {a.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
