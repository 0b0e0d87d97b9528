"""A response body's stream lines parsed into events, each timed by the network read that brought it.

The timed client (bracket.wire.client) reads a stream with nothing but a time stamp per read and parses it
here, in bulk: once the stream has ended, or when a marker in its bytes asks (its end, an error event,
a line past its limit). Parsing in bulk is what lets the client cost the engine's cores little: one
`splitlines` for many reads, one orjson call for many events. Every event keeps the time of the read
in which its line ended, as if it had been parsed the moment that read returned.

Anything the server sends is untrusted: a line that is not JSON, an event that is not an object, an
error event, a field the caller's reader cannot read, or a line longer than LINE_LIMIT ends the parse
with `error` set (text, secrets masked, never the exception), and the body's first and last RAW_KEEP
bytes are kept for the record.
"""

from __future__ import annotations

import json
from typing import Callable

import orjson

from bracket.secrets import redact

_EOL = b"\r\n"
# The longest stream line read (one event): a server that never ends a line is cut here, not when the
# host runs out of memory. Legitimate lines are far shorter (a vLLM event with prompt_token_ids of a
# 128k-token prompt is about 1 MB).
LINE_LIMIT = 16 << 20
# What an error record keeps of the response body: its first and last RAW_KEEP bytes.
RAW_KEEP = 2048


def clip(text: str, n: int) -> str:
    """Server text for a record: secrets redacted before it is cut, so no part of one survives the cut."""
    return redact(text)[:n]


def as_text(payload: bytes) -> str:
    return bytes(payload).decode("utf-8", errors="replace")


def _decode(payload: bytes) -> object:
    """An event orjson refused: bytes that are not UTF-8 are read with each bad byte one U+FFFD (as a
    client that decodes text first would), NaN and Infinity as Python reads them; JSONDecodeError only
    for what is not JSON."""
    return json.loads(as_text(payload))


class Events:
    """The events of one stream, fed its body in pieces, in order.

    sse: `data: {...}` lines ending with `data: [DONE]`; else ndjson, one object per line, ending with
    the object for which is_last(event) is True. new_text(event) returns the text an event adds,
    on_event(event) and on_timed_event(event, t) see each event in order. `done` once the end was
    seen; `error` on the first thing that cannot be read; `end` the time of the read that ended either.
    """

    def __init__(
        self,
        sse: bool,
        new_text: Callable[[dict], str],
        is_last: Callable[[dict], bool],
        on_event: Callable[[dict], None] | None = None,
        on_timed_event: Callable[[dict, float], None] | None = None,
    ):
        self.sse, self.new_text, self.is_last = sse, new_text, is_last
        self.on_event, self.on_timed_event = on_event, on_timed_event
        self.events: list[dict] = []
        self.parts: list[str] = []
        self.text_events = 0  # events that carried text
        self.t_first = self.t_last = self.end = None
        self.done = False
        self.error: str | None = None
        self.tail: bytes | bytearray = b""  # a line not ended yet
        self.head = b""
        self.last = b""
        self.size = 0

    @property
    def over(self) -> bool:
        return self.done or self.error is not None

    def feed(self, now: float, data: bytes) -> None:
        """The body's bytes of one read."""
        if data:
            self.feed_reads(data, [len(data)], [now])

    def feed_reads(self, body: bytes, ends: list[int], times: list[float]) -> None:
        """The body's bytes of several reads at once: read i ends at offset ends[i] and came at times[i]."""
        if self.over or not body:
            return
        self._keep_raw(body)
        base = 0
        if self.tail:
            if b"\n" not in body and b"\r" not in body:
                self.tail += body  # a line still growing: extended in place, not copied per read
                self._check_tail(times[-1])
                return
            base = len(self.tail)
            body = bytes(self.tail) + body
        lines = body.splitlines(True)
        self.tail = b""
        if lines and lines[-1][-1] not in _EOL:
            self.tail = bytearray(lines.pop())
            if self._check_tail(times[-1]):
                return
        # Each line's time: that of the read in which its last byte came.
        sse = self.sse
        payloads, stamps = [], []
        add, stamp = payloads.append, stamps.append
        r, n_reads, off = 0, len(ends), -base
        end_at = ends[0]
        finished = False
        for line in lines:
            off += len(line)
            while off > end_at and r < n_reads - 1:
                r += 1
                end_at = ends[r]
            if sse:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    finished = True
                    done_at = times[r]
                    break
            else:
                payload = line.strip()
                if not payload:
                    continue
            add(payload)
            stamp(times[r])
        if payloads:
            self._events(payloads, stamps)
        if finished and not self.over:
            self.done, self.end = True, done_at

    def _events(self, payloads: list[bytes], stamps: list[float]) -> None:
        # One orjson call per event: a batch of lines parsed as one array would read two broken lines
        # (an object left open, closed on the next line) as events.
        add_event, add_part, new_text, loads = self.events.append, self.parts.append, self.new_text, orjson.loads
        on_event, on_timed, is_last, sse = self.on_event, self.on_timed_event, self.is_last, self.sse
        JSONDecodeError = orjson.JSONDecodeError
        for payload, now in zip(payloads, stamps):
            try:
                try:
                    event = loads(payload)
                except JSONDecodeError:  # not UTF-8, or NaN: read as Python's json reads it
                    event = _decode(payload)
            except (json.JSONDecodeError, RecursionError):
                self.error, self.end = f"malformed stream event: {clip(as_text(payload), 200)!r}", now
                return
            if type(event) is not dict:
                self.error, self.end = f"unexpected stream event: {clip(as_text(payload), 200)!r}", now
                return
            if event.get("error"):
                self.error, self.end = f"server error in stream: {clip(str(event['error']), 300)}", now
                return
            add_event(event)
            try:
                text = new_text(event)
                if text and type(text) is not str:
                    raise TypeError(f"text is {type(text).__name__}, not a string")
                if on_event is not None:
                    on_event(event)
                if on_timed is not None:
                    on_timed(event, now)
                last = not sse and is_last(event) is True
            except Exception as exc:  # anything a server sends is untrusted: a malformed field ends this record
                self.error, self.end = (
                    (f"a stream event the client cannot read ({type(exc).__name__}): {clip(as_text(payload), 200)!r}"),
                    now,
                )
                return
            if text:
                self.text_events += 1
                add_part(text)
                if self.t_first is None:
                    self.t_first = now
                self.t_last = now
            if last:
                self.done, self.end = True, now
                return

    def finish(self, now: float) -> None:
        """The body ended: a last line without a line end still counts."""
        if self.tail and not self.over:
            self.feed(now, b"\n")

    def _check_tail(self, now: float) -> bool:
        if len(self.tail) <= LINE_LIMIT:
            return False
        self.error = (
            f"a stream line longer than {LINE_LIMIT >> 20} MiB without a line end: the server does "
            f"not frame its events ({clip(as_text(self.tail[:80]), 80)!r}...)"
        )
        self.tail = b""
        self.end = now
        return True

    def _keep_raw(self, body: bytes) -> None:
        self.size += len(body)
        if len(self.head) < RAW_KEEP:
            self.head += bytes(body[: RAW_KEEP - len(self.head)])
        self.last = bytes((self.last + body)[-RAW_KEEP:] if len(body) < RAW_KEEP else body[-RAW_KEEP:])

    def raw(self) -> str:
        """The body as the server sent it, bounded (first and last RAW_KEEP bytes) and redacted."""
        if self.size <= 2 * RAW_KEEP:
            return redact(as_text(self.head + self.last[len(self.last) - (self.size - len(self.head)) :]))
        return redact(
            f"{as_text(self.head)}\n... ({self.size - 2 * RAW_KEEP} bytes left out) ...\n{as_text(self.last)}"
        )
