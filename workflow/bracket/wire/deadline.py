"""A whole request's time limit, however its server paces its bytes: the socket shut at the limit.

A read timeout is a limit between two reads: a server that sends one header or one token every few
seconds never trips it. `Deadline` ends a request at its limit from t0, its connection, head and body
included (bracket.wire.client's timed requests and bounded GETs).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx


class Deadline:
    """Ends a request at `limit_s` after its t0, however the server paces its bytes.

    A read timeout is a limit between two reads: a server that sends one header or one token every
    few seconds never trips it. The deadline covers connecting, the response's head and its body: at
    it, the connection's socket (handed over by `watch` as soon as it exists) is shut down, which
    wakes a blocked read at once; the request then ends and is recorded as over its limit. Its thread
    is started before t0 (`arm`; a thread's start takes a loaded machine up to milliseconds, which are
    not the server's) and told t0 after (`begin`).
    """

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._go = threading.Event()
        self._stop = threading.Event()
        self._at = 0.0

    def arm(self) -> None:
        threading.Thread(target=self._run, name="bracket-request-deadline", daemon=True).start()

    def begin(self, t0: float) -> None:
        """The clock runs from t0 (time.perf_counter)."""
        self._at = t0 + self.limit_s
        self._go.set()

    def _run(self) -> None:
        self._go.wait()
        while not self._stop.is_set():
            left = self._at - time.perf_counter()
            if left <= 0:
                self._fire()
                return
            self._stop.wait(left)

    def watch(self, sock: socket.socket | None) -> None:
        """The socket to shut at the deadline (shut at once when the deadline has passed)."""
        with self._lock:
            self._sock = sock
            fired = self.fired
        if fired:
            self._shut(sock)

    def trace(self, name: str, info: dict) -> None:
        """httpx's trace hook: the socket of a new connection, as soon as it is connected."""
        if name == "connection.connect_tcp.complete":
            get = getattr(info.get("return_value"), "get_extra_info", None)
            if get is not None:
                self.watch(get("socket"))

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sock = self._sock
        self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._stop.set()
        self._go.set()


def socket_of(response: httpx.Response) -> socket.socket | None:
    """The socket under an httpx response (its public `network_stream` extension), for the deadline to shut."""
    stream = response.extensions.get("network_stream")
    get = getattr(stream, "get_extra_info", None)
    return get("socket") if get else None
