"""The client bounded by construction (issue 40): whatever a server sends, a request ends as an error record
within request.timeout_s + 1 s, and the client's memory stays under its stated bound.

The sweep (marked integration): bench/hostile_servers.py's servers on loopback, writing as fast as the
socket takes it, and the client in a child process of its own whose peak memory (VmHWM, reset before the
request) is read against what it held before: 1-byte SSE events without end, an endless HTTP 500 body, one
that trickles, an endless and a 100 MB /metrics, and a stream that echoes the API key with every character
JSON-escaped. Then, quick and on a thread of this process, the parts: kept bytes dropped once parsed, the
events and text kept, the limits, the deadline while parsing, a body's end after [DONE], GETs' limits, and
the record's ends redacted before they are cut.
"""

import base64
import gzip
import json
import time
import tracemalloc
from urllib.parse import quote

import hostile_servers as hs
import pytest
from bracket import secrets
from bracket.engines import identify
from bracket.wire import client, http_stream, stream_events
from bracket.wire.client import _openai_text, fetch_text, stream_completion
from bracket.wire.stream_events import Events, Excerpt, ends_of
from bracket.wire.transport import TimedTransport, timed_client

from tests.support.servers import RawServer

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def sweep():
    """Each case run once, when a test first asks for it."""
    done: dict[str, dict] = {}

    def run(case: str) -> dict:
        if case not in done:
            done[case] = hs.run_case(case, TIMEOUT_S)
        return done[case]

    return run


SAYS = {
    "sse_1byte": "timed out after 2 s, still streaming (request.timeout_s limits the whole request)",
    "error_500_endless": "HTTP 500: an error body over 1 MiB, read no further; it began: internal error, and more",
    "error_500_trickle": "HTTP 500: its error body did not end within request.timeout_s (2 s, ",
    "metrics_endless": "/metrics could not be read, so the server's own timing of this request is unknown: GET "
    "/metrics sent more than 4 MiB, read no further",
    "metrics_100mb": "/metrics could not be read, so the server's own timing of this request is unknown: GET "
    "/metrics sent more than 4 MiB, read no further",
}


@pytest.mark.integration
@pytest.mark.parametrize("case", hs.CASES)
def test_a_hostile_server_ends_the_request_as_an_error_record_in_time_and_in_bounded_memory(sweep, case):
    r = sweep(case)
    assert r["kind"] == "error", r
    assert r["wall_s"] < TIMEOUT_S + 1.0, r
    assert r["growth_mb"] < hs.BOUND_MB, r  # issue 40: 2.7 GB, 1.3 GB, 1 GB
    if case in SAYS:
        assert r["error"].startswith(SAYS[case]), r["error"]
    # The record keeps the ends of what came (RAW_KEEP bytes, TEXT_KEEP characters each) and says what it left out.
    assert r["raw_response_chars"] < 2 * 2048 + 200 and r["output_text_chars"] < 2 * 2048 + 200, r
    if case in ("sse_1byte", "error_500_endless"):
        assert r["raw_bytes_left_out"] > 1_000_000, r  # the server sent megabytes before the end
    if case == "sse_1byte":
        assert r["text_chars_left_out"] > 0, r


@pytest.mark.integration
def test_the_clients_memory_does_not_grow_with_the_length_of_an_endless_stream():
    """1-byte events for 1 s and for 4 s: the server sends more the longer it goes, the client's peak stays
    where it was (the client before issue 40 grew by about 90 MB per second of such a stream)."""
    short, long = hs.run_case("sse_1byte", 1.0), hs.run_case("sse_1byte", 4.0)
    assert long["server_sent_mb"] > short["server_sent_mb"], (short, long)
    assert long["growth_mb"] < short["growth_mb"] + 16, (short["growth_mb"], long["growth_mb"])
    assert long["wall_s"] < 5.0 and long["kind"] == "error", long


@pytest.mark.integration
def test_a_json_escaped_echo_of_the_key_is_in_no_form_in_the_raw_record(sweep):
    """Every character of `Bearer KEY` written as \\uXXXX in the stream's text: the record's output_text holds
    it decoded, raw_response as sent; the line the block writes holds the key in no form."""
    r = sweep("escaped_key")
    line = r["record_line"]
    rec = json.loads(line)
    assert "Bearer ***" in rec["output_text"]  # the decoded echo is there, masked
    forms = {
        hs.KEY,
        hs.escaped(hs.KEY),
        hs.escaped(hs.KEY).upper().replace("\\U", "\\u"),
        quote(hs.KEY, safe=""),
        hs.KEY.encode().hex(),
        base64.b64encode(hs.KEY.encode()).decode().rstrip("="),
        hs.KEY[-10:],  # any part of the literal, cut at the record's ends
    }
    # in the line as written, and in each of its strings as read back (where a \\uXXXX is one backslash again)
    where = [line, *(v for v in rec.values() if isinstance(v, str))]
    assert any(hs.escaped("Bearer ") in w for w in where)  # the escaped echo is there, its key masked
    found = [f for f in forms for w in where if f in w]
    assert not found, found


# ---- the parts, quick ------------------------------------------------------------------------------
Serve = RawServer  # a server on a thread of this process: each request answered by `answer(conn)`, raw bytes


HEAD = hs.STREAM_HEAD


def text_event(i: int) -> bytes:
    return hs.chunk(hs.sse({"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None}]}))


def tail(n: int) -> bytes:
    usage = hs.sse({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}})
    return hs.chunk(usage) + hs.chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


@pytest.fixture(autouse=True)
def no_coalescing(monkeypatch):
    monkeypatch.setattr(client, "COALESCE_BYTES", 0)  # every read stamped as it comes: nothing waits on 50 ms


def test_a_long_stream_is_kept_a_few_kilobytes_at_a_time_and_reads_whole():
    """30,000 events (about 2 MB of body) kept 64 KiB at a time: the buffer never grows past its first
    1 MiB (kept whole, it would double twice), and every event, its text and its time come through."""
    n = 30_000
    body = HEAD + b"".join(text_event(i) for i in range(n)) + tail(n)
    assert len(body) > 2 << 20
    srv = Serve(lambda conn: conn.sendall(body))
    expected = "".join(f" w{i}" for i in range(n))
    try:
        with timed_client() as http:
            request = http.build_request("POST", srv.base + "/v1/completions", json={})
            ev = Events(True, _openai_text, lambda e: False)
            with http_stream.Stream(TimedTransport(), request, 5.0).open() as resp:

                def stop():
                    ev.feed_reads(*resp.recorded())
                    return ev.over

                resp.record(stop, (b"[DONE]",), keep_bytes=65536)
                assert len(resp._buf) == 1 << 20
        assert ev.done and ev.error is None
        assert ev.text() == expected and ev.text_events == n and ev.n_events == n + 1
        assert ev.events[-1]["usage"]["completion_tokens"] == n
        # and the same through the client
        with timed_client() as http:
            m = stream_completion(http, srv.base + "/v1/completions", {}, 5.0)
        assert m.error is None and m.output_text == expected and m.completion_tokens == n and m.stream_events == n
    finally:
        srv.close()


def test_the_client_drops_kept_bytes_with_its_default_lowered(monkeypatch):
    n = 5_000
    body = HEAD + b"".join(text_event(i) for i in range(n)) + tail(n)
    monkeypatch.setattr(http_stream, "KEEP_BYTES", 4096)
    srv = Serve(lambda conn: conn.sendall(body))
    try:
        with timed_client() as http:
            m = stream_completion(http, srv.base + "/v1/completions", {}, 5.0)
    finally:
        srv.close()
    assert m.error is None and m.output_text == "".join(f" w{i}" for i in range(n)) and m.completion_tokens == n


def feed_all(ev: Events, lines: list[bytes]) -> None:
    ev.feed_reads(b"".join(lines), [sum(map(len, lines))], [1.0])


def line(text: str) -> bytes:
    return b'data: {"choices":[{"text":"' + text.encode() + b'"}]}\n\n'


def test_the_events_kept_are_the_last_ones_and_every_event_is_parsed(monkeypatch):
    monkeypatch.setattr(stream_events, "EVENTS_KEEP", 8)
    monkeypatch.setattr(stream_events, "PARSE_SLICE", 10)
    ev = Events(True, _openai_text, lambda e: False)
    feed_all(ev, [line(f"{i:03d}") for i in range(100)])
    assert ev.n_events == 100 and ev.text_events == 100
    assert ev.text() == "".join(f"{i:03d}" for i in range(100))
    # slices of 10: from the second on, each ends with 8 + 10 > 2 x 8 kept, cut back to the last 8
    assert len(ev.events) == 8 and [e["choices"][0]["text"] for e in ev.events] == [f"{i:03d}" for i in range(92, 100)]


def test_the_events_kept_are_bounded_by_their_bytes(monkeypatch):
    """Each line's payload `{"choices":[{"text":"a"}]}` is 27 bytes: 100 bytes of them keep the last 3."""
    monkeypatch.setattr(stream_events, "EVENTS_KEEP_BYTES", 100)
    ev = Events(True, _openai_text, lambda e: False)
    feed_all(ev, [line("a")] * 50)
    assert len(ev.events) == 3 and ev.n_events == 50


@pytest.mark.parametrize(
    "limit, value, said",
    [
        ("MAX_EVENTS", 10, "more than 10 stream events in one response"),
        ("TEXT_LIMIT", 20, "more than 20 characters of text in one response"),
    ],
)
def test_a_stream_past_a_limit_ends_the_parse_with_an_error_naming_it(monkeypatch, limit, value, said):
    monkeypatch.setattr(stream_events, limit, value)
    monkeypatch.setattr(stream_events, "PARSE_SLICE", 4)
    ev = Events(True, _openai_text, lambda e: False)
    feed_all(ev, [line("abcd")] * 40)
    assert ev.error.startswith(said), ev.error
    # looked at every 4 events: stopped at the first slice past the limit, not at the 40th event
    assert ev.n_events <= value + 4


@pytest.mark.integration
@pytest.mark.serial
def test_the_deadline_is_looked_at_while_the_events_are_parsed(monkeypatch):
    """The whole stream arrives at once, and each event costs its reader 10 ms (400 events: 4 s): the request
    ends at its 0.5 s limit, saying the stream had ended and its parsing had not."""
    monkeypatch.setattr(stream_events, "PARSE_SLICE", 8)
    n = 400
    body = HEAD + b"".join(text_event(i) for i in range(n)) + tail(n)
    srv = Serve(lambda conn: conn.sendall(body))
    try:
        with timed_client() as http:
            t0 = time.monotonic()
            m = stream_completion(http, srv.base + "/v1/completions", {}, 0.5, on_event=lambda e: time.sleep(0.01))
            took = time.monotonic() - t0
    finally:
        srv.close()
    assert m.error == (
        "timed out after 0.5 s while the stream's events were read: the stream had ended, their parsing had not "
        "(request.timeout_s limits the whole request, its parsing included)"
    )
    assert took < 0.5 + 0.3, took


def test_a_deadline_already_passed_parses_nothing_but_keeps_the_bytes():
    ev = Events(True, _openai_text, lambda e: False, deadline=time.perf_counter() - 1)
    feed_all(ev, [line("a")] * 5)
    assert ev.late and ev.n_events == 0 and ev.size == 5 * len(line("a"))


@pytest.mark.integration
@pytest.mark.serial
def test_a_server_that_goes_on_after_done_loses_the_connection_not_the_record():
    """[DONE], then chunks without end: the record is valid and the request returns at once (before, the
    client read the body's 'end' until the deadline and recorded a timeout)."""

    def answer(conn):
        conn.sendall(HEAD + text_event(0) + hs.chunk(hs.sse({"choices": [], "usage": {"completion_tokens": 1}})))
        conn.sendall(hs.chunk(b"data: [DONE]\n\n"))
        junk = hs.chunk(b"x" * 60000)
        for _ in range(100_000):
            conn.sendall(junk)

    srv = Serve(answer)
    try:
        with timed_client() as http:
            t0 = time.monotonic()
            m = stream_completion(http, srv.base + "/v1/completions", {}, 3.0)
            took = time.monotonic() - t0
    finally:
        srv.close()
    assert m.error is None and m.output_text == " w0" and m.completion_tokens == 1
    assert took < 1.0, took


def page(body: bytes, headers: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), headers, body)


@pytest.mark.parametrize(
    "sent, want_text, problem",
    [
        (page(b"vllm:x 1\n"), "vllm:x 1\n", None),
        (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", None, None),
        (page(b"y" * 5000), None, "GET /metrics sent more than 4,096 bytes, read no further"),
        # 5,000 bytes of gzip that inflate to 5 MB: stopped at the limit, not inflated whole
        (page(gzip.compress(b"z" * 5_000_000), b"Content-Encoding: gzip\r\n"), None, "GET /metrics sent more than"),
    ],
)
def test_a_get_is_read_within_its_size_limit(sent, want_text, problem):
    srv = Serve(lambda conn: conn.sendall(sent))
    try:
        with timed_client() as http:
            got = fetch_text(http, srv.base + "/metrics", limit=4096)
    finally:
        srv.close()
    assert got.text == want_text
    assert (got.problem or "").startswith(problem or ""), got.problem
    assert (got.problem is None) == (problem is None)


@pytest.mark.integration
@pytest.mark.serial
def test_a_get_that_trickles_is_cut_at_its_time_limit():
    def answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(100):
            conn.sendall(hs.chunk(b"vllm:x 1\n"))
            time.sleep(0.05)

    srv = Serve(answer)
    try:
        with timed_client() as http:
            t0 = time.monotonic()
            got = fetch_text(http, srv.base + "/metrics", timeout_s=0.5)
            took = time.monotonic() - t0
    finally:
        srv.close()
    assert got.text is None and got.problem.startswith("GET /metrics did not end within 0.5 s"), got.problem
    assert took < 0.8, took


SECRET = "sk-cut-across-9d2e7b41aa"


@pytest.fixture
def a_secret():
    secrets.forget()
    secrets.register(SECRET)
    yield
    secrets.forget()


@pytest.mark.parametrize("at", [2040, 2048 - len(SECRET) // 2, 6000 - 2048 - 5])
def test_the_records_ends_are_redacted_before_they_are_cut(a_secret, at):
    """A key that the cut at 2,048 characters (the head's end, or the tail's start) runs through: redacted
    first, so no part of it is left at either side of the cut."""
    text = "a" * at + SECRET + "b" * (6000 - at - len(SECRET))
    for kept in (ends_of(text), Excerpt()):
        if isinstance(kept, Excerpt):
            kept.keep(text.encode())
            kept = kept.text()
        assert "left out" in kept
        assert not any(SECRET[i : i + 6] in kept for i in range(len(SECRET) - 5)), kept


@pytest.mark.integration
@pytest.mark.serial
def test_identifying_a_server_whose_metrics_never_end_reads_a_bounded_page():
    """engine.kind: auto reads /metrics while the workflow's DAG is built: an endless page ends there as no
    answer (an OpenAI-compatible server of unknown kind), in well under a second and a few MiB, where it grew
    without end before."""
    with hs.Hostile("metrics_endless") as srv, timed_client() as http:
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            found = identify.identify(http, srv.base)
        finally:
            took = time.monotonic() - t0
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    assert found.kind == "openai", found
    assert took < 2.0 and peak < 3 * client.GET_LIMIT, (took, peak / 2**20)
