"""One streamed completion request, timed from the client's side.

decode rate = completion_tokens / wall time of the request, with completion_tokens from the
server's `usage`. Never count stream events: under speculative decoding one event can carry
several tokens (seed 000: a DFlash2 event carries about 3.75 tokens).
tg rate = (completion_tokens - 1) / (t_last_token - t_first_token), llama-benchy's definition.
Each token's time is that of the network read that brought its event (as llama-benchy stamps its
reads): events that arrive together share one time, and a stream that arrives in one read has no
first -> last window, so no tg rate (its decode rate stands).

On a CPU engine the client shares the cores with the server, so it does per event only what the
record needs: one recv per network read (bracket.http_stream), the read's lines split once, each
event decoded by orjson, its text kept; bench/results/harness_accuracy.md measures what that costs
per token beside llama-benchy's client.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from collections.abc import Iterable, Iterator
from typing import Callable

import httpx
import orjson

from bracket import http_stream
from bracket.secrets import redact


@dataclass
class Measurement:
    started_at: float
    ttft_s: float | None = None
    wall_s: float | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    decode_tok_s: float | None = None
    tg_tok_s: float | None = None
    stream_events: int = 0
    output_text: str | None = None
    output_sha256: str | None = None
    error: str | None = None

    def fields(self) -> dict:
        return dict(self.__dict__)


def _cached(usage: dict) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return int(details["cached_tokens"])
    return None


@dataclass(frozen=True)
class Counts:
    """What the engine said about the request once it finished."""

    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None


def _clip(text: str, n: int) -> str:
    """Server text for a record: secrets redacted before it is cut, so no part of one survives the cut."""
    return redact(text)[:n]


class _Deadline:
    """Ends a request at `limit_s` after it was sent, however the server paces its bytes.

    httpx's read timeout is a limit between two reads: a server that sends one token every few
    seconds never trips it. At the deadline this shuts the connection's socket down, which wakes
    the blocked read at once; the stream then ends and the request is recorded as over its limit.
    """

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.fired = False
        self._sock: socket.socket | None = None
        self._timer: threading.Timer | None = None

    def arm(self, sock: socket.socket | None, elapsed_s: float) -> None:
        """Arm the deadline once the response has begun, `elapsed_s` after the request was sent."""
        self._sock = sock
        self._timer = threading.Timer(max(self.limit_s - elapsed_s, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _decode(payload: bytes) -> object:
    """An event orjson refused: bytes that are not UTF-8 are read as before this client read bytes
    itself (each bad byte one U+FFFD), so no stream that parsed then fails now; JSONDecodeError
    only for what is not JSON."""
    return json.loads(payload.decode("utf-8", errors="replace"))


_EOL = b"\r\n"


def _ended(reads: Iterable[tuple[float, bytes]]) -> Iterator[tuple[float, bytes]]:
    """The reads, then a line end with the last read's time: a last line without one still counts."""
    now = time.perf_counter()
    for now, data in reads:
        yield now, data
    yield now, b"\n"


def timed_stream(http: httpx.Client, url: str, body: dict, timeout_s: float, *, framing: str,
                 new_text: Callable[[dict], str], is_last: Callable[[dict], bool],
                 counts: Callable[[list[dict]], Counts], on_event: Callable[[dict], None] | None = None,
                 missing_counts: str = "no token counts in the response's final event",
                 stall_s: float | None = None) -> tuple[Measurement, list[dict]]:
    """POST `body` and time its stream; return the measurement and every parsed event.

    framing: "sse" (`data: {...}` lines ending with `data: [DONE]`) or "ndjson" (one JSON object
    per line, ending with the object for which is_last() holds). new_text(event) returns the text
    an event adds (stateful callers turn cumulative text into increments); counts(events) reads
    the engine's token counts and finish reason from the finished stream. Errors are recorded in
    the measurement, not raised.

    Timestamps use time.perf_counter; t0 is taken just before the request is sent (after httpx
    has built it, which costs a few hundred microseconds that are not the server's). Every event
    carries the time of the network read that brought it, taken as the read returns (as
    llama-benchy stamps its reads): the first token time is that of the read with the first event
    carrying text, the last token time that of the read with the last one, and the end the time
    of the read that brought [DONE] (ndjson: the final object). Events that arrive together (a
    burst) share one time, the time they could first be seen. The body is read by
    bracket.http_stream (a socket of its own, one recv per read) where that sends what httpx would,
    else through httpx.

    timeout_s is the whole request's limit (request.timeout_s), from sending to the last byte;
    stall_s (default: timeout_s) the longest wait for any data. A request over either is an error.
    """
    if framing not in ("sse", "ndjson"):
        raise ValueError(f"framing must be 'sse' or 'ndjson', got {framing!r}")
    sse = framing == "sse"
    m = Measurement(started_at=time.time())
    events: list[dict] = []
    parts: list[str] = []
    t_first = t_last = None
    t0 = time.perf_counter()
    end_marker = "[DONE]" if sse else "the final object (done: true)"
    stall = min(stall_s or timeout_s, timeout_s)
    deadline = _Deadline(timeout_s)
    add_event, add_part = events.append, parts.append
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    # The cyclic garbage collector waits while the stream is read (as timeit's timer does): its passes
    # over the growing list of kept events cost more per event than parsing them. Nothing is lost; it
    # runs again after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        request = http.build_request("POST", url, json=body, timeout=stall)
        fast = http_stream.fast_path(http, request)
        t0 = time.perf_counter()
        with (http_stream.Stream(http, request, stall).open() if fast else
              contextlib.closing(http.send(request, stream=True))) as resp:
            status = resp.status if fast else resp.status_code
            deadline.arm(resp.sock if fast else _socket_of(resp), time.perf_counter() - t0)
            if status != 200:
                raw = resp.read_all() if fast else resp.read()
                text = raw.decode("utf-8", errors="replace")
                m.error = f"HTTP {status}: {_clip(text, 500)}"
                m.wall_s = time.perf_counter() - t0
                return m, events
            reads = resp.reads() if fast else ((time.perf_counter(), b) for b in resp.iter_bytes())
            done = False
            end = None
            tail = b""
            for now, data in _ended(reads):
                # The read's complete lines; a line split over reads comes with the read that ends it.
                # Lines end at LF, CR or CRLF (SSE's rule; bytes.splitlines splits on nothing else,
                # so a raw U+2028 inside a JSON string stays in its line).
                if tail:
                    data = tail + data
                lines = data.splitlines()
                tail = b"" if data[-1] in _EOL else lines.pop()
                for line in lines:
                    if sse:
                        if not line.startswith(b"data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            done = True
                            break
                    else:
                        payload = line.strip()
                        if not payload:
                            continue
                    try:
                        try:
                            event = loads(payload)
                        except JSONDecodeError:  # not UTF-8, or not JSON
                            event = _decode(payload)
                    except json.JSONDecodeError:
                        m.error = f"malformed stream event: {_clip(_text(payload), 200)!r}"
                        break
                    if type(event) is not dict:
                        m.error = f"unexpected stream event: {_clip(_text(payload), 200)!r}"
                        break
                    if event.get("error"):
                        m.error = f"server error in stream: {_clip(str(event['error']), 300)}"
                        break
                    add_event(event)
                    text = new_text(event)
                    if text:
                        m.stream_events += 1
                        add_part(text)
                        if t_first is None:
                            t_first = now
                        t_last = now
                    if on_event is not None:
                        on_event(event)
                    if not sse and is_last(event):
                        done = True
                        break
                if done or m.error is not None:
                    end = now
                    break
            if end is None:
                end = time.perf_counter()
            if not done and m.error is None:
                m.error = f"stream ended before {end_marker}"
            if done and fast:
                resp.finish()  # the body's last bytes, after the timing: keeps the connection
    except httpx.TimeoutException:
        m.error = f"timed out after {stall:g} s without data from the server (request.timeout_s)"
        end = time.perf_counter()
    except httpx.HTTPError as exc:
        m.error = _clip(f"{type(exc).__name__}: {exc}", 500)
        end = time.perf_counter()
    finally:
        deadline.cancel()
        if collecting:
            gc.enable()
    if deadline.fired:
        m.error = (f"timed out after {timeout_s:g} s without data from the server (request.timeout_s)"
                   if t_first is None else
                   f"timed out after {timeout_s:g} s, still streaming (request.timeout_s limits the whole request)")
    m.wall_s = end - t0
    m.output_text = "".join(parts)
    m.output_sha256 = hashlib.sha256(m.output_text.encode("utf-8")).hexdigest()
    if t_first is not None:
        m.ttft_s = t_first - t0
    c = counts(events) if events else Counts()
    m.completion_tokens, m.prompt_tokens, m.cached_tokens = c.completion_tokens, c.prompt_tokens, c.cached_tokens
    m.finish_reason = c.finish_reason
    if m.completion_tokens is None and m.error is None:
        m.error = missing_counts
    if m.completion_tokens and m.wall_s:
        m.decode_tok_s = m.completion_tokens / m.wall_s
        if t_first is not None and t_last is not None and t_last > t_first and m.completion_tokens > 1:
            m.tg_tok_s = (m.completion_tokens - 1) / (t_last - t_first)
    return m, events


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")


def _socket_of(response: httpx.Response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    get = getattr(stream, "get_extra_info", None)
    return get("socket") if get else None


def _openai_text(event: dict) -> str:
    text = ""
    for choice in event.get("choices") or []:
        piece = choice.get("text")
        if piece is None:
            piece = (choice.get("delta") or {}).get("content")
        text += piece or ""
    return text


def _openai_counts(events: list[dict]) -> Counts:
    """Token counts from the final `usage` chunk; finish reason from the last choice that gives one."""
    usage = next((e["usage"] for e in reversed(events) if e.get("usage")), None)
    finish = next((ch["finish_reason"] for e in reversed(events) for ch in (e.get("choices") or [])
                   if ch.get("finish_reason")), None)
    if not usage:
        return Counts(finish_reason=finish)
    return Counts(usage.get("completion_tokens"), usage.get("prompt_tokens"), _cached(usage), finish)


def stream_completion(client: httpx.Client, url: str, body: dict, timeout_s: float,
                      on_event: Callable[[dict], None] | None = None) -> Measurement:
    """POST an OpenAI-style streaming request (/v1/completions, /v1/chat/completions) and time it.

    Token counts come from the final `usage` chunk (stream_options.include_usage), never from
    events. `on_event` sees every parsed event after it is timed: engines put their own
    per-request extras there (llama.cpp's `timings`, vLLM's per-request `metrics`).
    """
    m, _ = timed_stream(client, url, body, timeout_s, framing="sse", new_text=_openai_text,
                        is_last=lambda event: False, counts=_openai_counts, on_event=on_event,
                        missing_counts="no usage in the response (the server must honour "
                                       "stream_options.include_usage)")
    return m


def get_text(client: httpx.Client, url: str, timeout_s: float = 5.0) -> str | None:
    try:
        r = client.get(url, timeout=timeout_s)
        return r.text if r.status_code == 200 else None
    except httpx.HTTPError:
        return None
