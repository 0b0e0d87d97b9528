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

Run it:  python -m bracket.engines.reference_server --port 8099 --ttft 0.05 --rate 500 --tokens-per-event 4
Import:  with ReferenceServer(rate=500, tokens_per_event=4) as srv: ... srv.url ...
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "reference-model"
VERSION = "bracket-reference-server 1"
FAULTS = {"http500", "http400", "malformed", "truncate", "disconnect", "no_usage", "error_event", "stall"}
PLAIN_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "stream",
        "stream_options",
        "ignore_eos",
    }
)
# The server reads its API key from here (engines/reference.py names it to the session, which redacts it).
API_KEY_ENV = "BRACKET_REFERENCE_API_KEY"
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "runs")


@dataclass(frozen=True)
class Truth:
    """What a perfect client reports for one request (see the module docstring for formulas)."""

    tokens: int
    events: int
    ttft_s: float
    wall_s: float
    decode_tok_s: float
    tg_tok_s: float | None
    acceptance_length: float
    events_tg_tok_s: float | None  # what counting events instead of tokens gives (llama-benchy 0.4's bug)
    burst: int = 1  # events released together (bursty delivery)
    delivered_ttft_s: float = 0.0  # when the client can see the first event
    delivered_tg_tok_s: float | None = None  # (n - 1) / (first->last event as delivered)


def events_of(n: int, k: int, prefill_token: bool = False) -> int:
    """How many events carry n tokens: k at a time, or the prefill's one token first and then k at a time."""
    return 1 + math.ceil((n - 1) / k) if prefill_token else math.ceil(n / k)


def event_tokens(j: int, n: int, k: int, prefill_token: bool = False) -> tuple[int, int]:
    """Tokens [lo, hi) of event j."""
    if prefill_token:
        return (0, 1) if j == 0 else (1 + (j - 1) * k, min(1 + j * k, n))
    return j * k, min(j * k + k, n)


def truth(
    n: int, rate: float, tokens_per_event: int, ttft: float, burst: int = 1, prefill_token: bool = False
) -> Truth:
    """The exact values of the schedule for a request of `n` tokens (delivered `burst` events at a time;
    with `prefill_token`, the first event carries one token, as a real engine's prefill makes)."""
    if n < 1 or rate <= 0 or tokens_per_event < 1 or ttft < 0 or burst < 1:
        raise ValueError(
            f"need n >= 1, rate > 0, tokens_per_event >= 1, ttft >= 0, burst >= 1; got {n}, {rate}, "
            f"{tokens_per_event}, {ttft}, {burst}"
        )
    k = tokens_per_event
    e = events_of(n, k, prefill_token)
    span = (e - 1) * k / rate
    wall = ttft + span
    tg = (n - 1) / span if span > 0 else None
    ev_tg = (e - 1) / span if span > 0 else None
    first = min(burst, e) - 1  # index of the event whose deadline releases the first group
    seen_span = (e - 1 - first) * k / rate
    return Truth(
        tokens=n,
        events=e,
        ttft_s=ttft,
        wall_s=wall,
        decode_tok_s=n / wall,
        tg_tok_s=tg,
        acceptance_length=n / e,
        events_tg_tok_s=ev_tg,
        burst=burst,
        delivered_ttft_s=ttft + first * k / rate,
        delivered_tg_tok_s=(n - 1) / seen_span if seen_span > 0 else None,
    )


def release_index(j: int, events: int, burst: int) -> int:
    """The event whose deadline releases event j: the last of j's group of `burst`."""
    return min((j // burst) * burst + burst, events) - 1


@dataclass
class RequestLog:
    """The realised timeline of one request, on CLOCK_MONOTONIC."""

    path: str
    t_recv: float
    n_tokens: int = 0
    event_times: list[float] = field(default_factory=list)
    deadlines: list[float] = field(default_factory=list)
    t_done: float | None = None

    @property
    def max_lateness_s(self) -> float:
        return max((t - d for t, d in zip(self.event_times, self.deadlines)), default=0.0)

    def summary(self) -> dict:
        return {
            "path": self.path,
            "t_recv": self.t_recv,
            "n_tokens": self.n_tokens,
            "events": len(self.event_times),
            "t_first_event": self.event_times[0] if self.event_times else None,
            "t_last_event": self.event_times[-1] if self.event_times else None,
            "t_done": self.t_done,
            "max_lateness_s": self.max_lateness_s,
        }


def _token_text(i: int) -> str:
    return " " + WORDS[i % len(WORDS)]


def _token_id(i: int) -> int:
    """Token i's id: WORDS[j] has id j + 1 (0 is [UNK]), as in `word_vocab()`."""
    return i % len(WORDS) + 1


def word_vocab() -> dict[str, int]:
    """The vocabulary a client-side word-level tokenizer needs to count this server's tokens exactly."""
    return {"[UNK]": 0, **{w: j + 1 for j, w in enumerate(WORDS)}}


def _count_words(text: str) -> int:
    return max(1, len(text.split()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as uvicorn (asyncio) and llama-server (cpp-httplib built with CPPHTTPLIB_TCP_NODELAY)
    # set it: with Nagle's algorithm on, a small write waits for the ACK of the one before, which the
    # client's delayed ACK holds up to 40 ms, and two groups of a bursty stream would arrive as one.
    disable_nagle_algorithm = True
    server: "_HTTPServer"

    def log_message(self, fmt, *args):  # quiet: the harness is timing us
        pass

    def parse_request(self):
        # The schedule starts when the request line has arrived, before header parsing (which
        # costs http.server a few hundred microseconds that are ours, not the client's).
        self.t_arrive = time.monotonic()
        return super().parse_request()

    # ---- plumbing -------------------------------------------------------------------------
    def _send_json(self, status: int, obj: dict | str, content_type: str = "application/json") -> None:
        body = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    # ---- GET ------------------------------------------------------------------------------
    def do_GET(self):
        ref = self.server.ref
        if self._refused():
            return
        if self.path == "/health":
            self._send_json(200, "", "text/plain")
        elif self.path == "/version" and not ref.generic:
            self._send_json(200, {"version": VERSION})
        elif self.path == "/v1/models":
            card = {"id": ref.served_model_name, "object": "model", "owned_by": "bracket"}
            if ref.max_model_len is not None:
                card["max_model_len"] = ref.max_model_len
            self._send_json(200, {"object": "list", "data": [card]})
        elif self.path == "/metrics" and not ref.generic:
            self._send_json(200, ref.metrics_text(), "text/plain; version=0.0.4")
        elif self.path.startswith("/reference/log"):
            self._send_json(200, {"requests": [r.summary() for r in list(ref.log)[-1000:]]})
        elif self.path == "/reference/config":
            self._send_json(200, ref.config())
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    # ---- POST -----------------------------------------------------------------------------
    def _tokenize(self, raw: bytes) -> None:
        """vLLM's /tokenize: one token per word, the count a completion's usage reports for the prompt."""
        try:
            req = json.loads(raw or b"{}")
            words = str(req["prompt"]).split()
        except (ValueError, TypeError, KeyError) as exc:
            return self._send_json(400, {"error": {"message": f"bad tokenize body: {exc}", "type": "BadRequestError"}})
        ids = [WORDS.index(w) + 1 if w in WORDS else 0 for w in words]
        if req.get("add_special_tokens", True) and not ids:
            ids = [0]  # as usage counts an empty prompt: one token
        self._send_json(
            200,
            {"count": len(ids), "max_model_len": self.server.ref.max_model_len or 0, "tokens": ids, "token_strs": None},
        )

    def _refused(self) -> bool:
        """Answer 401 to a /v1/* or /tokenize request without the server's key, as vLLM's --api-key does."""
        key = self.server.ref.api_key
        if not key or not (self.path.startswith("/v1/") or self.path == "/tokenize"):
            return False
        if self.headers.get("Authorization") == f"Bearer {key}":
            return False
        self._send_json(401, {"error": "Unauthorized"})
        return True

    def do_POST(self):
        ref = self.server.ref
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        t_recv = self.t_arrive
        if self._refused():
            return
        if self.path == "/reference/config":
            try:
                ref.configure(**json.loads(raw or b"{}"))
            except (ValueError, TypeError) as exc:
                return self._send_json(400, {"error": {"message": str(exc), "type": "invalid_request"}})
            return self._send_json(200, ref.config())
        if self.path == "/tokenize" and not ref.generic:
            return self._tokenize(raw)
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        fault = self.headers.get("X-Reference-Fault") or ref.fault
        if fault == "http500":
            return self._send_json(500, {"error": {"message": "injected internal error", "type": "server_error"}})
        try:
            req = json.loads(raw)
            n_max = int(
                next((req[key] for key in ("max_tokens", "max_completion_tokens") if req.get(key) is not None), 16)
            )
        except (ValueError, TypeError) as exc:
            return self._send_json(400, {"error": {"message": f"bad request body: {exc}", "type": "invalid_request"}})
        if fault == "http400" or n_max < 1:
            return self._send_json(
                400,
                {
                    "error": {
                        "message": f"max_tokens must be >= 1 (got {n_max})" if n_max < 1 else "injected bad request",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                },
            )
        if chat:
            prompt_tokens = sum(_count_words(str(m.get("content", ""))) for m in req.get("messages") or [])
        else:
            prompt_tokens = _count_words(str(req.get("prompt", "")))
        if ref.max_model_len is not None and prompt_tokens + n_max > ref.max_model_len:
            return self._send_json(
                400,
                {
                    "error": {
                        "message": f"This model's maximum context length is {ref.max_model_len} tokens. However, you "
                        f"requested {prompt_tokens + n_max} tokens ({prompt_tokens} in the messages, {n_max} in "
                        f"the completion). Please reduce the length of the messages or completion.",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                },
            )
        if ref.generic and req.get("model") != ref.served_model_name:
            return self._send_json(
                404,
                {
                    "error": {
                        "message": f"The model `{req.get('model')}` does not exist.",
                        "type": "NotFoundError",
                        "code": 404,
                    }
                },
            )
        n = n_max
        finish = "length"
        honoured = req.get("ignore_eos") and not ref.ignores_ignore_eos
        if ref.eos_after is not None and not honoured and ref.eos_after < n_max:
            n, finish = ref.eos_after, "stop"
        log = RequestLog(path=self.path, t_recv=t_recv, n_tokens=n)
        ref._record(log)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        if not ref.generic:
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        rid = f"cmpl-ref-{id(log):x}"
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        k, rate, ttft, burst = ref.tokens_per_event, ref.rate, ref.ttft, ref.burst
        if ref.body_cost and set(req) - PLAIN_FIELDS:
            rate = rate / (1 + ref.body_cost)
        e = events_of(n, k, ref.prefill_token)
        if not req.get("stream"):
            # Non-streaming: the whole body at the time the last event would have gone.
            _sleep_until(t_recv + ttft + (e - 1) * k / rate)
            text = "".join(_token_text(i) for i in range(n))
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                if chat
                else {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
            )
            log.t_done = time.monotonic()
            return self._send_json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion" if chat else "text_completion",
                    "created": created,
                    "model": ref.served_model_name,
                    "choices": [choice],
                    "usage": usage,
                },
            )
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        want_ids = bool(req.get("return_token_ids")) and ref.token_ids
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        head = {"id": rid, "object": obj, "created": created, "model": ref.served_model_name}

        def event(choice: dict, **extra) -> bytes:
            return b"data: " + json.dumps({**head, "choices": [choice], **extra}).encode() + b"\n\n"

        try:
            if chat:
                # vLLM opens a chat stream with a role-only chunk before any token: a TTFT trap.
                self._chunk(
                    event(
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    )
                )
            held: list[tuple[bytes, float, int]] = []
            for j in range(e):
                lo, hi = event_tokens(j, n, k, ref.prefill_token)
                text = "".join(_token_text(i) for i in range(lo, hi))
                last = hi == n
                fr = finish if last else None
                choice = (
                    {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": fr}
                    if chat
                    else {"index": 0, "text": text, "logprobs": None, "finish_reason": fr}
                )
                if want_ids:
                    choice["token_ids"] = [_token_id(i) for i in range(lo, hi)]
                payload = event(choice)
                if fault == "malformed" and j == 1:
                    payload = b'data: {"id": "' + rid.encode() + b'", "choices": [{"text": "oops"\n\n'
                if fault == "error_event" and j == 1:
                    payload = b'data: {"error": {"message": "injected engine failure", "code": 500}}\n\n'
                # Made at t_recv + ttft + j k / rate; released with the last event of its group of `burst`.
                deadline = t_recv + ttft + release_index(j, e, burst) * k / rate
                if fault == "stall":
                    deadline += 60.0
                held.append((payload, deadline, hi - lo))
                if j == release_index(j, e, burst) or (fault in ("truncate", "disconnect", "error_event") and j == 1):
                    _sleep_until(deadline)
                    self.wfile.write(
                        b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk, _, _ in held)
                    )  # one write
                    self.wfile.flush()
                    now = time.monotonic()
                    for _, due, tokens in held:
                        log.event_times.append(now)
                        log.deadlines.append(due)
                        ref._count_step(tokens)
                    held = []
                if fault == "truncate" and j == 1:
                    self.close_connection = True
                    self.wfile.write(b"0\r\n\r\n")  # a clean end of body, but no [DONE]
                    return
                if fault == "disconnect" and j == 1:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "error_event" and j == 1:
                    break
            if include_usage and fault != "no_usage":
                self._chunk(b"data: " + json.dumps({**head, "choices": [], "usage": usage}).encode() + b"\n\n")
            ref._finished(decode_s=(e - 1) * k / rate, tokens=n)  # before [DONE], as vLLM counts it before the end
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            log.t_done = time.monotonic()
        except ConnectionError:  # the client hung up: the fault tests do that on purpose
            self.close_connection = True


_KEEP = object()


def _check(rate, ttft, tokens_per_event, fault, burst=1, prefill_token=False, body_cost=0.0) -> None:
    if float(body_cost) < 0:
        raise ValueError(f"body_cost must be >= 0 (a fraction of the per-token time), got {body_cost}")
    if not isinstance(prefill_token, bool):
        raise ValueError(f"prefill_token must be true or false, got {prefill_token!r}")
    if int(burst) < 1:
        raise ValueError(f"burst must be >= 1 events released together, got {burst}")
    if not 1 <= int(tokens_per_event) <= 8:
        raise ValueError(f"tokens_per_event must be 1..8, got {tokens_per_event}")
    if float(rate) <= 0 or float(ttft) < 0:
        raise ValueError(f"rate must be > 0 and ttft >= 0, got rate={rate}, ttft={ttft}")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose one of {sorted(FAULTS)}")


def _sleep_until(deadline: float) -> None:
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(left)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    ref: "ReferenceServer"

    def handle_error(self, request, client_address):
        # A client that hangs up mid-stream is a case under test, not a server fault.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


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
            f'vllm:num_requests_running{{engine="0",model_name={name}}} 0.0',
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
    )
    core = None
    if a.core_process:  # same process group: only a teardown that signals the whole group stops it
        core = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"])
        print(f"reference server: core process {core.pid}", flush=True)
    print(
        f"reference server on {srv.url}: ttft {srv.ttft} s, {srv.rate:g} tok/s, {srv.tokens_per_event} tokens/event"
        f"{', API key required' if srv.api_key else ''}; ready",
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
