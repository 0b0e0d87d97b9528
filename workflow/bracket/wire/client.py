"""One streamed completion request, timed from the client's side.

decode rate = completion_tokens / wall time of the request, with completion_tokens from the
server's `usage`. Never count stream events: under speculative decoding one event can carry
several tokens (seed 000: a DFlash2 event carries about 3.75 tokens).
tg rate = (completion_tokens - 1) / (t_last_token - t_first_token), llama-benchy's definition.
Each token's time is that of the network read that brought its event (as llama-benchy stamps its
reads), taken as when that read's last bytes reached the socket (the kernel's receive stamp, where
the platform gives one): events that arrive together share one time, and a stream that arrives in
one read has no first -> last window, so no tg rate (its decode rate stands).

On a CPU engine the client shares the cores with the server, so while the stream runs it does per
network read only what the timing needs: one recvmsg_into a kept buffer and one time stamp
(bracket.wire.http_stream.Stream.record), and after the first token it wakes only once COALESCE_BYTES
have arrived or COALESCE_WAIT_S has passed. Arrival stamps keep the first token, the last token and
the end exact all the same (the last token shares the end's time where both come in one read: the
window is then longer by the server's gap between writing them, which engines write together). The
events are parsed from the kept bytes once the stream ends, or earlier where a marker in the bytes
asks (its end, an error event, a line growing past its limit), each timed by the read that brought
it (bracket.wire.stream_events), so every definition above reads as if each event had been parsed as it
came; bench/results/harness_accuracy.md measures what that costs per token beside llama-benchy's
client and a bare per-event socket loop.

Anything the server sends is untrusted: a value that cannot be what it claims (a token count that is
not a non-negative whole number, an event the engine's reader cannot read) makes the request an
error record that keeps the start and end of the response (raw_response, redacted), never an
exception; a token count the events cannot carry is flagged (count_check).

What a request may cost is bounded by construction, whatever its server sends. Time: request.timeout_s
from connecting to the last event parsed (the deadline shuts the socket, and the parse looks at it
between slices of events), so a request ends as an error record within about timeout_s + 1 s. Memory:
under stream_events.STREAM_MEMORY (64 MiB) per stream above what the process held before it (measured
with servers that send 1-byte events at full speed, an endless error body, an endless or 100 MB
/metrics: bench/results/hostile_servers.md): at most http_stream.KEEP_BYTES of raw bytes kept unparsed,
the last stream_events.EVENTS_KEEP events, stream_events.TEXT_LIMIT characters of text, one line of
stream_events.LINE_LIMIT; an error body is read up to ERROR_BODY_LIMIT and a GET's (`/metrics`,
`fetch_text`) up to GET_LIMIT, each within its time limit. Past a limit the record is an error that
names it; an error record keeps the first and last stream_events.TEXT_KEEP characters of its text and
RAW_KEEP bytes of its body, and says how much it left out between them.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import time
from dataclasses import dataclass
from typing import Callable

import httpx

from bracket.wire.bounded_get import GET_LIMIT, Fetched, OverLimit, fetch_text, get_bounded, get_text  # noqa: F401
from bracket.wire.deadline import Deadline, socket_of
from bracket.wire.stream_events import Events, Excerpt, as_text, clip, ends_of, size_words
from bracket.wire.transport import STREAM, TIMED

# The most of an error response's body read (its first and last bytes are kept for the record): an
# engine's error is a line of JSON; a body past this is not one.
ERROR_BODY_LIMIT = 1 << 20


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
    # The start and end of the response body, redacted, on an error record (what the server sent).
    raw_response: str | None = None
    # Why the token count cannot be what the stream carried (client.count_check); None: it can.
    count_check: str | None = None

    def fields(self) -> dict:
        return dict(self.__dict__)


def _cached(usage: dict):
    """cached_tokens as sent (checked by timed_stream, never converted here: a server may put anything there)."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        return details.get("cached_tokens")
    return None


@dataclass(frozen=True)
class Counts:
    """What the engine said about the request once it finished."""

    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None


# The markers that make the timed path parse what it has kept (bracket.wire.http_stream.Stream.record):
# the stream's end and an error event. A marker inside a token's text only costs an early parse.
# After the first token, the timed client wakes to read once COALESCE_BYTES have arrived (or COALESCE_WAIT_S
# has passed), not per event (bracket.wire.http_stream.Stream.record): at 1,000 tok/s about one wake-up per fifty
# events, the larger part of what a client that reads each event as it comes costs the engine's cores
# (bench/results/harness_accuracy.md). Times stay exact where the definitions need them (first token, last
# token, end: when their bytes reached the socket, by the kernel's stamp); events in between share their
# read's time. A caller that times every event (on_timed_event) reads each as it comes.
COALESCE_BYTES = 16384
COALESCE_WAIT_S = 0.05
_HINTS = {"sse": (b"[DONE]", b'"error"'), "ndjson": (b'"done":true', b'"done": true', b'"error"')}


def _count(value, name: str) -> int | None:
    """A token count as the server sent it: a non-negative integer, or None when it sent none."""
    if value is None:
        return None
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    shown = clip(repr(value) if not isinstance(value, str) else repr(value), 80)
    raise _Malformed(f"{name} is {shown}, not a non-negative whole number")


class _Malformed(ValueError):
    """A value in the server's response that cannot be what it claims to be (its text is redacted)."""


def count_check(
    completion_tokens: int | None, text_events: int, max_tokens_per_event: float | None = None
) -> str | None:
    """Why a token count cannot be what the stream carried, or None when it can.

    Each event with text carries at least one token; nothing is assumed of a token's bytes (a
    special token prints none, a byte token part of a character), so the impossible counts are: fewer tokens than
    text events (events duplicated, or the count cut short), and more tokens per event than the
    server can put in one (`max_tokens_per_event`: 1 + the draft budget under speculative decoding,
    where one verify step streams up to that many; None: no bound known). A flag, not an error: the
    record stays as measured, and the analysis decides.
    """
    if not completion_tokens or not text_events:
        return None
    if text_events > completion_tokens:
        return (
            f"{text_events} stream events with text for {completion_tokens} tokens claimed: each event "
            f"carries at least one token, so events were duplicated or the count is short"
        )
    if max_tokens_per_event is not None and completion_tokens > text_events * max_tokens_per_event:
        return (
            f"{completion_tokens} tokens claimed in {text_events} stream events with text "
            f"({completion_tokens / text_events:.2f} per event, at most {max_tokens_per_event:g} possible): "
            f"the count is more than the events carried"
        )
    return None


def tokens_per_event_bound(speculative: bool, draft_budget: int | None) -> int | None:
    """The most tokens one stream event can carry, for count_check: 2 x (1 + draft budget).

    One decode step streams its own token and, under speculative decoding, at most the draft budget's
    accepted ones; doubled for the events a server merges (a character whose bytes span two tokens
    streams once). None where a speculative arm's budget is not known: no bound is claimed.
    """
    if speculative and not draft_budget:
        return None
    return 2 * (1 + (draft_budget or 0))


def timed_stream(
    http: httpx.Client,
    url: str,
    body: dict,
    timeout_s: float,
    *,
    framing: str,
    new_text: Callable[[dict], str],
    is_last: Callable[[dict], bool],
    counts: Callable[[list[dict]], Counts],
    on_event: Callable[[dict], None] | None = None,
    missing_counts: str = "no token counts in the response's final event",
    stall_s: float | None = None,
    max_tokens_per_event: float | None = None,
    on_timed_event: Callable[[dict, float], None] | None = None,
) -> tuple[Measurement, list[dict]]:
    """POST `body` and time its stream; return the measurement and the last parsed events (at most
    stream_events.EVENTS_KEEP: a caller reads the final ones, with the counts, finish reason and timings).

    framing: "sse" (`data: {...}` lines ending with `data: [DONE]`) or "ndjson" (one JSON object
    per line, ending with the object for which is_last() holds). new_text(event) returns the text
    an event adds (stateful callers turn cumulative text into increments); counts(events) reads
    the engine's token counts and finish reason from the finished stream. on_event(event) sees
    each event in order, once it is timed: after the stream where the body is read by the timed
    path, so it must not take times of its own; on_timed_event(event, t) is also told the
    perf_counter time of the read that brought the event. Errors are recorded in the measurement, not
    raised: a malformed event or value, an error event, an over-long line, a token count that is
    not a non-negative whole number; an error record keeps the start and end of the response
    (raw_response, redacted).

    Timestamps use time.perf_counter; t0 is taken just before the request is sent (after httpx
    has built it, which costs a few hundred microseconds that are not the server's). Every event
    carries the time of the network read that brought it (as llama-benchy stamps its reads), taken
    as the read's last bytes reached the socket where the kernel stamps them, else as the read
    returns: the first token time is that of the read with the first event
    carrying text, the last token time that of the read with the last one, and the end the time
    of the read that brought [DONE] (ndjson: the final object). Events that arrive together (a
    burst) share one time, the time they could first be seen. The body is read by
    bracket.wire.http_stream (a socket of its own, one recv per read, the bytes kept and parsed once
    the stream ends or a marker asks) where `http` is bracket's (bracket.wire.transport.timed_client) and
    httpx routes the URL to its transport; else through httpx, with the same results at httpx's cost.

    timeout_s is the whole request's limit (request.timeout_s), from connecting to the last byte,
    the response's head included; stall_s (default: timeout_s) the longest wait for any data. A
    request over either is an error. max_tokens_per_event: see `count_check`.
    """
    if framing not in ("sse", "ndjson"):
        raise ValueError(f"framing must be 'sse' or 'ndjson', got {framing!r}")
    m = Measurement(started_at=time.time())
    ev = Events(framing == "sse", new_text, is_last, on_event, on_timed_event)
    stall = min(stall_s or timeout_s, timeout_s)
    deadline = Deadline(timeout_s)
    x = _Exchange(framing, stall, deadline, timed_each=on_timed_event is not None, t0=time.perf_counter())
    # The cyclic garbage collector waits while the stream is read (as timeit's timer does): its passes
    # over the growing list of kept events cost more per event than parsing them. Nothing is lost; it
    # runs again after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _exchange(http, url, body, m, ev, x)
    except httpx.TimeoutException:
        m.error = ev.error or f"timed out after {stall:g} s without data from the server (request.timeout_s)"
        x.end = ev.end if ev.error else time.perf_counter()
    except httpx.HTTPError as exc:
        m.error = ev.error or clip(f"{type(exc).__name__}: {exc}", 500)
        x.end = ev.end if ev.error else time.perf_counter()
    finally:
        deadline.cancel()
        if collecting:
            gc.enable()
    if x.refused:
        return m, ev.events
    _over_time(m, ev, x, timeout_s)
    _summarize(m, ev, x, counts, missing_counts, max_tokens_per_event)
    return m, ev.events


@dataclass
class _Exchange:
    """One timed request as it goes: how it reads, and what its reading found."""

    framing: str
    stall: float
    deadline: Deadline
    timed_each: bool  # the caller times every event (on_timed_event): no coalesced reads
    t0: float  # the request's start (bracket.wire.transport takes it before connecting)
    end: float | None = None  # the time of the read that ended the stream (or of the error)
    body_ended: bool = False  # the response's body was read to its end
    refused: bool = False  # answered with an error status: the measurement is complete as it is


def _exchange(http: httpx.Client, url: str, body: dict, m: Measurement, ev: Events, x: _Exchange) -> None:
    """Send the request, read its answer into `ev`, and note in `x` and `m` how it ended."""
    request = http.build_request(
        "POST", url, json=body, timeout=x.stall, extensions={"trace": x.deadline.trace, TIMED: x.deadline.watch}
    )
    # The clock runs from before connecting: a server that stalls in its head is cut too. Started
    # before t0: starting its thread takes the loaded machine up to milliseconds, not the server's.
    x.deadline.arm()
    x.t0 = time.perf_counter()
    x.deadline.begin(x.t0)
    ev.deadline = x.t0 + x.deadline.limit_s  # the parse ends there too, however much came before
    with contextlib.closing(http.send(request, stream=True)) as resp:
        stream = resp.extensions.get(STREAM)  # the timed read's (bracket.wire.transport), or httpx's path
        if stream is not None:
            x.t0 = stream.t0
        else:
            x.deadline.watch(socket_of(resp))
        if resp.status_code != 200:
            kept, stopped = _error_body(resp, stream)
            m.error = _http_error(resp.status_code, kept, stopped, x.deadline.fired, x.deadline.limit_s, x.stall)
            m.raw_response = kept.text("the body went on: read no further" if stopped else "") or None
            m.wall_s = time.perf_counter() - x.t0
            x.refused = True
            return
        if stream is not None and stream.recordable:
            _record(stream, ev, x)
        else:
            x.body_ended = _read_through(stream, resp, ev)
        x.body_ended = x.body_ended or (stream is not None and stream.complete)
        x.end = ev.end if ev.end is not None else time.perf_counter()
        if ev.error is not None:
            m.error = ev.error
        elif not ev.done:
            m.error = f"stream ended before {'[DONE]' if x.framing == 'sse' else 'the final object (done: true)'}"
        if ev.done and stream is not None:
            stream.finish()  # the body's last bytes, after the timing: keeps the connection


def _record(stream, ev: Events, x: _Exchange) -> None:
    """The timed read: the body's reads kept and stamped (Stream.record), parsed into `ev` where a marker asks
    and at the end."""

    def stop() -> bool:
        ev.feed_reads(*stream.recorded())
        return ev.over

    def started() -> bool:
        return stop() or ev.t_first is not None

    try:
        stream.record(
            stop,
            _HINTS[x.framing],
            unterminated_limit=1 << 20,
            coalesce_bytes=0 if x.timed_each else COALESCE_BYTES,  # coalesced once the first token came
            started=started,
            coalesce_wait_s=COALESCE_WAIT_S,
        )
    finally:  # what came before a failed read is parsed too: a dropped stream keeps its events
        with contextlib.suppress(httpx.HTTPError):
            stop()
        ev.finish(stream.last_read)


def _read_through(stream, resp: httpx.Response, ev: Events) -> bool:
    """A body the timed read cannot keep (not chunked, compressed) or httpx's path, parsed read by read;
    True when it was read to its end."""
    reads = stream.reads() if stream is not None else ((time.perf_counter(), b) for b in resp.iter_bytes())
    last = time.perf_counter()
    try:
        for now, data in reads:
            last = now
            ev.feed(now, data)
            if ev.over:
                return False
        return True
    finally:
        ev.finish(last)


def _over_time(m: Measurement, ev: Events, x: _Exchange, timeout_s: float) -> None:
    """The error of a request that ran past request.timeout_s, said by where it was when the limit came."""
    if ev.late and x.body_ended:
        m.error = (
            f"timed out after {timeout_s:g} s while the stream's events were read: the stream had ended, their "
            f"parsing had not (request.timeout_s limits the whole request, its parsing included)"
        )
    elif x.deadline.fired or ev.late:
        m.error = (
            f"timed out after {timeout_s:g} s without data from the server (request.timeout_s)"
            if ev.t_first is None and not ev.size
            else f"timed out after {timeout_s:g} s, still streaming (request.timeout_s limits the whole request)"
        )


def _summarize(
    m: Measurement,
    ev: Events,
    x: _Exchange,
    counts: Callable[[list[dict]], Counts],
    missing_counts: str,
    max_tokens_per_event: float | None,
) -> None:
    """The measurement from the parsed stream: times, the engine's counts (checked), rates, and an error
    record's ends of text and body."""
    m.wall_s = x.end - x.t0
    m.stream_events = ev.text_events
    m.output_text = ev.text()
    m.output_sha256 = hashlib.sha256(m.output_text.encode("utf-8", errors="replace")).hexdigest()
    t_first, t_last = ev.t_first, ev.t_last
    if t_first is not None:
        m.ttft_s = t_first - x.t0
    try:
        c = counts(ev.events) if ev.events else Counts()
        m.completion_tokens = _count(c.completion_tokens, "completion_tokens")
        m.prompt_tokens = _count(c.prompt_tokens, "prompt_tokens")
        m.cached_tokens = _count(c.cached_tokens, "cached_tokens")
        if c.finish_reason is not None and type(c.finish_reason) is not str:
            raise _Malformed(f"finish_reason is {clip(repr(c.finish_reason), 80)}, not a string")
        m.finish_reason = c.finish_reason
    except Exception as exc:  # a value no engine sends: this record is an error, the block goes on
        what = str(exc) if isinstance(exc, _Malformed) else f"{type(exc).__name__}"
        m.completion_tokens = m.prompt_tokens = m.cached_tokens = m.finish_reason = None
        if m.error is None:
            m.error = f"malformed token counts in the response: {what}"
    if m.completion_tokens is None and m.error is None:
        m.error = missing_counts
    if m.error is None:
        m.count_check = count_check(m.completion_tokens, m.stream_events, max_tokens_per_event)
    if m.completion_tokens and m.wall_s:
        m.decode_tok_s = m.completion_tokens / m.wall_s
        if t_first is not None and t_last is not None and t_last > t_first and m.completion_tokens > 1:
            m.tg_tok_s = (m.completion_tokens - 1) / (t_last - t_first)
    if m.error is not None:
        if ev.size:
            m.raw_response = ev.raw()
        m.output_text = ends_of(m.output_text)  # an error record keeps the text's ends, saying what it left out


def _error_body(resp: httpx.Response, stream) -> tuple[Excerpt, BaseException | str | None]:
    """An error response's body, read up to ERROR_BODY_LIMIT: its ends kept, and what stopped the read
    before the body's end (None: nothing did; the request's deadline shuts the socket at its limit). The
    timed read inflates a compressed body a bounded piece at a time (http_stream.INFLATE_BYTES)."""
    kept = Excerpt()
    try:
        for data in (data for _, data in stream.reads()) if stream is not None else resp.iter_bytes():
            kept.keep(data)
            if kept.size > ERROR_BODY_LIMIT:
                return kept, "limit"
    except httpx.HTTPError as exc:
        return kept, exc
    return kept, None


def _http_error(status: int, kept: Excerpt, stopped, fired: bool, timeout_s: float, stall: float) -> str:
    """An error response in words: its status and its body's start, and why the body was not read to its end."""
    said = clip(as_text(kept.head), 500)
    if stopped is None:
        return f"HTTP {status}: {said}"
    if stopped == "limit":
        why = f"an error body over {size_words(ERROR_BODY_LIMIT)}, read no further"
    elif fired:
        why = (
            f"its error body did not end within request.timeout_s ({timeout_s:g} s, {kept.size:,} bytes came), "
            f"read no further"
        )
    elif isinstance(stopped, httpx.TimeoutException):
        why = f"its error body stalled ({stall:g} s without data after {kept.size:,} bytes)"
    else:
        why = f"its error body was cut after {kept.size:,} bytes ({type(stopped).__name__}: {stopped})"
    return clip(f"HTTP {status}: {why}; it began: {said[:300]}", 700)


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
    finish = next(
        (
            ch["finish_reason"]
            for e in reversed(events)
            for ch in (e.get("choices") or [])
            if isinstance(ch, dict) and ch.get("finish_reason")
        ),
        None,
    )
    if not isinstance(usage, dict):
        return Counts(finish_reason=finish)
    return Counts(usage.get("completion_tokens"), usage.get("prompt_tokens"), _cached(usage), finish)


def stream_completion(
    client: httpx.Client,
    url: str,
    body: dict,
    timeout_s: float,
    on_event: Callable[[dict], None] | None = None,
    max_tokens_per_event: float | None = None,
) -> Measurement:
    """POST an OpenAI-style streaming request (/v1/completions, /v1/chat/completions) and time it.

    Token counts come from the final `usage` chunk (stream_options.include_usage), never from
    events. `on_event` sees every parsed event after it is timed: engines put their own
    per-request extras there (llama.cpp's `timings`, vLLM's per-request `metrics`), after the stream.
    max_tokens_per_event: the most tokens the server can stream in one event (count_check).
    """
    m, _ = timed_stream(
        client,
        url,
        body,
        timeout_s,
        framing="sse",
        new_text=_openai_text,
        is_last=lambda event: False,
        counts=_openai_counts,
        on_event=on_event,
        max_tokens_per_event=max_tokens_per_event,
        missing_counts="no usage in the response (the server must honour stream_options.include_usage)",
    )
    return m
