"""The reference server's HTTP side: one thread per connection answers each route and streams each completion
on its schedule (bracket.engines.reference_schedule) or, in batching mode, at the steps of the batch it joins
(bracket.engines.reference_batching)."""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bracket.engines.reference_schedule import (
    PLAIN_FIELDS,
    VERSION,
    WORDS,
    RequestLog,
    _count_words,
    _sleep_until,
    _token_id,
    _token_text,
    event_tokens,
    events_of,
    release_index,
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as uvicorn (asyncio) and llama-server (cpp-httplib built with CPPHTTPLIB_TCP_NODELAY)
    # set it: with Nagle's algorithm on, a small write waits for the ACK of the one before, which the
    # client's delayed ACK holds up to 40 ms, and two groups of a bursty stream would arrive as one.
    disable_nagle_algorithm = True
    server: _HTTPServer

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
        k, rate = ref.tokens_per_event, ref.rate
        if ref.body_cost and set(req) - PLAIN_FIELDS:
            rate = rate / (1 + ref.body_cost)
        e = events_of(n, k, ref.prefill_token)
        batcher = ref.batcher
        if not req.get("stream"):
            # Non-streaming: the whole body at the time the last event would have gone.
            if batcher is not None:
                _sleep_until(t_recv + ref.ttft)
                slot = batcher.join(e)
                batcher.wait(slot, e - 1)
                batcher.leave(slot)
            else:
                _sleep_until(t_recv + ref.ttft + (e - 1) * k / rate)
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
        self._stream(req, chat, n, e, k, rate, finish, usage, log, rid, created, fault)

    def _stream(self, req, chat, n, e, k, rate, finish, usage, log, rid, created, fault) -> None:
        """The streamed completion: each event at its deadline (the schedule), or at the end of the batch step
        that made it (batching mode: bracket.engines.reference_batching)."""
        ref = self.server.ref
        obj = "chat.completion.chunk" if chat else "text_completion"
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

        batcher = ref.batcher
        burst = 1 if batcher is not None else ref.burst
        slot = None
        try:
            if batcher is not None:  # prefill (ttft), then the step in progress
                _sleep_until(log.t_recv + ref.ttft)
                slot = batcher.join(e)
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
                deadline = log.t_recv + ref.ttft + release_index(j, e, burst) * k / rate
                if slot is not None:  # the end of the step that made it
                    deadline = batcher.wait(slot, j)
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
            decode_s = slot.times[-1] - slot.times[0] if slot is not None and slot.times else (e - 1) * k / rate
            ref._finished(decode_s=decode_s, tokens=n)  # before [DONE], as vLLM counts it before the end
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            log.t_done = time.monotonic()
        except ConnectionError:  # the client hung up: the fault tests do that on purpose
            self.close_connection = True
        finally:
            if slot is not None:
                batcher.leave(slot)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    ref: Any  # the bracket.engines.reference_server.ReferenceServer that serves (not imported: it imports this)

    def handle_error(self, request, client_address):
        # A client that hangs up mid-stream is a case under test, not a server fault.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
