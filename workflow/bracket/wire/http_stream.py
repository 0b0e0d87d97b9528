"""A streamed response's body read straight from its socket, one network read at a time.

The timed client (bracket.wire.client) shares the machine's cores with the engine it measures, so what
it spends per token is taken from the engine on a CPU server. httpx reads a body through httpcore
and h11, which cost tens of microseconds of Python per chunk of a chunked body (one chunk per
stream event), more than the rest of the client together (bench/results/harness_accuracy.md).
This module sends the request httpx built (same method, target, headers and body bytes) over a
keep-alive socket of its own, reads the response head with h11, and then decodes the body's
framing (chunked, Content-Length or until close) itself: one `recv` per network read, stamped with
time.perf_counter the moment it returns, and the bytes of that read handed on whole.

It is used only where it sends exactly what httpx would: a plain `http://` URL, the client's own
default transport (no proxy, mount, Unix socket or test transport), no client-level auth or event
hooks. Anything else goes through httpx (`fast_path` says which). Errors are httpx's exception
types with httpx's messages, so callers handle both paths alike.

What a response may cost is bounded whatever its server sends: `record` keeps at most KEEP_BYTES of
raw bytes not yet parsed (past them it asks its caller to parse, and drops what was parsed), a
compressed body is inflated at most INFLATE_BYTES per piece, and `finish` reads a body's end for at
most FINISH_BYTES and its `wait_s`. The whole-request deadline is the caller's (it shuts the socket).
"""

from __future__ import annotations

import math
import re
import select
import socket
import struct
import sys
import time
import weakref
import zlib
from collections.abc import Callable, Iterator

import h11
import httpcore
import httpx

READ_BYTES = 65536
# The raw bytes `record` keeps before it has its caller parse them (and drops what was parsed): a stream of
# a few thousand tokens stays below it and is parsed once, after its end.
KEEP_BYTES = 4 << 20
# The most a compressed body's piece may inflate to at once (a small piece can inflate a thousandfold).
INFLATE_BYTES = 1 << 20
# After a stream's end marker, the most of its body's end `finish` reads before it gives the connection up.
FINISH_BYTES = 65536
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}").fullmatch  # a chunk size, without extensions
# The encodings this reader can undo; a request that asks for more (httpx adds br and zstd when
# their packages are installed) is narrowed to these, which every HTTP server may answer with.
ACCEPT_ENCODING = b"gzip, deflate"

# Idle keep-alive sockets per httpx.Client, by (host, port): a client's requests reuse one
# connection, as they would through httpx's pool. Dropped with the client.
_idle: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fast_path(http: httpx.Client, request: httpx.Request) -> bool:
    """True when this module sends `request` exactly as `http` would (see the module's docstring)."""
    if request.url.scheme != "http" or http.is_closed:
        return False
    if http.auth is not None or any(http.event_hooks.values()):
        return False
    transport = http._transport_for_url(request.url)  # httpx is pinned (0.28.1): its mounts and proxies
    if transport is not http._transport or type(transport) is not httpx.HTTPTransport:
        return False
    pool = getattr(transport, "_pool", None)
    return type(pool) is httpcore.ConnectionPool and getattr(pool, "_uds", None) is None


def _readable(sock: socket.socket) -> bool:
    """An idle connection with something to read was closed by the server (or holds junk): not reusable."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class Stream:
    """One request's response: status, headers, and its body as (perf_counter stamp, bytes) per read.

    Use as a context manager; the socket goes back to the client's idle set only if the body was
    read to its end and the server allows keep-alive, else it is closed.
    """

    def __init__(
        self,
        http: httpx.Client,
        request: httpx.Request,
        timeout_s: float,
        on_socket: Callable[[socket.socket], None] | None = None,
    ):
        # on_socket: told each socket as soon as it is connected (or taken from the idle set), before
        # anything is sent: the caller's whole-request deadline shuts it, the response's head included.
        self.http, self.request, self.timeout_s, self.on_socket = http, request, timeout_s, on_socket
        url = request.url
        self.key = (url.host, url.port or 80)
        self.sock: socket.socket | None = None
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self._rest = b""
        self._reusable = False
        self._framing = "close"
        self._length = 0
        self._inflate = None
        self._body: Iterator[tuple[float, bytes]] | None = None
        self.complete = False  # the body ended where its framing says it ends
        self._decoder = ChunkDecoder()
        # What `record` kept: the raw bytes, and per read its time and where it ends; `_done` reads decoded.
        self._buf = bytearray()
        self._times: list[float] = []
        self._ends: list[int] = []
        self._done = 0
        self._rpos, self._cleft, self._ccrlf = 0, 0, False  # where `recorded` goes on decoding
        # the wall clock's offset from perf_counter, read before the request is sent (clock_pair) and then
        # bounded by every stamped read (clock_offset): the kernel's arrival stamps are wall-clock times
        self._offset: tuple[float, float] = clock_pair()

    # ---- connecting and sending ---------------------------------------------------------------
    def _connect(self) -> tuple[socket.socket, bool]:
        idle = _idle.get(self.http, {}).pop(self.key, None)
        if idle is not None:
            if not _readable(idle):
                return idle, True
            idle.close()
        try:
            sock = socket.create_connection(self.key, timeout=self.timeout_s)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as httpcore sets it
        return sock, False

    def _head_bytes(self, conn: h11.Connection) -> bytes:
        r = self.request
        headers = [(k, ACCEPT_ENCODING if k.lower() == b"accept-encoding" else v) for k, v in r.headers.raw]
        target = r.url.raw_path
        return (
            conn.send(h11.Request(method=r.method.encode(), target=target, headers=headers))
            + conn.send(h11.Data(data=r.content))
            + conn.send(h11.EndOfMessage())
        )

    def open(self) -> Stream:
        """Send the request and read the response head (status and headers)."""
        self.request.read()
        for attempt in (0, 1):
            sock, reused = self._connect()
            self.sock = sock
            if self.on_socket is not None:
                self.on_socket(sock)
            conn = h11.Connection(h11.CLIENT)
            try:
                sock.settimeout(self.timeout_s)
                sock.sendall(self._head_bytes(conn))
                response = self._read_head(conn)
            except _StaleConnection:
                sock.close()
                if reused and attempt == 0:
                    continue  # the server closed the idle connection as we sent: once more, fresh
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.") from None
            except BaseException:
                sock.close()
                raise
            break
        self.status = response.status_code
        self.headers = {k.lower(): v for k, v in response.headers}
        self._rest, _ = conn.trailing_data
        self._conn = conn
        keep = response.http_version == b"1.1" and b"close" not in self.headers.get(b"connection", b"").lower()
        self._reusable = keep
        if b"chunked" in self.headers.get(b"transfer-encoding", b"").lower():
            self._framing = "chunked"
        elif b"content-length" in self.headers:
            self._framing, self._length = "length", int(self.headers[b"content-length"])
        else:
            self._framing, self._reusable = "close", False
        encoding = self.headers.get(b"content-encoding", b"identity").lower().strip()
        if encoding in (b"gzip", b"x-gzip"):
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == b"deflate":
            self._inflate = zlib.decompressobj()
        elif encoding not in (b"identity", b""):
            raise httpx.DecodingError(f"unsupported Content-Encoding {encoding.decode(errors='replace')!r}")
        return self

    def _read_head(self, conn: h11.Connection) -> h11.Response:
        got = False
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is h11.NEED_DATA:
                data = self._recv()
                if not data and not got:
                    raise _StaleConnection
                got = True
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                return event
            elif isinstance(event, h11.ConnectionClosed):
                raise _StaleConnection

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(READ_BYTES)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from exc

    # ---- the body -----------------------------------------------------------------------------
    def reads(self) -> Iterator[tuple[float, bytes]]:
        """The body's bytes (framing and Content-Encoding undone), one item per network read.

        Each item is stamped when its read returned; bytes already received with the head come
        first, stamped when the head was read. One iterator per response: reading it again goes on
        where the last reader stopped.
        """
        if self._body is None:
            body = {"chunked": self._chunked, "length": self._fixed, "close": self._until_close}[self._framing]()
            self._body = body if self._inflate is None else self._inflated(body)
        return self._body

    def _inflated(self, body: Iterator[tuple[float, bytes]]) -> Iterator[tuple[float, bytes]]:
        inflate = self._inflate
        for now, data in body:
            while data:
                out = inflate.decompress(data, INFLATE_BYTES)
                data = inflate.unconsumed_tail
                if out:
                    yield now, out

    def _blocking(self) -> None:
        """Reads without Python's timeout machinery (a poll() before every recv()): the socket
        blocks, and the kernel ends a read that waits longer than the stall limit (SO_RCVTIMEO)."""
        sec = max(self.timeout_s, 0.001)
        self.sock.settimeout(None)
        self.sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(sec), int((sec - int(sec)) * 1e6))
        )

    def _recv_body(self) -> bytes:
        try:
            return self.sock.recv(READ_BYTES)
        except OSError as exc:
            raise _read_error(exc) from exc

    def _raw(self) -> Iterator[tuple[float, bytes]]:
        perf = time.perf_counter
        if self._rest:
            yield perf(), self._rest
        self._blocking()
        recv = self._recv_body
        while True:
            data = recv()
            if not data:
                return
            yield perf(), data

    def _until_close(self) -> Iterator[tuple[float, bytes]]:
        yield from self._raw()
        self.complete = True

    def _fixed(self) -> Iterator[tuple[float, bytes]]:
        left = self._length
        if left == 0:
            self.complete = True
            return
        for now, data in self._raw():
            if len(data) >= left:
                yield now, data[:left]
                self.complete = True
                return
            left -= len(data)
            yield now, data
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body "
            f"(received {self._length - left} bytes, expected {self._length})"
        )

    def _chunked(self) -> Iterator[tuple[float, bytes]]:
        """Chunked transfer coding undone per read (ChunkDecoder); a chunk split over reads is passed on as it comes."""
        feed = self._decoder.feed
        for now, data in self._raw():
            out = feed(data)
            if out:
                yield now, out
            if self._decoder.complete:
                self.complete = True
                return
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body (incomplete chunked read)"
        )

    # ---- the timed path -----------------------------------------------------------------------
    @property
    def recordable(self) -> bool:
        """True when `record` can read this body: chunked, no Content-Encoding (every engine's stream)."""
        return self._framing == "chunked" and self._inflate is None and self._body is None

    def record(
        self,
        stop: Callable[[], bool],
        hints: tuple[bytes, ...] = (),
        unterminated_limit: int = 1 << 20,
        coalesce_bytes: int = 0,
        started: Callable[[], bool] | None = None,
        coalesce_wait_s: float = 0.05,
        keep_bytes: int | None = None,
    ) -> None:
        """Read the body as it comes, keeping its raw bytes and the time of each read, and parse nothing.

        The timed client's hot loop: per network read one recvmsg_into a preallocated buffer, one
        time stamp, two list appends and a few searches of the new bytes in C. `stop()` (the
        caller's parser, fed by `recorded()`) is asked only when a read holds one of `hints` (the
        caller's end or error markers), ends the chunked body, or when more than
        `unterminated_limit` bytes came without a chunk that ends a line (an endless line); it
        returns True to stop reading. The read that made it True is the last one recorded.
        Errors (the stall limit, a dropped connection) are raised as httpx's, with what came kept.

        A read's time is when its last bytes reached the socket, as the kernel stamped them
        (SO_TIMESTAMPNS; `arrival`), not when this process woke up to read them: the client's own
        scheduling delay stays out of every time. With coalesce_bytes > 0 (and kernel stamps), once
        `started()` is True (the caller has seen its first token; at once without `started`) the
        process sleeps until coalesce_bytes have arrived (SO_RCVLOWAT, one poll) or coalesce_wait_s
        has passed, then takes whatever is there: a wake-up per few kilobytes instead of one per
        event, which is most of what reading costs the engine's cores. The kernel acknowledges the
        bytes as they come either way, so the server sees no difference. A read's time is still its
        last bytes' arrival, so the stream's end, and its last token where that came with the end,
        keep their exact times; only the events in between share the time of the read that took them.

        Once more than `keep_bytes` (default KEEP_BYTES) are kept, `stop()` is asked too (the caller parses them through
        `recorded`), and the bytes it was handed are dropped: a long or endless body is kept
        `keep_bytes` at a time, never whole.
        """
        perf = time.perf_counter
        keep_bytes = KEEP_BYTES if keep_bytes is None else keep_bytes
        stamped = _stamp_arrivals(self.sock)
        times, ends = self._times, self._ends
        size = 1 << 20
        buf = bytearray(size)
        view = memoryview(buf)
        pos = 0
        rest, self._rest = self._rest, b""
        if rest:
            if len(rest) + READ_BYTES > size:
                size = len(rest) + READ_BYTES
                view.release()
                buf = bytearray(size)
                view = memoryview(buf)
            buf[: len(rest)] = rest
            pos = len(rest)
            times.append(perf())
            ends.append(pos)
        self._buf = buf
        find, endswith = buf.find, buf.endswith
        run = pos  # bytes since the last chunk that ended a line
        if rest and (any(find(h) >= 0 for h in hints) or endswith(b"0\r\n\r\n", 0, pos)) and (stop() or self.complete):
            return
        self._blocking()
        sock = self.sock
        recv_into, recvmsg_into, wall = sock.recv_into, sock.recvmsg_into, time.time
        coalesce = coalesce_bytes > 0 and stamped
        waiting = coalesce and started is not None  # reading each event as it comes until the first token
        poll = None
        wait_ms, stall = max(1, round(coalesce_wait_s * 1000)), self.timeout_s
        last_data = 0.0  # when data last came, for the stall limit while coalescing (the kernel's, else)
        offset = self._offset  # the wall clock's offset from perf_counter, as the reads so far bound it
        try:
            while True:
                if coalesce and not waiting and poll is None:
                    poll = self._coalesce(coalesce_bytes)
                    coalesce = poll is not None  # a socket that refuses SO_RCVLOWAT is read per event
                    last_data = times[-1] if times else perf()
                if size - pos < READ_BYTES:
                    size *= 2
                    view.release()
                    buf = bytearray(size)
                    buf[:pos] = self._buf[:pos]
                    self._buf = buf
                    view = memoryview(buf)
                    find, endswith = buf.find, buf.endswith
                try:
                    if poll is not None:
                        poll(wait_ms)  # until coalesce_bytes came, the connection ended, or wait_ms
                        try:
                            n, anc, _, _ = recvmsg_into([view[pos : pos + READ_BYTES]], _ANC_SPACE, _DONTWAIT)
                        except BlockingIOError:  # nothing came in wait_ms
                            if perf() - last_data > stall:
                                raise httpx.ReadTimeout("timed out") from None
                            continue
                        now = perf()
                        if anc:
                            offset = clock_offset(offset, wall(), now)
                            now = arrival(anc, now, offset[0], times[-1] if times else 0.0)
                        last_data = now
                    elif stamped:
                        n, anc, _, _ = recvmsg_into([view[pos : pos + READ_BYTES]], _ANC_SPACE)
                        now = perf()
                        if anc:
                            offset = clock_offset(offset, wall(), now)
                            now = arrival(anc, now, offset[0], times[-1] if times else 0.0)
                    else:
                        n = recv_into(view[pos : pos + READ_BYTES])
                        now = perf()
                except OSError as exc:
                    raise _read_error(exc) from exc
                if not n:
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body (incomplete chunked read)"
                    )
                start = pos
                pos += n
                times.append(now)
                ends.append(pos)
                if endswith(b"\n\r\n", 0, pos):
                    run = 0
                    if endswith(b"0\r\n\r\n", 0, pos) and (stop() or self.complete):
                        return
                else:
                    run += n
                    if run > unterminated_limit:
                        run = 0
                        if stop() or self.complete:
                            return
                lo = start - 16 if start > 16 else 0  # a marker split over two reads is found too
                for h in hints:
                    if find(h, lo, pos) >= 0 and (stop() or self.complete):
                        return
                if waiting and started():
                    waiting = False
                if pos > keep_bytes:
                    if stop() or self.complete:
                        return
                    pos = self._drop_handed_out()
        finally:
            self._offset = offset
            if poll is not None:
                self._coalesce(0)

    def _drop_handed_out(self) -> int:
        """Drop the kept bytes that `recorded` has handed out (all but a chunk's framing not yet read
        through), moving the rest to the buffer's start; returns where the next read goes. The last read's
        time and end stay, as the floor of the next read's arrival and the start of the next `recorded`."""
        ends, times, buf = self._ends, self._times, self._buf
        n = len(ends)
        if self._done < n or not n:  # the caller did not read what was kept: nothing can go
            return ends[-1] if n else 0
        shift, pos = self._rpos, ends[-1]
        left = pos - shift
        buf[:left] = buf[shift:pos]  # same length: the buffer is not resized under its view
        del ends[: n - 1], times[: n - 1]
        ends[0] = left
        self._done, self._rpos = 1, 0
        return left

    def _coalesce(self, nbytes: int):
        """Wake reads of this socket only once `nbytes` came (SO_RCVLOWAT; 0: every byte again, as a
        reused connection must be); returns the poll to wait with, or None."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(nbytes, 1))
        except OSError:
            return None
        if not nbytes:
            return None
        p = select.poll()
        p.register(self.sock, select.POLLIN)
        return p.poll

    @property
    def last_read(self) -> float:
        """The time of the last recorded read (now, when none was)."""
        return self._times[-1] if self._times else time.perf_counter()

    def recorded(self) -> tuple[bytes, list[int], list[float]]:
        """The recorded reads not handed out before, framing undone, in one piece.

        Returns (body, ends, times): the body bytes those reads carried, the offset in `body` at
        which read i ends, and the time read i returned. One pass over the kept bytes: per chunk a
        search for its size line and a slice, however the chunks fall into reads. Sets `complete`
        once the body's last chunk was seen; raises RemoteProtocolError on a malformed chunked body.
        """
        first, ends = self._done, self._ends
        if first >= len(ends):
            return b"", [], []
        raw_end = ends[-1]
        buf = self._buf
        view = memoryview(buf)
        find = buf.find
        pieces = []
        body_ends = []
        pos, left, crlf = self._rpos, self._cleft, self._ccrlf
        size_out = 0  # body bytes so far
        r = first
        n_reads = len(ends)
        try:
            while pos < raw_end and not self.complete:
                if left:  # the rest of a chunk's data
                    b = pos + left if pos + left <= raw_end else raw_end
                    while r < n_reads and ends[r] <= b:
                        body_ends.append(size_out + (ends[r] - pos if ends[r] > pos else 0))
                        r += 1
                    pieces.append(view[pos:b])
                    size_out += b - pos
                    left -= b - pos
                    pos = b
                    if left:
                        break
                    crlf = True
                if crlf:
                    if raw_end - pos < 2:
                        break
                    if buf[pos : pos + 2] != b"\r\n":
                        raise httpx.RemoteProtocolError("malformed chunked body: no CRLF after a chunk")
                    pos += 2
                    crlf = False
                    continue
                i = find(b"\r\n", pos, raw_end)
                if i < 0:
                    if raw_end - pos > 1024:
                        raise httpx.RemoteProtocolError("malformed chunked body: chunk header too long")
                    break
                if _HEX(buf, pos, i):
                    size = int(buf[pos:i], 16)
                else:  # a chunk extension (`;name=value`), or not a size at all
                    head = bytes(buf[pos:i]).split(b";", 1)[0].strip()
                    if not _HEX(head):
                        raise httpx.RemoteProtocolError(
                            f"malformed chunked body: bad chunk size {bytes(buf[pos:i])[:40]!r}"
                        )
                    size = int(head, 16)
                if size == 0:
                    # The last chunk; trailers (if any) end with an empty line.
                    if buf.startswith(b"\r\n", i + 2, raw_end) or find(b"\r\n\r\n", i, raw_end) >= 0:
                        self.complete = True
                    break
                a = i + 2
                b = a + size
                if b + 2 <= raw_end and buf.startswith(b"\r\n", b, b + 2):  # the whole chunk is here
                    while r < n_reads and ends[r] <= b + 2:
                        e = ends[r] - a
                        body_ends.append(size_out + (e if 0 < e < size else 0 if e <= 0 else size))
                        r += 1
                    pieces.append(view[a:b])
                    size_out += size
                    pos = b + 2
                    continue
                pos = a
                left = size
        finally:
            view.release()
        while r < n_reads:  # reads that ended in framing, or after the body's end
            body_ends.append(size_out)
            r += 1
        self._rpos, self._cleft, self._ccrlf = pos, left, crlf
        self._done = n_reads
        body = b"".join(pieces) if len(pieces) != 1 else bytes(pieces[0])
        return body, body_ends, self._times[first:]

    def finish(self, wait_s: float = 0.5) -> None:
        """After the stream's last event: read the body's end (a few bytes, already on their way) so
        the connection can be reused; a server that does not end it within `wait_s`, or sends more
        than FINISH_BYTES after it, loses it."""
        if self.complete or not self._reusable or self.sock is None:
            return
        try:
            if self._ends and self._body is None:  # read by `record`: the chunk decoder goes on where it stopped
                self.recorded()
                if self.complete:
                    return
                d = self._decoder
                d._buf, d._left, d._crlf = bytes(self._buf[self._rpos : self._ends[-1]]), self._cleft, self._ccrlf
            self.timeout_s = wait_s
            if self._body is not None:
                self._blocking()
            until, left = time.perf_counter() + wait_s, FINISH_BYTES
            for now, data in self.reads():
                left -= len(data)
                if (left < 0 or now > until) and not self.complete:
                    return
        except (httpx.HTTPError, OSError):
            self.complete = False

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is None:
            return
        if self.complete and self._reusable and not self.http.is_closed:
            _idle.setdefault(self.http, {})[self.key] = sock
        else:
            sock.close()


# Kernel receive time stamps (Linux): each recvmsg carries the time its last bytes reached the socket.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_ANC_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TS = struct.Struct("qq")
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def _stamp_arrivals(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what this socket receives; False where it cannot (no recvmsg, not Linux)."""
    if _SO_TIMESTAMPNS is None or not _ANC_SPACE or not hasattr(sock, "recvmsg_into"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


# How fast the estimate of the wall clock's offset from perf_counter may rise (clock_offset): NTP slews the
# wall clock by at most 500 ppm; a faster rise is the client's own delay between its two clock reads.
OFFSET_SLEW = 5e-4
OFFSET_SLACK_S = 1e-6  # and the two reads' own jitter


def clock_pair(tries: int = 3) -> tuple[float, float]:
    """(offset, when): the wall clock's offset from perf_counter, read as wall clock, perf_counter, wall clock
    and taken at the middle of the narrowest of `tries` such brackets (a preempted one is wide), and the
    perf_counter time it was read at. The start of a stream's estimate (clock_offset), read before the request
    is sent: a read's own sample has only the wall clock after it, and the first read has no other."""
    best = (math.inf, 0.0, 0.0)
    for _ in range(tries):
        w1 = time.time()
        now = time.perf_counter()
        w2 = time.time()
        if w2 - w1 < best[0]:
            best = (w2 - w1, (w1 + w2) / 2 - now, now)
    return best[1], best[2]


def clock_offset(previous: tuple[float, float], wall_now: float, now: float) -> tuple[float, float]:
    """(offset, now): the wall clock's offset from perf_counter, from the two clocks read as a read returned
    (perf_counter first, then the wall clock) and the estimate before (clock_pair's, then each read's), with
    when it was made.

    The process can be preempted between its two clock reads; the wall clock, read second, then runs ahead by
    the delay, and a kernel stamp moved by that offset places an arrival too early (on a loaded machine, a
    stream's last read a whole read early). A delay only ever adds to `wall_now - now`, so the estimate is the
    least of it over the reads, allowed to rise as fast as the wall clock can be slewed.
    """
    sample = wall_now - now
    offset, then = previous
    ceiling = offset + OFFSET_SLEW * max(0.0, now - then) + OFFSET_SLACK_S
    return (sample if sample < ceiling else ceiling), now


def arrival(ancillary: list, now: float, offset: float, floor: float) -> float:
    """A read's time on the perf_counter clock: when its last bytes reached the socket.

    The kernel stamps arrivals on the wall clock (CLOCK_REALTIME); `offset` is the wall clock's offset from
    perf_counter (clock_offset), so the stamp moves to perf_counter by it (a clock step between arrival and
    read, microseconds apart, is all that can enter). The result is kept between `floor` (the previous read's
    time) and `now`: an arrival cannot be later than the read that took it, nor earlier than the read before.
    Without a stamp: `now`.
    """
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, ns = _TS.unpack_from(data)
            t = sec + ns * 1e-9 - offset
            return now if t > now else floor if t < floor else t
    return now


def _read_error(exc: OSError) -> httpx.HTTPError:
    """A failed body read as httpx says it: the stall limit (SO_RCVTIMEO ends a blocking read with
    EAGAIN) or a broken connection."""
    if isinstance(exc, (BlockingIOError, TimeoutError)):
        return httpx.ReadTimeout("timed out")
    return httpx.ReadError(str(exc))


class ChunkDecoder:
    """Chunked transfer coding undone incrementally: `feed` raw bytes as they come, get the body bytes they end.

    `complete` once the last (zero-size) chunk and its trailers were seen. A malformed body raises
    httpx.RemoteProtocolError naming what was wrong.
    """

    def __init__(self):
        self.complete = False
        self._buf = b""
        self._left = 0  # bytes of the current chunk's data still to come
        self._crlf = False  # the CRLF after a chunk's data is still to come

    def feed(self, data: bytes) -> bytes:
        if self.complete:
            return b""
        buf = self._buf + data if self._buf else data
        if not self._left and not self._crlf:
            # The common case: the input is exactly one whole chunk (a server's write of one event).
            i = buf.find(b"\r\n", 0, 18)
            if i > 0 and _HEX(buf, 0, i):
                j = i + 2 + int(buf[:i], 16)
                if j > i + 2 and len(buf) == j + 2 and buf.endswith(b"\r\n"):
                    self._buf = b""
                    return buf[i + 2 : j]
        out = []
        left, crlf = self._left, self._crlf
        pos, end = 0, len(buf)
        while pos < end:
            if left:
                take = min(left, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                left -= take
                if left:
                    break
                crlf = True
            if crlf:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("malformed chunked body: no CRLF after a chunk")
                pos += 2
                crlf = False
                if pos == end:
                    break
            i = buf.find(b"\r\n", pos)
            if i < 0:
                if end - pos > 1024:
                    raise httpx.RemoteProtocolError("malformed chunked body: chunk header too long")
                break
            head = buf[pos:i].split(b";", 1)[0].strip()
            if not _HEX(head):
                raise httpx.RemoteProtocolError(f"malformed chunked body: bad chunk size {buf[pos:i][:40]!r}")
            size = int(head, 16)
            if size == 0:
                # The last chunk; trailers (if any) end with an empty line.
                if buf.startswith(b"\r\n", i + 2) or buf.find(b"\r\n\r\n", i) >= 0:
                    self.complete = True
                    pos = end
                    break
                break
            pos = i + 2
            left = size
        self._buf = buf[pos:] if pos < end else b""
        self._left, self._crlf = left, crlf
        return out[0] if len(out) == 1 else b"".join(out)


class _StaleConnection(Exception):
    """The server closed the connection before any byte of a response."""
