"""Hostile servers against the timed client: does every request end as an error record within
request.timeout_s + 1 s, and what does it cost the client's memory, whatever the server sends? (issue 40)

Each case is a server on loopback, on a thread of this process, that writes raw bytes as fast as the
socket takes them, and the client in a child process of its own (`--client`), so that its memory is its
own: the child reads its resident memory (VmRSS) just before the request, resets its peak (VmHWM, by
/proc/self/clear_refs), and reads the peak after. The cases:

- sse_1byte: a 200 stream of SSE events that carry one character of text each, one chunk per event,
  without end (issue 40: 90 MB of client memory per second, the request returned 5-10 s late, the error
  record held the whole text);
- error_500_endless: HTTP 500 with a body that never ends (issue 40: 1.3 GB in 10 s, "without data from the
  server", no body kept); error_500_trickle: the same body, a line every 50 ms;
- metrics_endless, metrics_100mb: a neutrality-control request (VLLM's `control`: /metrics read before and
  after the request) where /metrics never ends, or is 100 MB (issue 40: 1 GB peak after two requests; an
  endless one ended in MemoryError);
- escaped_key: a stream that echoes the API key with every character JSON-escaped (\\uXXXX) in its text, and
  never ends: the raw record, written as the block writes it, must hold the key in no form.

Run from the repository root:

    .venv/bin/python bench/hostile_servers.py                    # writes bench/results/hostile_servers.md
    .venv/bin/python bench/hostile_servers.py --timeout 3 --out -   # a quick table on stdout

The table: wall time of the request (the whole control call for the /metrics cases) against timeout_s,
the client's peak memory above what it held before the request, the record's kind (records.reasons: "error"
or valid), and what the record left out (the body's bytes between its kept ends, the text's characters).
tests/test_hostile_servers.py runs the same cases, quicker, with assertions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "workflow"))

CASES = ("sse_1byte", "error_500_endless", "error_500_trickle", "metrics_endless", "metrics_100mb", "escaped_key")
# The API key of escaped_key: registered in the client as a run registers engine.api_key_env's value.
KEY = "sk-hostile-round4-7f3a9c2e51"
# The client's memory per stream, as bracket.wire.client's docstring states it (stream_events.STREAM_MEMORY).
BOUND_MB = 64


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def escaped(text: str) -> str:
    """`text` with every character written as JSON's \\uXXXX escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
ONE_CHAR = chunk(sse({"choices": [{"index": 0, "text": "x", "finish_reason": None}]}))
KEY_ECHO = chunk(
    b'data: {"choices":[{"index":0,"text":"you said: '
    + escaped(f"Bearer {KEY}").encode()
    + b'","finish_reason":null}]}\n\n'
)
SHORT_STREAM = (
    STREAM_HEAD
    + chunk(sse({"choices": [{"index": 0, "text": " a", "finish_reason": None}]}))
    + chunk(sse({"choices": [{"index": 0, "text": " b", "finish_reason": "length"}]}))
    + chunk(sse({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}))
    + chunk(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)
ERROR_HEAD = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
METRICS_LINE = b'vllm:request_decode_time_seconds_sum{model_name="m"} 1.0\n'


class Hostile:
    """A loopback server on a thread that answers each request by its path with `case`'s bytes, written as
    fast as the socket takes them until the client hangs up or `close`; `sent` counts the bytes written."""

    def __init__(self, case: str):
        if case not in CASES:
            raise ValueError(f"unknown case {case!r}; the cases are {', '.join(CASES)}")
        self.case = case
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sent = 0
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                while True:  # keep-alive: one request after another on this connection
                    head = b""
                    while b"\r\n\r\n" not in head:
                        got = conn.recv(65536)
                        if not got:
                            return
                        head += got
                    line = head.split(b"\r\n", 1)[0].decode()
                    length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                    body = head.split(b"\r\n\r\n", 1)[1]
                    while length and len(body) < int(length.group(1)):
                        body += conn.recv(65536)
                    if not self._reply(conn, line.split()[1]):
                        return
            except OSError:  # the client hung up, or shut its socket at its deadline
                return

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def _endless(self, conn: socket.socket, head: bytes, piece: bytes) -> None:
        self._send(conn, head)
        block = piece * max(1, 65536 // len(piece))
        while not self.closed.is_set():
            self._send(conn, block)

    def _reply(self, conn: socket.socket, path: str) -> bool:
        """Answer one request; False when the connection is done with."""
        case = self.case
        if path == "/metrics":
            if case == "metrics_endless":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                self._endless(conn, head, chunk(METRICS_LINE * 1000))
                return False
            if case == "metrics_100mb":
                n = 100_000_000 // len(METRICS_LINE)
                self._send(
                    conn,
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                    % (n * len(METRICS_LINE)),
                )
                block = METRICS_LINE * 1000
                for _ in range(n // 1000):
                    self._send(conn, block)
                self._send(conn, METRICS_LINE * (n % 1000))
                return True
            self._send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(METRICS_LINE), METRICS_LINE))
            return True
        if case == "sse_1byte":
            self._endless(conn, STREAM_HEAD, ONE_CHAR)
        elif case == "escaped_key":
            self._endless(conn, STREAM_HEAD, KEY_ECHO)
        elif case == "error_500_endless":
            self._endless(conn, ERROR_HEAD, chunk(b"internal error, and more of it " * 2000))
        elif case == "error_500_trickle":
            self._send(conn, ERROR_HEAD)
            while not self.closed.is_set():
                self._send(conn, chunk(b"internal error, and more of it\n"))
                time.sleep(0.05)
        else:
            self._send(conn, SHORT_STREAM)
            return True
        return False

    def close(self) -> None:
        self.closed.set()
        self.sock.close()

    def __enter__(self) -> Hostile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the client's side, in a child process ---------------------------------------------------------
def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def client(case: str, base: str, timeout_s: float, raw_path: str) -> dict:
    """One request of `case` to `base`, as a block makes it; what it cost and the record it left."""
    from bracket import records, secrets
    from bracket.engines.vllm import VLLM
    from bracket.typed.experiment import Request
    from bracket.wire.client import stream_completion
    from bracket.wire.transport import timed_client

    secrets.register(KEY)
    request = Request(
        max_tokens=2,
        temperature=0,
        seed=0,
        unique_prefix=False,
        cache_guard="auto",
        timeout_s=timeout_s,
        on_error="continue",
    )
    body = VLLM().request_body("m", "p", request, 0)
    with timed_client() as http:
        rss = _status_kb("VmRSS")
        try:
            Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
        except OSError:
            pass
        t0 = time.perf_counter()
        if case.startswith("metrics_"):
            m, _ = VLLM().control(http, base, "m", "p", request, 0, None, "bracket")
        else:
            m = stream_completion(http, base + "/v1/completions", body, timeout_s)
        wall = time.perf_counter() - t0
        peak = _status_kb("VmHWM")
    rec = records.new_record(**m.fields())
    with records.RecordWriter(raw_path) as w:
        w.append(rec)
    reasons = records.reasons(rec)
    raw = m.raw_response or ""
    left = re.search(r"\((\d+) bytes left out\)", raw)
    chars = re.search(r"\((\d+) characters left out\)", m.output_text or "")
    return {
        "case": case,
        "timeout_s": timeout_s,
        "wall_s": wall,
        "rss_before_mb": rss / 1024,
        "peak_mb": peak / 1024,
        "growth_mb": (peak - rss) / 1024,
        "kind": reasons[0][0] if reasons else "valid",
        "error": m.error,
        "raw_bytes_left_out": int(left.group(1)) if left else 0,
        "text_chars_left_out": int(chars.group(1)) if chars else 0,
        "raw_response_chars": len(raw),
        "output_text_chars": len(m.output_text or ""),
    }


def run_case(case: str, timeout_s: float, tree: Path | None = None, memory_cap_mb: int | None = None) -> dict:
    """Serve `case` and run the client against it in a child process; its result, the server's bytes sent,
    the child's own peak (os.wait4's ru_maxrss) and the raw record's line (`record_line`) added.

    tree: a `workflow` folder whose bracket the child imports (another revision's client; None: this
    checkout's). memory_cap_mb: the child's address space is limited to it (a client without bounds fails
    there, not on the host), and it is killed timeout_s + 30 s after it started.
    """
    with Hostile(case) as srv, tempfile.TemporaryDirectory() as tmp:
        raw_path, out_path = Path(tmp) / "raw.jsonl", Path(tmp) / "out.json"
        argv = [sys.executable, __file__, "--client", case, srv.base, str(timeout_s), str(raw_path)]
        argv += [str(tree or ROOT / "workflow"), str(memory_cap_mb or 0)]
        t0 = time.monotonic()
        with open(out_path, "w") as out, open(Path(tmp) / "err.txt", "w") as err:
            child = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)
            killer = threading.Timer(timeout_s + 30, child.kill)
            killer.start()
            try:
                _, status, usage = os.wait4(child.pid, 0)
            finally:
                killer.cancel()
            child.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - t0
        lines = out_path.read_text().strip().splitlines()
        if child.returncode == 0 and lines:
            result = json.loads(lines[-1])
        else:
            said = (Path(tmp) / "err.txt").read_text().strip().splitlines()
            failed = "killed" if child.returncode == -9 else f"exit {child.returncode}: {said[-1] if said else ''}"
            result = {"case": case, "timeout_s": timeout_s, "wall_s": elapsed, "kind": "client failed", "error": failed}
            result |= {"raw_bytes_left_out": None, "text_chars_left_out": None, "growth_mb": None}
        result["server_sent_mb"] = srv.sent / 1e6
        result["child_s"] = elapsed
        result["child_peak_mb"] = usage.ru_maxrss / 1024
        result["record_line"] = raw_path.read_text(encoding="utf-8") if raw_path.exists() else ""
    return result


def _n(v, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def table(results: list[dict]) -> str:
    rows = [
        "| case | client | wall s (timeout_s) | peak growth MB | child's peak MB | server sent MB | record | "
        "body bytes left out | text characters left out |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['case']} | {r['client']} | {r['wall_s']:.2f} ({r['timeout_s']:g}) | {_n(r['growth_mb'], '+.1f')} | "
            f"{r['child_peak_mb']:.0f} | {r['server_sent_mb']:.0f} | {r['kind']} | {_n(r['raw_bytes_left_out'], ',')} | "
            f"{_n(r['text_chars_left_out'], ',')} |"
        )
    return "\n".join(rows)


def one_line(text: str | None, n: int = 240) -> str:
    text = (text or "").replace("\n", "\\n")
    return text if len(text) <= n else text[:n] + "..."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=10.0, help="request.timeout_s of every request (default 10)")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    ap.add_argument(
        "--before",
        metavar="REV",
        help="also run the client as committed at git revision REV (its workflow/ from git archive), each case "
        "under a 2 GB address-space cap and killed timeout + 30 s after it started",
    )
    ap.add_argument(
        "--out", default=str(HERE / "results" / "hostile_servers.md"), help="the table's file; - for stdout"
    )
    ap.add_argument("--client", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        case, base, timeout_s, raw, tree, cap = args.client
        if int(cap):
            resource.setrlimit(resource.RLIMIT_AS, (int(cap) << 20, int(cap) << 20))
        sys.path.insert(0, tree)
        print(json.dumps(client(case, base, float(timeout_s), raw)))
        return 0
    load0 = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.before:
            archive = subprocess.run(["git", "archive", args.before, "workflow"], cwd=ROOT, capture_output=True)
            if archive.returncode != 0:
                raise SystemExit(f"git archive {args.before} failed: {archive.stderr.decode().strip()}")
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        for case in args.cases:
            r = run_case(case, args.timeout)
            results.append(r | {"client": "this checkout"})
            if args.before:
                r = run_case(case, args.timeout, Path(tmp) / "workflow", memory_cap_mb=2048)
                results.append(r | {"client": args.before})
    load1 = os.getloadavg()
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    ours = [r for r in results if r["client"] == "this checkout"]
    over = [
        r["case"] for r in ours if r["wall_s"] > r["timeout_s"] + 1 or r["growth_mb"] > BOUND_MB or r["kind"] != "error"
    ]
    errors = "\n".join(f"- {r['case']} ({r['client']}): {one_line(r['error'])}" for r in results)
    cmd = "python bench/hostile_servers.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    text = f"""# Hostile servers against the timed client

Made by `.venv/bin/{cmd}` on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC (checkout {commit.stdout.strip()}).

Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average {" ".join(f"{x:.1f}" for x in load0)} before and {" ".join(f"{x:.1f}" for x in load1)} after (shared machine). Each server is a thread of the bench's process writing as fast as loopback takes it (the client's reading is what paces it); the client runs in a child process of its own, its memory read from /proc/self/status: "peak growth" is the peak (VmHWM, reset just before the request) less what it held just before (VmRSS); "child's peak" is the whole child's (imports included, os.wait4). The /metrics cases time the whole neutrality-control call (VLLM's `control`: /metrics, the request, /metrics).{" The client of " + args.before + " ran under a 2 GB address-space cap and was killed 30 s past timeout_s: its rows stop there, not where it would have." if args.before else ""}

{table(results)}

This checkout's client ended every request as an error record within timeout_s + 1 s, its peak within {BOUND_MB} MB of what it held before: {"yes" if not over else "no: " + ", ".join(over)}.

What each record says:

{errors}
"""
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(text)
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main())
