"""A streamed response's body read straight from its socket, one network read at a time.

The timed client (bracket.wire.client) shares the machine's cores with the engine it measures, so what
it spends per token is taken from the engine on a CPU server. httpx reads a body through httpcore
and h11, which cost tens of microseconds of Python per chunk of a chunked body (one chunk per
stream event), more than the rest of the client together (bench/results/harness_accuracy.md).
`Stream` sends the request httpx built (same method, target, headers and body bytes) over a
keep-alive socket of its own, reads the response head with h11, and then decodes the body's
framing (chunked, Content-Length or until close) itself: one `recv` per network read, stamped with
time.perf_counter the moment it returns (or with the kernel's arrival stamp: bracket.wire.arrival),
and the bytes of that read handed on whole.

It runs only inside bracket.wire.transport.TimedTransport, an httpx transport: httpx hands it the request
as it would hand it to its own transport (auth, hooks, cookies applied; a proxy or mount routed elsewhere),
so it sends what httpx would send. Errors are httpx's exception types with httpx's messages, so callers
handle both paths alike.

What a response may cost is bounded whatever its server sends: `record` keeps at most KEEP_BYTES of
raw bytes not yet parsed (past them it asks its caller to parse, and drops what was parsed), a
compressed body is inflated at most INFLATE_BYTES per piece, and `finish` reads a body's end for at
most FINISH_BYTES and its `wait_s`. The whole-request deadline is the caller's (it shuts the socket).
"""

from __future__ import annotations

import select
import socket
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Protocol

import h11
import httpx

from bracket.wire.arrival import clock_pair, stamp_arrivals
from bracket.wire.chunked import ChunkDecoder, Cursor, decode_kept
from bracket.wire.timed_reads import Asks, Reads, read_error

READ_BYTES = 65536
# The raw bytes `record` keeps before it has its caller parse them (and drops what was parsed): a stream of
# a few thousand tokens stays below it and is parsed once, after its end.
KEEP_BYTES = 4 << 20
# The most a compressed body's piece may inflate to at once (a small piece can inflate a thousandfold).
INFLATE_BYTES = 1 << 20
# After a stream's end marker, the most of its body's end `finish` reads before it gives the connection up.
FINISH_BYTES = 65536
# The encodings this reader can undo; a request that asks for more (httpx adds br and zstd when
# their packages are installed) is narrowed to these, which every HTTP server may answer with.
ACCEPT_ENCODING = b"gzip, deflate"


class Pool(Protocol):
    """Where a finished response's socket waits for the next request (bracket.wire.transport.TimedTransport)."""

    idle: dict[tuple[str, int], socket.socket]
    closed: bool


def _readable(sock: socket.socket) -> bool:
    """An idle connection with something to read was closed by the server (or holds junk): not reusable."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class Stream:
    """One request's response: status, headers, and its body as (perf_counter stamp, bytes) per read.

    Use as a context manager; the socket goes back to the pool's idle set only if the body was
    read to its end and the server allows keep-alive, else it is closed.
    """

    def __init__(
        self,
        pool: Pool,
        request: httpx.Request,
        timeout_s: float,
        on_socket: Callable[[socket.socket], None] | None = None,
    ):
        # on_socket: told each socket as soon as it is connected (or taken from the idle set), before
        # anything is sent: the caller's whole-request deadline shuts it, the response's head included.
        self.pool, self.request, self.timeout_s, self.on_socket = pool, request, timeout_s, on_socket
        url = request.url
        self.key = (url.host, url.port or 80)
        self.sock: socket.socket | None = None
        self.status = 0
        self.reason = b""
        self.http_version = b"HTTP/1.1"
        self.t0 = 0.0  # when the request began, as the caller takes it (TimedTransport: before connecting)
        self.headers: dict[bytes, bytes] = {}
        self.raw_headers: list[tuple[bytes, bytes]] = []
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
        self._view: memoryview | None = None
        self._times: list[float] = []
        self._ends: list[int] = []
        self._done = 0
        self._at = Cursor()  # where `recorded` goes on decoding
        # the wall clock's offset from perf_counter, read before the request is sent (clock_pair) and then
        # bounded by every stamped read (clock_offset): the kernel's arrival stamps are wall-clock times
        self._offset: tuple[float, float] = clock_pair()

    # ---- connecting and sending ---------------------------------------------------------------
    def _connect(self) -> tuple[socket.socket, bool]:
        idle = self.pool.idle.pop(self.key, None)
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
        self._rest, _ = conn.trailing_data
        self._take_head(response)
        return self

    def _take_head(self, response: h11.Response) -> None:
        """The response's status and headers, and from them its framing, keep-alive and Content-Encoding."""
        self.status, self.reason = response.status_code, response.reason
        self.raw_headers = list(response.headers.raw_items())
        self.http_version = b"HTTP/" + response.http_version
        self.headers = {k.lower(): v for k, v in response.headers}
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
    def reads(self, decode: bool = True) -> Iterator[tuple[float, bytes]]:
        """The body's bytes (framing undone, and Content-Encoding unless `decode` is False), one item per
        network read.

        Each item is stamped when its read returned; bytes already received with the head come
        first, stamped when the head was read. One iterator per response: reading it again goes on
        where the last reader stopped (`decode` is the first reader's).
        """
        if self._body is None:
            body = {"chunked": self._chunked, "length": self._fixed, "close": self._until_close}[self._framing]()
            self._body = body if self._inflate is None or not decode else self._inflated(body)
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
            raise read_error(exc) from exc

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
        (SO_TIMESTAMPNS; bracket.wire.arrival), not when this process woke up to read them: the client's own
        scheduling delay stays out of every time. With coalesce_bytes > 0 (and kernel stamps), once
        `started()` is True (the caller has seen its first token; at once without `started`) the
        process sleeps until coalesce_bytes have arrived (SO_RCVLOWAT, one poll) or coalesce_wait_s
        has passed, then takes whatever is there: a wake-up per few kilobytes instead of one per
        event, which is most of what reading costs the engine's cores. The kernel acknowledges the
        bytes as they come either way, so the server sees no difference. A read's time is still its
        last bytes' arrival, so the stream's end, and its last token where that came with the end,
        keep their exact times; only the events in between share the time of the read that took them.

        Once more than `keep_bytes` (default KEEP_BYTES) are kept, `stop()` is asked too (the caller parses
        them through `recorded`), and the bytes it was handed are dropped: a long or endless body is kept
        `keep_bytes` at a time, never whole.
        """
        keep_bytes = KEEP_BYTES if keep_bytes is None else keep_bytes
        reads = Reads(self, stamp_arrivals(self.sock), coalesce_bytes, started, coalesce_wait_s)
        asks = Asks(self, stop, hints, unterminated_limit)
        pos = self._keep_rest()
        if pos and asks.on_rest(pos):
            return
        self._blocking()
        times, ends = self._times, self._ends
        try:
            while True:
                read = reads.reader()
                if len(self._buf) - pos < READ_BYTES:
                    self._grow(pos)
                got = read(self._view[pos : pos + READ_BYTES])
                if got is None:
                    continue
                n, now = got
                start = pos
                pos += n
                times.append(now)
                ends.append(pos)
                if asks.after(start, pos):
                    return
                reads.note_started()
                if pos > keep_bytes:
                    if stop() or self.complete:
                        return
                    pos = self._drop_handed_out()
        finally:
            self._offset = reads.offset
            if reads.poll is not None:
                self._coalesce(0)

    def _keep_rest(self) -> int:
        """The record buffer (1 MiB, more where the head brought more), holding what came with the head as
        its first read; returns where the next read goes."""
        rest, self._rest = self._rest, b""
        self._buf = bytearray(max(1 << 20, len(rest) + READ_BYTES))
        self._view = memoryview(self._buf)
        if rest:
            self._buf[: len(rest)] = rest
            self._times.append(time.perf_counter())
            self._ends.append(len(rest))
        return len(rest)

    def _grow(self, pos: int) -> None:
        """Double the record buffer, keeping its first `pos` bytes."""
        old = self._buf
        self._view.release()
        self._buf = bytearray(2 * len(old))
        self._buf[:pos] = old[:pos]
        self._view = memoryview(self._buf)

    def _drop_handed_out(self) -> int:
        """Drop the kept bytes that `recorded` has handed out (all but a chunk's framing not yet read
        through), moving the rest to the buffer's start; returns where the next read goes. The last read's
        time and end stay, as the floor of the next read's arrival and the start of the next `recorded`."""
        ends, times, buf = self._ends, self._times, self._buf
        n = len(ends)
        if self._done < n or not n:  # the caller did not read what was kept: nothing can go
            return ends[-1] if n else 0
        shift, pos = self._at.pos, ends[-1]
        left = pos - shift
        buf[:left] = buf[shift:pos]  # same length: the buffer is not resized under its view
        del ends[: n - 1], times[: n - 1]
        ends[0] = left
        self._done, self._at.pos = 1, 0
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
        which read i ends, and the time read i returned (bracket.wire.chunked.decode_kept). Sets
        `complete` once the body's last chunk was seen; raises RemoteProtocolError on a malformed
        chunked body.
        """
        first, ends = self._done, self._ends
        if first >= len(ends):
            return b"", [], []
        if self.complete:
            self._at.complete = True
        body, body_ends = decode_kept(self._buf, ends, first, self._at)
        self.complete = self._at.complete
        self._done = len(ends)
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
                self._decoder.resume(bytes(self._buf[self._at.pos : self._ends[-1]]), self._at)
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
        if self._view is not None:
            self._view.release()
            self._view = None
        if sock is None:
            return
        if self.complete and self._reusable and not self.pool.closed:
            old = self.pool.idle.pop(self.key, None)
            if old is not None:
                old.close()
            self.pool.idle[self.key] = sock
        else:
            sock.close()


class _StaleConnection(Exception):
    """The server closed the connection before any byte of a response."""
