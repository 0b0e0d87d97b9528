"""A calibrated OpenAI-compatible server: tokens on an exact schedule, the ground truth for harness accuracy.

It serves POST /v1/completions and /v1/chat/completions (streaming SSE or not), GET /health,
/metrics (vLLM's speculative-decoding counters), /version and /v1/models, and streams the
completion on a schedule fixed in advance:

    n  = max_tokens tokens (fewer only with `eos_after` and ignore_eos false)
    k  = tokens per stream event (1..8, like one speculative verify step)
    E  = ceil(n / k) events; event j (0-based) carries tokens jk .. min(jk + k, n) - 1
    event j is written at   t_recv + ttft + j * k / rate

or, with `prefill_token` (as vLLM and llama-server stream under speculation: the prefill makes one
token, each verify step after it several), event 0 carries token 0 alone and event j >= 1 tokens
1 + (j - 1) k .. min(1 + jk, n) - 1, so E = 1 + ceil((n - 1) / k); the formulas below hold with that E.

where t_recv is the moment the request line arrived. With k = 1, token i is emitted at
ttft + i / rate exactly. The usage chunk and `data: [DONE]` follow the last event at once.

Bursty delivery (`burst=B`, default 1): the events are made on the same schedule, but held and
released B at a time, in one write, when the last of each group is due: group g (events gB ..
min(gB + B, E) - 1) is written at t_recv + ttft + (min(gB + B, E) - 1) k / rate. This is what a
contended llama-server does to a stream (several tokens reach the client together). The last
event goes at the same moment as without bursts, so the true decode rate does not change; what a
client sees between its first and last event does (`Truth.delivered_*`):

    first event seen at    ttft + (min(B, E) - 1) k / rate
    first->last seen       (E - min(B, E)) k / rate   (0 when one group holds every event)
    tg rate as delivered   (n - 1) / ((E - min(B, E)) k / rate)   > rate for B > 1

The true values a client should report follow from the schedule alone (`truth()`):

    wall  = ttft + (E - 1) * k / rate                       (request received -> last event)
    decode rate (bracket)  = n / wall                        completion_tokens / wall time
    tg rate (llama-benchy) = (n - 1) / ((E - 1) * k / rate)  tokens after the first / first->last event
    ttft  = ttft
    acceptance length = n / E                                tokens per verify step

so tg equals `rate` whenever k divides n - 1, and a tool that counts events instead of tokens
reports (E - 1) / ((E - 1) k / rate) = rate / k. A client adds its own latency (request send,
connection, parsing) on top of `wall`; that addition is exactly the harness error to measure.

Deadlines are absolute on CLOCK_MONOTONIC (time.monotonic, the clock time.perf_counter also
reads on Linux) and each is waited for with time.sleep, which is clock_nanosleep: lateness does
not accumulate, and it is typically tens of microseconds rather than the millisecond granularity
of an event loop's epoll timeout. That is why this is a thread-per-connection http.server and
not asyncio. Each request's realised timeline (receive time, every event's write time) is kept in
`ReferenceServer.log` so a harness can tell its own error from the server's lateness.

A body-dependent cost (`body_cost=c`, default 0), for the neutrality control: a request whose body
carries any field beyond what a plain OpenAI client sends (PLAIN_FIELDS: model, prompt or messages,
max_tokens, temperature, stream, stream_options, ignore_eos) is served at rate / (1 + c), so its
per-token time is (1 + c) times a plain request's, as llama.cpp's `top_k: 0` made bracket's slower.
/metrics carries vLLM's per-request histograms for every finished stream, from the schedule:
request_decode_time_seconds (first event to last, (E - 1) k / rate) and request_generation_tokens (n).

Faults for testing error paths, chosen per request by the header `X-Reference-Fault` (or for
the whole server with `fault=`): http500, http400, malformed (one event is not JSON), truncate
(the body ends cleanly after two events, no [DONE]), disconnect (the socket closes mid-body after
two events), no_usage (no usage chunk), error_event (an
`{"error": ...}` event mid-stream), stall (the first event waits 60 s).

A context (`max_model_len=N`, default none), as vLLM holds one: /v1/models lists it, a completion
whose prompt words plus max_tokens exceed it is answered HTTP 400 with vLLM's message, and POST
/tokenize ({model, prompt, add_special_tokens}, vLLM's route) answers {count, max_model_len, tokens}
with one token per whitespace-separated word, the count usage reports (`generic` servers have no
/tokenize).

An API key (`BRACKET_REFERENCE_API_KEY` in the server's environment, as vLLM reads VLLM_API_KEY):
every /v1/* and /tokenize request without "Authorization: Bearer KEY" is answered 401; /health,
/metrics and /version stay open, as vLLM's do. `--core-process` starts a second process in the
server's process group that only sleeps, as vLLM's engine core sits beside its API server: a
teardown that stops the leader alone leaves it behind.

It is also an engine the workflow launches (`engine.kind: reference`, bracket.engines.reference):
an experiment on it needs no model and no engine environment, and every timing it records is known
in advance, so the workflow's plumbing (blocks, faults, resumes, executors, the article) is tested
on it in seconds.

Batching mode (`step_base_s=a`, `step_per_stream_s=b`, optional `max_batch`): instead of a schedule per request,
one engine thread runs continuous-batching decode steps of a + b * batch seconds, every active stream getting one
event per step, so a load run has a known truth (per-user rate k / (a + b N), aggregate N k / (a + b N)):
bracket.engines.reference_batching. The modules: reference_schedule (the schedule and its truth),
reference_handler (the HTTP routes and the stream), reference_batching (the law), this one (the server's object,
its process, its command line).

Run it:  python -m bracket.engines.reference_server --port 8099 --ttft 0.05 --rate 500 --tokens-per-event 4
Import:  with ReferenceServer(rate=500, tokens_per_event=4) as srv: ... srv.url ...
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

if not __package__:  # run as a file (python .../reference_server.py): the package's folder on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bracket.engines import reference_batching  # noqa: E402
from bracket.engines.reference_batching import BatchEngine, BatchTruth, batch_truth, knee  # noqa: E402,F401
from bracket.engines.reference_handler import _Handler, _HTTPServer  # noqa: E402
from bracket.engines.reference_schedule import (  # noqa: E402,F401  (the server's public names, as before the split)
    API_KEY_ENV,
    FAULTS,
    MODEL,
    PLAIN_FIELDS,
    VERSION,
    WORDS,
    RequestLog,
    Truth,
    _check,
    _count_words,
    _sleep_until,
    _token_id,
    _token_text,
    event_tokens,
    events_of,
    release_index,
    truth,
    word_vocab,
)

_KEEP = object()


class ReferenceServer:
    """The server, run on a background thread; use as a context manager.

    rate: tokens per second after the first event; ttft: seconds from request to first event;
    tokens_per_event: k, 1..8; draft_budget: draft tokens proposed per verify step, reported in
    /metrics (default k - 1; 0 means no speculation and no spec-decode counters);
    eos_after: stop with finish_reason "stop" after this many tokens unless ignore_eos is set;
    token_ids: honour `return_token_ids` with per-event token ids, as vLLM does (False: as a
    server without that extension); burst: events held and released together (1: each on time);
    prefill_token: the first event carries one token (the prefill's), then k per event, as vLLM and
    llama-server stream under speculation (False: every event carries k); generic: answer as a
    generic OpenAI-compatible server (no /version, no /metrics, no cached tokens in usage, 404 for a
    model it does not list), where the default imitates vLLM's routes; ignores_ignore_eos: stop
    after eos_after tokens even when the request sets ignore_eos (a server that cannot pin the length);
    max_model_len: the context in tokens (words), enforced and reported as vLLM does (None: no limit);
    served_model_name: the model's name in /v1/models, responses and /metrics (vLLM's --served-model-name;
    a user's server often names its model like the hub, e.g. Qwen/Qwen3-8B);
    api_key: /v1/* and /tokenize answer 401 without "Authorization: Bearer api_key" (None: open).
    """

    def __init__(
        self,
        *,
        rate: float = 500.0,
        ttft: float = 0.05,
        tokens_per_event: int = 1,
        draft_budget: int | None = None,
        eos_after: int | None = None,
        fault: str | None = None,
        token_ids: bool = True,
        burst: int = 1,
        prefill_token: bool = False,
        body_cost: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        generic: bool = False,
        ignores_ignore_eos: bool = False,
        max_model_len: int | None = None,
        served_model_name: str = MODEL,
        api_key: str | None = None,
        step_base_s: float | None = None,
        step_per_stream_s: float = 0.0,
        max_batch: int | None = None,
    ):
        _check(rate, ttft, tokens_per_event, fault, burst, prefill_token, body_cost)
        self.api_key = api_key or None
        self.body_cost = float(body_cost)
        self._decode_s, self._gen_tokens, self._finished_n = 0.0, 0, 0
        self.burst, self.prefill_token = int(burst), prefill_token
        self.rate, self.ttft, self.tokens_per_event = float(rate), float(ttft), int(tokens_per_event)
        self.draft_budget = tokens_per_event - 1 if draft_budget is None else int(draft_budget)
        self.eos_after, self.fault, self.token_ids = eos_after, fault, bool(token_ids)
        self.generic, self.ignores_ignore_eos = bool(generic), bool(ignores_ignore_eos)
        if max_model_len is not None and int(max_model_len) < 1:
            raise ValueError(f"max_model_len must be >= 1 token, got {max_model_len}")
        self.max_model_len = None if max_model_len is None else int(max_model_len)
        if not str(served_model_name).strip():
            raise ValueError("served_model_name must name the model, got an empty string")
        self.served_model_name = str(served_model_name)
        self.log: collections.deque[RequestLog] = collections.deque(maxlen=10_000)
        self._lock = threading.Lock()
        self._drafts = self._draft_tokens = self._accepted = 0
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.ref = self
        self.host, self.port = self._httpd.server_address[:2]
        self._thread: threading.Thread | None = None
        self.batcher: BatchEngine | None = None
        self._set_batching(step_base_s, step_per_stream_s, max_batch)

    def _set_batching(self, step_base_s, step_per_stream_s, max_batch) -> None:
        """Batching mode on (a step law given) or off (None): a new engine thread for the streams that come next."""
        reference_batching.check(step_base_s, step_per_stream_s, max_batch)
        if self.batcher is not None:
            self.batcher.stop()
        self.batcher = None if step_base_s is None else BatchEngine(step_base_s, step_per_stream_s or 0.0, max_batch)

    def batch_truth(self, users: int) -> BatchTruth:
        """The batching law's values for `users` streams always in flight (batching mode only)."""
        if self.batcher is None:
            raise ValueError("batch_truth needs batching mode: start the server with step_base_s")
        b = self.batcher
        return batch_truth(b.a, b.b, users, self.tokens_per_event, b.max_batch)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def truth(self, n: int) -> Truth:
        return truth(n, self.rate, self.tokens_per_event, self.ttft, self.burst, self.prefill_token)

    def config(self) -> dict:
        return {
            "rate": self.rate,
            "ttft": self.ttft,
            "tokens_per_event": self.tokens_per_event,
            "draft_budget": self.draft_budget,
            "eos_after": self.eos_after,
            "fault": self.fault,
            "token_ids": self.token_ids,
            "burst": self.burst,
            "prefill_token": self.prefill_token,
            "body_cost": self.body_cost,
            "step_base_s": None if self.batcher is None else self.batcher.a,
            "step_per_stream_s": 0.0 if self.batcher is None else self.batcher.b,
            "max_batch": None if self.batcher is None else self.batcher.max_batch,
        }

    def configure(
        self,
        *,
        rate=_KEEP,
        ttft=_KEEP,
        tokens_per_event=_KEEP,
        draft_budget=_KEEP,
        eos_after=_KEEP,
        fault=_KEEP,
        token_ids=_KEEP,
        burst=_KEEP,
        prefill_token=_KEEP,
        body_cost=_KEEP,
        step_base_s=_KEEP,
        step_per_stream_s=_KEEP,
        max_batch=_KEEP,
    ) -> None:
        """Change the schedule for later requests (one server serves a whole grid).

        Over HTTP: POST /reference/config with the same keys as JSON. Changing tokens_per_event
        also resets draft_budget to tokens_per_event - 1 unless draft_budget is given.
        """
        new = self.config()
        given = {
            "rate": rate,
            "ttft": ttft,
            "tokens_per_event": tokens_per_event,
            "draft_budget": draft_budget,
            "eos_after": eos_after,
            "fault": fault,
            "token_ids": token_ids,
            "burst": burst,
            "prefill_token": prefill_token,
            "body_cost": body_cost,
            "step_base_s": step_base_s,
            "step_per_stream_s": step_per_stream_s,
            "max_batch": max_batch,
        }
        new.update({key: v for key, v in given.items() if v is not _KEEP})
        if tokens_per_event is not _KEEP and draft_budget is _KEEP:
            new["draft_budget"] = None
        _check(
            new["rate"],
            new["ttft"],
            new["tokens_per_event"],
            new["fault"],
            new["burst"],
            new["prefill_token"],
            new["body_cost"],
        )
        self.body_cost = float(new["body_cost"])
        self.burst, self.prefill_token = int(new["burst"]), new["prefill_token"]
        self.rate, self.ttft, self.tokens_per_event = (
            float(new["rate"]),
            float(new["ttft"]),
            int(new["tokens_per_event"]),
        )
        self.draft_budget = self.tokens_per_event - 1 if new["draft_budget"] is None else int(new["draft_budget"])
        self.eos_after, self.fault, self.token_ids = new["eos_after"], new["fault"], bool(new["token_ids"])
        law = (new["step_base_s"], new["step_per_stream_s"], new["max_batch"])
        if law != (self.config()["step_base_s"], self.config()["step_per_stream_s"], self.config()["max_batch"]):
            self._set_batching(*law)

    def _record(self, log: RequestLog) -> None:
        with self._lock:
            self.log.append(log)

    def _count_step(self, tokens: int) -> None:
        # One event is one verify step: it yields the target's own token plus `tokens - 1` accepted drafts.
        if self.draft_budget <= 0:
            return
        with self._lock:
            self._drafts += 1
            self._draft_tokens += self.draft_budget
            self._accepted += tokens - 1

    def _finished(self, decode_s: float, tokens: int) -> None:
        with self._lock:
            self._decode_s += decode_s
            self._gen_tokens += tokens
            self._finished_n += 1

    def metrics_text(self) -> str:
        name = json.dumps(
            self.served_model_name, ensure_ascii=False
        )  # a label value: quoted and escaped as Prometheus reads it
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{engine="0",model_name={name}}} {float(self.running)}',
        ]
        with self._lock:
            hist = {"request_decode_time_seconds": self._decode_s, "request_generation_tokens": self._gen_tokens}
            count = self._finished_n
        for name, total in hist.items():
            labels = f'{{engine="0",model_name={name}}}'
            lines += [
                f"# TYPE vllm:{name} histogram",
                f"vllm:{name}_sum{labels} {float(total)!r}",
                f"vllm:{name}_count{labels} {float(count)!r}",
            ]
        if self.draft_budget > 0:
            with self._lock:
                vals = {"drafts": self._drafts, "draft_tokens": self._draft_tokens, "accepted_tokens": self._accepted}
            for name, v in vals.items():
                metric = f"vllm:spec_decode_num_{name}"
                lines += [
                    f"# HELP {metric}_total Speculative decoding counter.",
                    f"# TYPE {metric}_total counter",
                    f'{metric}_total{{engine="0",model_name={name}}} {float(v)}',
                    f'{metric}_created{{engine="0",model_name={name}}} 1.7e9',
                ]
        return "\n".join(lines) + "\n"

    @property
    def running(self) -> int:
        """Streams in the batch now (batching mode; 0 otherwise)."""
        return 0 if self.batcher is None else self.batcher.running

    def start(self) -> "ReferenceServer":
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"reference-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.batcher is not None:
            self.batcher.stop()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ReferenceServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ReferenceProcess:
    """The server in its own process, for timing: in-process, it would share the GIL with the
    client under test, and a waiting server thread can lose up to sys.getswitchinterval() (5 ms)
    before each event. Both processes read CLOCK_MONOTONIC, so `logs()` timestamps compare
    directly with the client's time.perf_counter() on Linux.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        python: str = sys.executable,
        startup_timeout_s: float = 15.0,
        max_model_len: int | None = None,
        **config,
    ):
        self.host, self.port = host, port or free_port(host)
        argv = [python, __file__, "--host", host, "--port", str(self.port)]
        if max_model_len is not None:
            argv += ["--max-model-len", str(max_model_len)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"reference server exited with code {self.proc.returncode}: "
                    f"{self.proc.stderr.read().decode(errors='replace')[-2000:]}"
                )
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"reference server on {self.url} not ready after {startup_timeout_s} s"
                    ) from None
                time.sleep(0.05)
        if config:
            self.configure(**config)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def configure(self, **config) -> dict:
        return self._call("/reference/config", config)

    def config(self) -> dict:
        return self._call("/reference/config")

    def logs(self) -> list[dict]:
        return self._call("/reference/log")["requests"]

    def truth(self, n: int) -> Truth:
        c = self.config()
        return truth(n, c["rate"], c["tokens_per_event"], c["ttft"], c.get("burst", 1), c.get("prefill_token", False))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "ReferenceProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--ttft", type=float, default=0.05, help="seconds from request to first event (default 0.05)")
    ap.add_argument("--rate", type=float, default=500.0, help="tokens per second (default 500)")
    ap.add_argument("--tokens-per-event", type=int, default=1, help="tokens per stream event, 1..8 (default 1)")
    ap.add_argument(
        "--draft-budget",
        type=int,
        default=None,
        help="draft tokens per verify step in /metrics (default tokens-per-event - 1)",
    )
    ap.add_argument(
        "--eos-after",
        type=int,
        default=None,
        help="stop after N tokens with finish_reason 'stop' unless the request sets ignore_eos",
    )
    ap.add_argument("--no-token-ids", action="store_true", help="ignore return_token_ids (default: honour it, as vLLM)")
    ap.add_argument("--fault", choices=sorted(FAULTS), default=None, help="inject a fault into every request")
    ap.add_argument("--burst", type=int, default=1, help="release events B at a time, in one write (default 1)")
    ap.add_argument("--prefill-token", action="store_true", help="the first event carries one token, then k per event")
    ap.add_argument(
        "--body-cost",
        type=float,
        default=0.0,
        help="per-token cost, as a fraction, of a body with any field beyond a plain client's (default 0)",
    )
    ap.add_argument(
        "--generic",
        action="store_true",
        help="answer as a generic OpenAI server: no /version, /metrics or cached tokens (default: as vLLM)",
    )
    ap.add_argument(
        "--ignores-ignore-eos",
        action="store_true",
        help="stop after --eos-after tokens even when a request sets ignore_eos",
    )
    ap.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="context in tokens (words): reported, and a longer request answered HTTP 400 (default none)",
    )
    ap.add_argument(
        "--served-model-name",
        default=MODEL,
        help=f"the model's name in /v1/models, responses and /metrics, as vLLM's flag (default {MODEL})",
    )
    ap.add_argument(
        "--core-process",
        action="store_true",
        help="start a second, sleeping process in the server's process group, as vLLM's engine core",
    )
    ap.add_argument(
        "--step-base",
        type=float,
        default=None,
        help="batching mode: each decode step takes STEP_BASE + STEP_PER_STREAM * batch seconds (default off)",
    )
    ap.add_argument("--step-per-stream", type=float, default=0.0, help="batching mode: seconds per stream per step")
    ap.add_argument("--max-batch", type=int, default=None, help="batching mode: most streams per step (default none)")
    a = ap.parse_args(argv)
    srv = ReferenceServer(
        rate=a.rate,
        ttft=a.ttft,
        tokens_per_event=a.tokens_per_event,
        draft_budget=a.draft_budget,
        eos_after=a.eos_after,
        fault=a.fault,
        token_ids=not a.no_token_ids,
        burst=a.burst,
        prefill_token=a.prefill_token,
        body_cost=a.body_cost,
        host=a.host,
        port=a.port,
        generic=a.generic,
        ignores_ignore_eos=a.ignores_ignore_eos,
        max_model_len=a.max_model_len,
        served_model_name=a.served_model_name,
        api_key=os.environ.get(API_KEY_ENV),
        step_base_s=a.step_base,
        step_per_stream_s=a.step_per_stream,
        max_batch=a.max_batch,
    )
    core = None
    if a.core_process:  # same process group: only a teardown that signals the whole group stops it
        core = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"])
        print(f"reference server: core process {core.pid}", flush=True)
    print(
        f"reference server on {srv.url}: ttft {srv.ttft} s, "
        + (
            f"batching steps of {srv.batcher.a:g} + {srv.batcher.b:g} x batch s"
            + (f" (at most {srv.batcher.max_batch})" if srv.batcher.max_batch else "")
            if srv.batcher is not None
            else f"{srv.rate:g} tok/s"
        )
        + f", {srv.tokens_per_event} tokens/event{', API key required' if srv.api_key else ''}; ready",
        flush=True,
    )
    try:
        srv._httpd.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()


if __name__ == "__main__":
    main()
