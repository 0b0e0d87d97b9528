"""The client's own body reader: each network read stamped as it returns and kept, framing undone and
events parsed from the kept reads, each event timed by the read that brought it.

A scripted server on a thread of this process writes the response in pieces the test chooses; one
piece is one sendall (on loopback, one read of the client's), and a piece marked to wait is sent
only after the client has stamped a given number of reads, so it cannot share a read with what came
before. The chunked decoder is also checked alone, on every split of a body.
"""

import hashlib
import json
import socket
import threading
import time

import httpx
import pytest
from bracket import secrets
from bracket.wire import arrival, client, http_stream
from bracket.wire.client import Counts, _openai_counts, _openai_text, stream_completion, timed_stream
from bracket.wire.transport import timed_client


@pytest.fixture(autouse=True)
def one_read_per_piece(request, monkeypatch):
    """These tests pin each piece the server sends to one read of the client's: the client reads each
    event as it comes (no coalescing), except in the tests of coalescing at the end of this module."""
    if "coalescing" not in request.node.name:
        monkeypatch.setattr(client, "COALESCE_BYTES", 0)


def sse(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def text_event(text: str, finish=None) -> bytes:
    return sse(
        {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    )


def usage_event(n: int) -> bytes:
    return sse(
        {
            "id": "c",
            "choices": [],
            "usage": {
                "prompt_tokens": 2,
                "completion_tokens": n,
                "total_tokens": n + 2,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        }
    )


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


class Scripted:
    """Answers each request with the next script: a list of (bytes, wait) pieces.

    wait: send the piece only once the client has stamped that many reads of this response (it calls
    time.perf_counter once as each read returns, and not otherwise after sending its request).
    """

    def __init__(self, *scripts):
        self.scripts = list(scripts)
        self.seen = 0
        self.cond = threading.Condition()
        self.accepts = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/completions"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def tick(self) -> None:
        with self.cond:
            self.seen += 1
            self.cond.notify_all()

    def _read_request(self, conn, buf: bytes) -> bytes:
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        while len(rest) < length:
            rest += conn.recv(65536)
        return rest[length:]

    def _serve(self) -> None:
        while self.scripts:
            conn, _ = self.sock.accept()
            self.accepts += 1
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                buf = b""
                while self.scripts:
                    try:
                        buf = self._read_request(conn, buf)
                    except (OSError, StopIteration):
                        break
                    with self.cond:
                        self.seen = 0
                    for piece, wait in self.scripts.pop(0):
                        with self.cond:
                            self.cond.wait_for(lambda w=wait: self.seen >= w, timeout=5)
                        conn.sendall(piece)

    def close(self) -> None:
        self.sock.close()


def measure(srv: Scripted, http: httpx.Client | None = None, timeout_s: float = 5.0):
    own = http is None
    http = http or timed_client()
    real = http_stream.time.perf_counter

    def perf() -> float:
        t = real()
        srv.tick()
        return t

    http_stream.time.perf_counter = perf
    try:
        m, events = timed_stream(
            http,
            srv.url,
            {"prompt": "x", "stream": True},
            timeout_s,
            framing="sse",
            new_text=_openai_text,
            is_last=lambda e: False,
            counts=_openai_counts,
        )
    finally:
        http_stream.time.perf_counter = real
        if own:
            http.close()
    return m, events


def stamps(monkeypatch) -> list[float]:
    """Record every time the client takes, so a test can tell which read stamped what."""
    taken: list[float] = []
    real = http_stream.time.perf_counter

    def perf() -> float:
        t = real()
        taken.append(t)
        return t

    monkeypatch.setattr(http_stream.time, "perf_counter", perf)
    return taken


def test_several_events_in_one_read_share_its_time_and_usage_in_the_last_event_counts():
    body = (
        text_event(" a") + text_event(" b") + text_event(" c", finish="length") + usage_event(3) + b"data: [DONE]\n\n"
    )
    srv = Scripted([(HEAD + chunk(text_event(" zero")), 0), (chunk(body) + END, 1)])
    m, events = measure(srv)
    assert m.error is None
    assert m.output_text == " zero a b c" and m.stream_events == 4
    assert (m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (3, 2, 0, "length")
    assert len(events) == 5
    # The first event came alone, the other three together: first -> last is the second read's time minus
    # the first's, and the three later events add no time of their own.
    assert m.tg_tok_s == pytest.approx(2 / (m.wall_s - m.ttft_s))  # [DONE] came in the same read as the last text
    srv.close()


def test_a_stream_that_arrives_in_one_read_has_no_tg():
    """All text in one read: no first -> last window (llama-benchy drops such a run too); the decode rate stands."""
    body = text_event(" a") + text_event(" b") + usage_event(2) + b"data: [DONE]\n\n"
    srv = Scripted([(HEAD + chunk(body) + END, 0)])
    m, _ = measure(srv)
    assert m.error is None and m.stream_events == 2 and m.completion_tokens == 2
    assert m.ttft_s == m.wall_s and m.tg_tok_s is None and m.decode_tok_s == pytest.approx(2 / m.wall_s)
    srv.close()


def test_separate_reads_get_separate_times(monkeypatch):
    taken = stamps(monkeypatch)
    opened = []
    real_open = http_stream.Stream.open
    monkeypatch.setattr(http_stream.Stream, "open", lambda self: (opened.append(self.t0), real_open(self))[1])
    srv = Scripted(
        [
            (HEAD + chunk(text_event(" a")), 0),
            (chunk(text_event(" b")), 1),
            (chunk(text_event(" c") + usage_event(3)), 2),
            (chunk(b"data: [DONE]\n\n") + END, 3),
        ]
    )
    m, _ = measure(srv)
    assert m.error is None and m.output_text == " a b c"
    # 3 tokens between the first and last text read: tg = 2 / (t_c - t_a). " a" came with the response's
    # head, so its time is taken as the body's reading starts; " c" came in a read of its own, timed when
    # its bytes reached the socket (the kernel's stamp): after the read that let the server send it, and
    # no later than the client's time as that read returned.
    (t0,) = opened  # the client's t0, as its transport began the request (before connecting)
    after = taken[taken.index(t0) + 1 :]
    t_a = t0 + m.ttft_s
    t_c = t_a + 2 / m.tg_tok_s
    assert any(abs(t - t_a) < 1e-9 for t in after)
    assert any(a < t_c <= b + 1e-9 for a, b in zip(after, after[1:]))
    assert t_c > t_a
    assert m.wall_s > 2 / m.tg_tok_s + m.ttft_s  # [DONE] came in a later read than the last text
    srv.close()


def test_a_delay_between_the_two_clock_reads_does_not_move_an_arrival_early():
    """A read's kernel stamp is moved to perf_counter by the wall clock's offset. Read as perf_counter, then the
    wall clock, a delay between the two (the process preempted) runs the wall clock ahead: taken alone, that
    read's offset would put its bytes' arrival 3 ms early, or at the read before where the delay was longer (as
    a loaded run put [DONE] in the same instant as the last text). The estimate keeps the least offset the reads
    showed."""
    true = 1000.0  # wall clock = perf_counter + 1000 s
    est = arrival.clock_offset((true + 3e-7, 0.999), 1.0 + true + 3e-7, 1.0)  # the stream's start: clock_pair
    est = arrival.clock_offset(est, 1.004 + true + 2e-7, 1.004)
    assert est == (pytest.approx(true + 2e-7, abs=1e-9), 1.004)
    est = arrival.clock_offset(est, 1.008 + true + 3e-3, 1.008)  # 3 ms between the two clock reads
    assert abs(est[0] - true) < 5e-6
    stamp = 1.0075 + true  # the bytes reached the socket at perf_counter 1.0075
    anc = [(socket.SOL_SOCKET, arrival.SO_TIMESTAMPNS, arrival.TIMESPEC.pack(int(stamp), round(stamp % 1 * 1e9)))]
    assert arrival.arrival(anc, 1.008, est[0], 1.004) == pytest.approx(1.0075, abs=5e-6)
    delayed = 1.008 + true + 3e-3 - 1.008  # that read's offset alone: 3 ms early (clamped at the read before)
    assert arrival.arrival(anc, 1.008, delayed, 1.004) == pytest.approx(1.0045, abs=1e-9)
    assert arrival.arrival(anc, 1.008, delayed + 1e-2, 1.004) == 1.004
    # the wall clock slewed by NTP (100 ppm over 10 s between reads) is followed, not held at the old offset
    later = arrival.clock_offset((true, 0.0), 10.0 + true + 1e-3, 10.0)
    assert later == (pytest.approx(true + 1e-3, abs=1e-9), 10.0)


def test_the_streams_first_offset_is_the_narrowest_of_three_brackets(monkeypatch):
    """Before the request goes out the stream reads wall clock, perf_counter, wall clock three times and keeps
    the middle of the narrowest bracket: the first read then has an offset no delay of its own can move."""
    true = 1000.0
    # bracket 1 preempted after perf_counter (4 ms), bracket 2 tight (200 ns), bracket 3 preempted before it
    walls = iter([true + 1.0, true + 1.0 + 4e-3, true + 2.0, true + 2.0 + 2e-7, true + 3.0 - 3e-3, true + 3.0 + 1e-7])
    perfs = iter([1.0, 2.0 + 1e-7, 3.0])

    class Clock:
        time = staticmethod(lambda: next(walls))
        perf_counter = staticmethod(lambda: next(perfs))

    monkeypatch.setattr(arrival, "time", Clock)
    offset, when = arrival.clock_pair()
    assert offset == pytest.approx(true, abs=1e-9) and when == 2.0 + 1e-7


@pytest.mark.parametrize("cut", [3, 7, 20, 40])
def test_an_event_split_across_reads_is_one_event(cut):
    """A piece ends inside a chunk header, inside an event, or between the data line and its blank line."""
    whole = chunk(text_event(" hello")) + chunk(text_event(" world", finish="length") + usage_event(2))
    whole += chunk(b"data: [DONE]\n\n") + END
    srv = Scripted([(HEAD + whole[:cut], 0), (whole[cut:], 0)])
    m, events = measure(srv)
    assert m.error is None and m.output_text == " hello world" and m.stream_events == 2
    assert m.completion_tokens == 2 and m.finish_reason == "length" and len(events) == 3
    srv.close()


def test_crlf_and_cr_line_ends_and_a_raw_line_separator_inside_a_string():
    """SSE lines may end in CRLF or CR; U+2028 raw inside a JSON string is not a line end."""
    ev1 = b'data: {"choices":[{"index":0,"text":" a\xe2\x80\xa8b"}]}\r\n\r\n'
    ev2 = b'data: {"choices":[{"index":0,"text":" c","finish_reason":"stop"}]}\r\r'
    tail = usage_event(2).replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    srv = Scripted([(HEAD + chunk(ev1[:-3]), 0), (chunk(ev1[-3:] + ev2 + tail) + END, 0)])
    m, _ = measure(srv)
    assert m.error is None and m.output_text == " a\u2028b c" and m.finish_reason == "stop"
    srv.close()


def test_a_secret_split_across_reads_is_redacted():
    """The secret never sits whole in one read; the record's redaction sees the whole text, and an error
    message is made from the whole event, so neither keeps any part of it."""
    secret = "sk-split-across-reads-4f1c"
    secrets.register(secret)
    try:
        half = len(secret) // 2
        good = text_event(" key=" + secret[:half]) + text_event(secret[half:] + " end", finish="length")
        srv = Scripted(
            [(HEAD + chunk(good[:40]), 0), (chunk(good[40:] + usage_event(2) + b"data: [DONE]\n\n") + END, 0)]
        )
        m, _ = measure(srv)
        assert m.error is None and secret in m.output_text  # the measurement holds what the server sent
        assert secret not in json.dumps(secrets.redact_obj(m.fields()))  # the record does not
        bad = b"data: {not json " + secret.encode() + b"}\n\n"
        cut = bad.index(secret.encode()) + 5
        srv2 = Scripted([(HEAD + chunk(bad[:cut]), 0), (chunk(bad[cut:]) + END, 0)])
        m2, _ = measure(srv2)
        assert m2.error.startswith("malformed stream event:") and "***" in m2.error
        assert secret[:6] not in m2.error.replace("***", "") and secret[-6:] not in m2.error
    finally:
        secrets.forget()
    srv.close()
    srv2.close()


def test_keep_alive_one_connection_for_several_requests():
    body = text_event(" a") + usage_event(1) + b"data: [DONE]\n\n"
    srv = Scripted(*[[(HEAD + chunk(body), 0), (END, 0)] for _ in range(3)])
    with timed_client() as http:
        for _ in range(3):
            m, _ = measure(srv, http)
            assert m.error is None and m.output_text == " a"
    assert srv.accepts == 1
    srv.close()


def test_keep_alive_when_done_and_the_body_end_arrive_in_pieces():
    """[DONE] seen while its chunk's last bytes are still to come: the body's end is read after the timing
    from where the kept bytes stopped, and the connection serves the next request."""
    body = text_event(" a") + usage_event(1) + b"data: [DONE]\n\n"
    whole = HEAD + chunk(body) + END
    cut = whole.index(b"[DONE]") + 7  # after "[DONE]\n": the blank line and the chunk's CRLF still to come
    srv = Scripted(*[[(whole[:cut], 0), (whole[cut:], 1)] for _ in range(2)])
    with timed_client() as http:
        for _ in range(2):
            m, _ = measure(srv, http)
            assert m.error is None and m.output_text == " a"
    assert srv.accepts == 1
    srv.close()


def test_content_length_and_gzip_bodies():
    import gzip

    body = text_event(" a") + text_event(" b", finish="length") + usage_event(2) + b"data: [DONE]\n\n"
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    z = gzip.compress(body)
    zipped = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(z), z)
    srv = Scripted([(plain[:50], 0), (plain[50:], 0)], [(zipped, 0)])
    with timed_client() as http:
        for _ in range(2):
            m, _ = measure(srv, http)
            assert m.error is None and m.output_text == " a b" and m.completion_tokens == 2
    srv.close()


def test_an_error_status_and_a_dropped_connection():
    err = b'{"error": "bad"}'
    srv = Scripted([(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(err), err), 0)])
    m, _ = measure(srv)
    assert m.error == 'HTTP 400: {"error": "bad"}'
    srv.close()
    srv = Scripted([(HEAD + chunk(text_event(" a")), 0)])  # then the server closes mid-body
    m, _ = measure(srv)
    assert m.error.startswith("RemoteProtocolError: peer closed connection") and m.output_text == " a"
    srv.close()


# ---- the chunked decoder alone --------------------------------------------------------------------
class _Sock:
    def __init__(self, pieces):
        self.pieces = list(pieces)

    def recv(self, n):
        return self.pieces.pop(0) if self.pieces else b""

    def settimeout(self, t):
        pass

    def setsockopt(self, *a):
        pass


def _decode(pieces, rest=b""):
    s = http_stream.Stream.__new__(http_stream.Stream)
    s.sock, s._rest, s._framing, s._inflate, s._body, s.timeout_s, s.complete = (
        _Sock(pieces),
        rest,
        "chunked",
        None,
        None,
        1.0,
        False,
    )
    s._decoder = http_stream.ChunkDecoder()
    return [data for _, data in s.reads()], s.complete


def test_chunked_decoder_on_every_split_of_a_body():
    payloads = [b"data: one\n\n", b"x" * 300, b"\r\n\r\n", b"last"]
    raw = b"".join(chunk(p) for p in payloads) + b"5;ext=1\r\nhello\r\n" + END
    want = b"".join(payloads) + b"hello"
    for cut in range(len(raw) + 1):
        out, complete = _decode([raw[:cut], raw[cut:]] if cut else [raw])
        assert b"".join(out) == want and complete, cut
    out, complete = _decode([], rest=raw)  # all of it came with the head
    assert b"".join(out) == want and complete
    out, complete = _decode([raw[i : i + 1] for i in range(len(raw))])  # one byte per read
    assert b"".join(out) == want and complete


def _recorded(reads, calls=1):
    """The timed path's decoding of kept reads (Stream.recorded), asked `calls` times along the way."""
    s = http_stream.Stream("unused", httpx.Request("POST", "http://127.0.0.1:1/"), 1.0)
    s._buf = bytearray(b"".join(reads) + b"\0" * 64)  # capacity past the kept bytes, as record leaves it
    body, ends, times = b"", [], []
    cut = max(1, len(reads) // calls)
    for k in range(0, len(reads), cut):
        for r in reads[k : k + cut]:
            s._times.append(float(len(s._times)))
            s._ends.append((s._ends[-1] if s._ends else 0) + len(r))
        b, e, t = s.recorded()
        ends += [len(body) + x for x in e]
        times += t
        body += b
    return body, ends, times, s.complete


def test_kept_reads_decode_on_every_split_and_each_read_ends_where_its_bytes_end():
    payloads = [b"data: one\n\n", b"x" * 300, b"\r\n\r\n", b"last"]
    raw = b"".join(chunk(p) for p in payloads) + b"5;ext=1\r\nhello\r\n" + END
    want = b"".join(payloads) + b"hello"
    for cut in range(len(raw) + 1):
        for calls in (1, 2):
            reads = [raw[:cut], raw[cut:]] if 0 < cut < len(raw) else [raw]
            body, ends, times, complete = _recorded(reads, calls)
            assert body == want and complete and ends[-1] == len(want), (cut, calls)
            if len(reads) == 2:
                # the first read's body: what of the payloads lies before the cut, framing taken out
                first = http_stream.ChunkDecoder().feed(raw[:cut])
                assert ends[0] == len(first) and times == [0.0, 1.0], (cut, calls)
    body, ends, _, complete = _recorded([raw[i : i + 1] for i in range(len(raw))], calls=7)  # a byte per read
    assert body == want and complete and ends == sorted(ends) and len(ends) == len(raw)


@pytest.mark.parametrize("bad", [b"zz\r\nab\r\n", b"0x2\r\nab\r\n", b"2\r\nabXY", b"-2\r\nab\r\n"])
def test_chunked_decoder_refuses_a_malformed_body(bad):
    with pytest.raises(httpx.RemoteProtocolError, match="malformed chunked body"):
        _decode([bad + END])


def test_chunked_decoder_says_when_the_body_was_cut():
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        _decode([chunk(b"abc"), b"5\r\nab"])


def test_a_mock_transport_takes_httpx_path_with_the_same_result():
    body = text_event(" a") + text_event(" b", finish="length") + usage_event(2) + b"data: [DONE]\n\n"
    with httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=body))) as http:
        m = stream_completion(http, "http://x/v1/completions", {"prompt": "x"}, 5.0)
    assert m.error is None and m.output_text == " a b" and m.completion_tokens == 2
    assert m.output_sha256 == hashlib.sha256(b" a b").hexdigest()
    assert Counts is not None


# ---- coalesced reads: one wake-up per few kilobytes, each read timed by its bytes' arrival ---------------------


class Paced:
    """A server that sends the head and the first token at once, then `n` text events `gap_s` apart,
    then usage and [DONE] `end_gap_s` after the last, each piece one sendall; it notes on the shared
    perf_counter clock when it sent the last text event and the end."""

    def __init__(self, n: int, gap_s: float, end_gap_s: float):
        self.n, self.gap_s, self.end_gap_s = n, gap_s, end_gap_s
        self.sent_last = self.sent_end = None
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/completions"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            conn.sendall(HEAD + chunk(text_event(" t0")))
            for i in range(1, self.n + 1):
                time.sleep(self.gap_s)
                self.sent_last = time.perf_counter()
                conn.sendall(chunk(text_event(f" t{i}")))
            time.sleep(self.end_gap_s)
            self.sent_end = time.perf_counter()
            conn.sendall(chunk(usage_event(self.n + 1) + b"data: [DONE]\n\n") + END)
            time.sleep(0.5)

    def close(self) -> None:
        self.sock.close()


# Wall-clock bounds: out of the fast tier, alone on the machine.
@pytest.mark.integration
@pytest.mark.serial
def test_coalescing_reads_wake_seldom_and_keep_the_arrival_times(monkeypatch):
    """40 events 2 ms apart (about 5 kB in all), then usage and [DONE] 20 ms after the last. A client reading
    each event as it comes makes about 40 reads; the coalescing one (COALESCE_BYTES 4096, its wait set to
    300 ms here) wakes once the first 4 kB came and then only when its wait runs out: the end, under the
    byte threshold, is taken about 250 ms after it came. Yet its time is when its bytes reached the socket,
    within 2 ms of the server's send on the same clock."""
    monkeypatch.setattr(client, "COALESCE_WAIT_S", 0.3)
    srv = Paced(n=40, gap_s=0.002, end_gap_s=0.02)
    reads = []
    real_record = http_stream.Stream.record

    def counting(self, *a, **kw):
        try:
            return real_record(self, *a, **kw)
        finally:
            reads.append(len(self._times))

    monkeypatch.setattr(http_stream.Stream, "record", counting)
    # the client's own t0, as its transport begins the request: wall_s is measured from there (a time taken
    # before the call would add the client's setup, milliseconds on a loaded machine, to the slack below)
    t0s = []
    real_open = http_stream.Stream.open
    monkeypatch.setattr(http_stream.Stream, "open", lambda self: (t0s.append(self.t0), real_open(self))[1])
    with timed_client() as http:
        m = stream_completion(http, srv.url, {"prompt": "x", "stream": True}, 5.0)
        returned = time.perf_counter()
    srv.close()
    assert m.error is None and m.completion_tokens == 41 and m.stream_events == 41
    assert reads and reads[0] <= 5, reads
    assert returned - srv.sent_end >= 0.15  # the read that took the end came long after it
    (t0,) = t0s
    end = t0 + m.wall_s
    # the server takes sent_end as its send returns, after the bytes reached the socket: a little after the
    # arrival, or more where the loaded machine delays the server's thread between the two
    assert srv.sent_end - 0.005 <= end <= srv.sent_end + 0.002
    # The last token came under the byte threshold too, so it shares the end's read, and its time is that
    # read's last bytes' arrival: the end's. The tg window is longer by the server's gap between its last
    # token and its end (20 ms here; engines write the two together, microseconds apart).
    t_last = end - m.wall_s + m.ttft_s + 40 / m.tg_tok_s
    assert t_last == pytest.approx(end, abs=1e-6) and t_last >= srv.sent_last


# Wall-clock bounds: out of the fast tier, alone on the machine.
@pytest.mark.integration
@pytest.mark.serial
def test_coalescing_reads_keep_the_stall_limit():
    """After the first token the server goes quiet: the coalescing reader (polling, not blocking) still ends
    the request at the stall limit, with the stall's message and the first token kept."""
    srv = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1/completions"

    def serve():
        conn, _ = srv.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            conn.sendall(HEAD + chunk(text_event(" a")))
            time.sleep(2.0)

    threading.Thread(target=serve, daemon=True).start()
    with timed_client() as http:
        t = time.perf_counter()
        m, _ = timed_stream(
            http,
            url,
            {"prompt": "x", "stream": True},
            5.0,
            framing="sse",
            new_text=_openai_text,
            is_last=lambda e: False,
            counts=_openai_counts,
            stall_s=0.3,
        )
        took = time.perf_counter() - t
    srv.close()
    assert m.error == "timed out after 0.3 s without data from the server (request.timeout_s)", m.error
    assert m.output_text == " a" and m.ttft_s is not None
    assert 0.3 <= took < 1.0
