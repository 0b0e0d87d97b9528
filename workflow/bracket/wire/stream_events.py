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

What one stream may cost is bounded by construction, whatever the server sends: the last EVENTS_KEEP
events are kept (at most EVENTS_KEEP_BYTES of their lines; every caller reads the final ones: usage,
finish reason, timings), the text is kept up to TEXT_LIMIT characters, at most MAX_EVENTS events are
parsed, and a deadline (the request's) is looked at between slices of PARSE_SLICE events, so a request
ends in time however much its server sent before the deadline. Past a limit the parse ends with `error`
set, naming the limit. With the client's own kept bytes (bracket.wire.client's docstring) a stream
stays under STREAM_MEMORY.
"""

from __future__ import annotations

import json
import time
from typing import Callable

import orjson

from bracket.secrets import redact

_EOL = b"\r\n"
# The longest stream line read (one event): a server that never ends a line is cut here, not when the
# host runs out of memory. Legitimate lines are far shorter (a vLLM event with prompt_token_ids of a
# 128k-token prompt is about 1 MB); one line parsed can take several times its bytes (a list of numbers:
# 36 bytes per 5-byte number), which STREAM_MEMORY allows for.
LINE_LIMIT = 4 << 20
# What an error record keeps of the response body: its first and last RAW_KEEP bytes; of its text, the
# first and last TEXT_KEEP characters.
RAW_KEEP = 2048
TEXT_KEEP = 2048
# A text is redacted with this many characters beyond where it is cut, so that a secret's form the cut
# runs through (its \uXXXX-escaped form is six characters per character) is seen whole and masked.
SECRET_MARGIN = 4096
# The events kept for the caller (`Events.events`): the last EVENTS_KEEP, and of those only as many as
# have EVENTS_KEEP_BYTES of lines between them (at least the last one).
EVENTS_KEEP = 1024
EVENTS_KEEP_BYTES = 4 << 20
# The most events one response may stream: one per token at least, and no request of bracket's asks
# for a million tokens.
MAX_EVENTS = 1 << 20
# The most text one response may carry (characters; up to 4 bytes each in memory): about a million tokens.
TEXT_LIMIT = 4 << 20
# Events parsed between two looks at the deadline and the limits.
PARSE_SLICE = 4096
# What one stream costs the client at most, whatever its server sends (measured:
# bench/results/hostile_servers.md): kept bytes (the client's), one slice of events being parsed,
# the events and text kept, and one line at LINE_LIMIT.
STREAM_MEMORY = 64 << 20


def clip(text: str, n: int) -> str:
    """Server text for a record: secrets redacted before it is cut, so no part of one survives the cut."""
    return redact(text)[:n]


def as_text(payload: bytes) -> str:
    return bytes(payload).decode("utf-8", errors="replace")


def size_words(n: int) -> str:
    """A byte limit in words: whole mebibytes as such, else bytes."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n:,} bytes"


def ends_of(text: str, keep: int = TEXT_KEEP) -> str:
    """`text` as a record keeps it: whole up to 2 * keep characters, else its first and last `keep`
    (redacted before they are cut) and how many were left out between them."""
    if len(text) <= 2 * keep:
        return text
    head = redact(text[: keep + SECRET_MARGIN])[:keep]
    tail = redact(text[-(keep + SECRET_MARGIN) :])[-keep:]
    return f"{head}\n... ({len(text) - 2 * keep} characters left out) ...\n{tail}"


class Excerpt:
    """A body's first and last RAW_KEEP bytes (and SECRET_MARGIN more, for the redaction) and its size,
    kept as it passes by."""

    KEEP = RAW_KEEP + SECRET_MARGIN

    def __init__(self):
        self.head = b""
        self.last = b""
        self.size = 0

    def keep(self, body: bytes) -> None:
        n = self.KEEP
        self.size += len(body)
        if len(self.head) < n:
            self.head += bytes(body[: n - len(self.head)])
        self.last = bytes((self.last + body)[-n:] if len(body) < n else body[-n:])

    def text(self, unread: str = "") -> str:
        """The body as the server sent it, bounded (first and last RAW_KEEP bytes, each redacted before it is
        cut) and redacted; `unread` says what came after the kept end, if the body was not read to its end."""
        more = f"\n... ({unread})" if unread else ""
        if self.size <= 2 * RAW_KEEP:  # all of it is in `head`
            return redact(as_text(self.head) + more)
        head = redact(as_text(self.head))[:RAW_KEEP]
        last = redact(as_text(self.last))[-RAW_KEEP:]
        return f"{head}\n... ({self.size - 2 * RAW_KEEP} bytes left out) ...\n{last}{redact(more)}"


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
    seen; `error` on the first thing that cannot be read, or a limit passed; `end` the time of the read
    that ended either. `deadline` (time.perf_counter; None: none) is the request's: past it the parse
    ends with `late` set. `events` holds the last ones (EVENTS_KEEP), `n_events` counts them all, `parts`
    the text, `excerpt` the body's ends.
    """

    def __init__(
        self,
        sse: bool,
        new_text: Callable[[dict], str],
        is_last: Callable[[dict], bool],
        on_event: Callable[[dict], None] | None = None,
        on_timed_event: Callable[[dict, float], None] | None = None,
        deadline: float | None = None,
    ):
        self.sse, self.new_text, self.is_last = sse, new_text, is_last
        self.on_event, self.on_timed_event = on_event, on_timed_event
        self.deadline = deadline
        self.events: list[dict] = []
        self._sizes: list[int] = []  # the line length of each kept event
        self._kept_bytes = 0
        self.n_events = 0
        self.parts: list[str] = []  # the text, one string per slice of events
        self.text_chars = 0
        self.text_events = 0  # events that carried text
        self.t_first = self.t_last = self.end = None
        self.done = False
        self.late = False
        self.error: str | None = None
        self.tail: bytes | bytearray = b""  # a line not ended yet
        self.excerpt = Excerpt()

    @property
    def over(self) -> bool:
        return self.done or self.error is not None

    @property
    def size(self) -> int:
        """The body's bytes fed so far."""
        return self.excerpt.size

    def feed(self, now: float, data: bytes) -> None:
        """The body's bytes of one read."""
        if data:
            self.feed_reads(data, [len(data)], [now])

    def feed_reads(self, body: bytes, ends: list[int], times: list[float]) -> None:
        """The body's bytes of several reads at once: read i ends at offset ends[i] and came at times[i]."""
        if self.over or not body:
            return
        self.excerpt.keep(body)
        if self._past():
            return
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
        del lines
        if payloads:
            n = len(payloads)
            for lo in range(0, n, PARSE_SLICE):
                if lo and (self.over or self._past()):
                    break
                if n <= PARSE_SLICE:
                    self._events(payloads, stamps)
                else:
                    self._events(payloads[lo : lo + PARSE_SLICE], stamps[lo : lo + PARSE_SLICE])
        if finished and not self.over:
            self.done, self.end = True, done_at

    def _events(self, payloads: list[bytes], stamps: list[float]) -> None:
        # One orjson call per event: a batch of lines parsed as one array would read two broken lines
        # (an object left open, closed on the next line) as events.
        events = self.events
        before = len(events)
        texts: list[str] = []
        add_event, add_part, new_text, loads = events.append, texts.append, self.new_text, orjson.loads
        on_event, on_timed, is_last, sse = self.on_event, self.on_timed_event, self.is_last, self.sse
        JSONDecodeError = orjson.JSONDecodeError
        try:
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
                        (
                            f"a stream event the client cannot read ({type(exc).__name__}): "
                            f"{clip(as_text(payload), 200)!r}"
                        ),
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
        finally:
            self._account(payloads, len(events) - before, texts, stamps)

    def _account(self, payloads: list[bytes], added: int, texts: list[str], stamps: list[float]) -> None:
        """After a slice of events: its text joined into one part, the kept events cut to their limits,
        and the stream's limits looked at."""
        if texts:
            joined = texts[0] if len(texts) == 1 else "".join(texts)
            self.parts.append(joined)
            self.text_chars += len(joined)
        if added:
            self.n_events += added
            sizes = list(map(len, payloads if added == len(payloads) else payloads[:added]))
            self._sizes += sizes
            self._kept_bytes += sum(sizes)
            if len(self.events) > 2 * EVENTS_KEEP or self._kept_bytes > EVENTS_KEEP_BYTES:
                self._trim()
        if self.error is not None:
            return
        now = stamps[added - 1] if added else stamps[0]
        if self.n_events > MAX_EVENTS:
            self.error, self.end = (
                f"more than {MAX_EVENTS:,} stream events in one response: no request asks for that many tokens "
                f"(the server does not end its stream; {self.text_chars:,} characters of text read)",
                now,
            )
        elif self.text_chars > TEXT_LIMIT:
            self.error, self.end = (
                f"more than {TEXT_LIMIT:,} characters of text in one response (about a million tokens, more "
                f"than any request asks for): the server does not end its stream ({self.n_events:,} events)",
                now,
            )

    def _trim(self) -> None:
        """Keep the last EVENTS_KEEP events, and of those only as many as have EVENTS_KEEP_BYTES of lines
        (at least the last one)."""
        events, sizes = self.events, self._sizes
        n = len(events)
        k = n - EVENTS_KEEP if n > EVENTS_KEEP else 0
        total = sum(sizes[k:])
        while total > EVENTS_KEEP_BYTES and k < n - 1:
            total -= sizes[k]
            k += 1
        del events[:k], sizes[:k]
        self._kept_bytes = total

    def _past(self) -> bool:
        """True (and the parse ended) once the request's deadline has passed."""
        if self.deadline is None:
            return False
        now = time.perf_counter()
        if now <= self.deadline:
            return False
        self.late = True
        self.error, self.end = (
            f"the request's deadline passed while its stream was read ({self.n_events:,} events parsed)",
            now,
        )
        return True

    def finish(self, now: float) -> None:
        """The body ended: a last line without a line end still counts."""
        if self.tail and not self.over:
            self.feed(now, b"\n")

    def text(self) -> str:
        return self.parts[0] if len(self.parts) == 1 else "".join(self.parts)

    def _check_tail(self, now: float) -> bool:
        if len(self.tail) <= LINE_LIMIT:
            return False
        self.error = (
            f"a stream line longer than {size_words(LINE_LIMIT)} without a line end: the server does "
            f"not frame its events ({clip(as_text(self.tail[: 80 + SECRET_MARGIN]), 80)!r}...)"
        )
        self.tail = b""
        self.end = now
        return True

    def raw(self) -> str:
        """The body as the server sent it, bounded (first and last RAW_KEEP bytes) and redacted."""
        return self.excerpt.text()
