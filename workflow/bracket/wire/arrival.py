"""When a read's bytes reached the socket: the kernel's receive stamps, moved onto time.perf_counter.

A timed read (bracket.wire.http_stream.Stream.record) asks the kernel to stamp what its socket receives
(SO_TIMESTAMPNS, Linux), so a read's time is when its last bytes arrived, not when this process woke up to
read them: the client's own scheduling delay stays out of every time. The kernel stamps on the wall clock;
the stamps are moved to perf_counter by the wall clock's offset from it, estimated per stream
(`clock_pair`, then `clock_offset` at every read).
"""

from __future__ import annotations

import math
import socket
import struct
import sys
import time

# Kernel receive time stamps (Linux): each recvmsg carries the time its last bytes reached the socket.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
ANC_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
TIMESPEC = struct.Struct("qq")

# How fast the estimate of the wall clock's offset from perf_counter may rise (clock_offset): NTP slews the
# wall clock by at most 500 ppm; a faster rise is the client's own delay between its two clock reads.
OFFSET_SLEW = 5e-4
OFFSET_SLACK_S = 1e-6  # and the two reads' own jitter


def stamp_arrivals(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what this socket receives; False where it cannot (no recvmsg, not Linux)."""
    if SO_TIMESTAMPNS is None or not ANC_SPACE or not hasattr(sock, "recvmsg_into"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


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
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, ns = TIMESPEC.unpack_from(data)
            t = sec + ns * 1e-9 - offset
            return now if t > now else floor if t < floor else t
    return now
