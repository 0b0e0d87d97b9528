"""`Stream.record`'s reads (bracket.wire.http_stream): one network read at a time into the kept buffer,
timed by its bytes' arrival, and when to hand what was kept to the caller's parser.

Per read the hot path is one recvmsg_into (or recv_into), one or two clock reads and a few searches of the
new bytes in C: what the client spends here is taken from the engine's cores on a CPU server.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx

from bracket.wire.arrival import ANC_SPACE, arrival, clock_offset

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


class Reads:
    """`record`'s network reads, one at a time into the slice of the kept buffer it is handed: per event as
    it comes (each read blocking, the kernel's stall limit), or once coalescing began, a poll until enough
    came or its wait passed. Each read is timed by its bytes' arrival where the kernel stamps them."""

    def __init__(self, stream, stamped: bool, coalesce_bytes: int, started, wait_s: float):
        self.stream, self.stamped, self.started = stream, stamped, started
        self.coalesce_bytes = coalesce_bytes if stamped else 0
        self.waiting = self.coalesce_bytes > 0 and started is not None  # per event until the first token
        self.poll = None
        self.wait_ms, self.stall = max(1, round(wait_s * 1000)), stream.timeout_s
        self.last_data = 0.0  # when data last came, for the stall limit while coalescing (the kernel's, else)
        self.offset = stream._offset  # the wall clock's offset from perf_counter, as the reads so far bound it
        sock = stream.sock
        self.recv_into, self.recvmsg_into = sock.recv_into, sock.recvmsg_into
        self.perf, self.wall, self.times = time.perf_counter, time.time, stream._times

    def reader(self) -> Callable[[memoryview], tuple[int, float] | None]:
        """The read to make next: polled once coalescing began, else blocking (stamped where it can be)."""
        if self.coalesce_bytes and not self.waiting and self.poll is None:
            self.poll = self.stream._coalesce(self.coalesce_bytes)
            if self.poll is None:  # a socket that refuses SO_RCVLOWAT is read per event
                self.coalesce_bytes = 0
            self.last_data = self.times[-1] if self.times else self.perf()
        if self.poll is not None:
            return self.polled
        return self.stamped_read if self.stamped else self.plain

    def note_started(self) -> None:
        if self.waiting and self.started():
            self.waiting = False

    def _arrived(self, anc: list, now: float) -> float:
        self.offset = clock_offset(self.offset, self.wall(), now)
        times = self.times
        return arrival(anc, now, self.offset[0], times[-1] if times else 0.0)

    def polled(self, into: memoryview) -> tuple[int, float] | None:
        """Wait until coalesce_bytes came, the connection ended, or the wait passed; None when nothing came."""
        self.poll(self.wait_ms)
        try:
            n, anc, _, _ = self.recvmsg_into([into], ANC_SPACE, _DONTWAIT)
        except BlockingIOError:  # nothing came in the wait
            if self.perf() - self.last_data > self.stall:
                raise httpx.ReadTimeout("timed out") from None
            return None
        except OSError as exc:
            raise read_error(exc) from exc
        now = self.perf()
        if anc:
            now = self._arrived(anc, now)
        self.last_data = now
        return _counted(n), now

    def stamped_read(self, into: memoryview) -> tuple[int, float]:
        try:
            n, anc, _, _ = self.recvmsg_into([into], ANC_SPACE)
        except OSError as exc:
            raise read_error(exc) from exc
        now = self.perf()
        if anc:
            now = self._arrived(anc, now)
        return _counted(n), now

    def plain(self, into: memoryview) -> tuple[int, float]:
        try:
            n = self.recv_into(into)
        except OSError as exc:
            raise read_error(exc) from exc
        return _counted(n), self.perf()


def _counted(n: int) -> int:
    """A read's byte count; none means the server closed the connection before the body's end."""
    if not n:
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body (incomplete chunked read)"
        )
    return n


class Asks:
    """When `record` asks its caller's parser (`stop`) to look at what was kept: a read that ends the chunked
    body, holds one of the caller's markers, or ends an endless line."""

    def __init__(self, stream, stop: Callable[[], bool], hints: tuple[bytes, ...], unterminated_limit: int):
        self.stream, self.stop, self.hints, self.limit = stream, stop, hints, unterminated_limit
        self.run = 0  # bytes since the last chunk that ended a line

    def _stops(self) -> bool:
        return self.stop() or self.stream.complete

    def on_rest(self, pos: int) -> bool:
        """What came with the head, kept as the first read: True to stop before reading on."""
        buf = self.stream._buf
        self.run = pos
        if any(buf.find(h, 0, pos) >= 0 for h in self.hints) or buf.endswith(b"0\r\n\r\n", 0, pos):
            return self._stops()
        return False

    def after(self, start: int, pos: int) -> bool:
        """After a read that kept buf[start:pos]: True to stop reading."""
        buf = self.stream._buf
        if buf.endswith(b"\n\r\n", 0, pos):
            self.run = 0
            if buf.endswith(b"0\r\n\r\n", 0, pos) and self._stops():
                return True
        else:
            self.run += pos - start
            if self.run > self.limit:
                self.run = 0
                if self._stops():
                    return True
        lo = start - 16 if start > 16 else 0  # a marker split over two reads is found too
        find = buf.find
        for h in self.hints:
            if find(h, lo, pos) >= 0 and self._stops():
                return True
        return False


def read_error(exc: OSError) -> httpx.HTTPError:
    """A failed body read as httpx says it: the stall limit (SO_RCVTIMEO ends a blocking read with
    EAGAIN) or a broken connection."""
    if isinstance(exc, (BlockingIOError, TimeoutError)):
        return httpx.ReadTimeout("timed out")
    return httpx.ReadError(str(exc))
