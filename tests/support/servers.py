"""Servers on a thread of the test's own process, for a client test that needs the bytes on the wire exact."""

from __future__ import annotations

import socket
import threading


class RawServer:
    """Listens on a free port of 127.0.0.1 and answers each request, once its head has arrived, with
    `answer(conn)`: raw bytes at its own pacing. `base` is its URL, `url` base + `path`; a client that hangs up
    mid-answer ends that answer, not the server."""

    def __init__(self, answer, path: str = "/v1/completions"):
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.url = self.base + path
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                try:
                    self.answer(conn)
                except OSError:  # the client hung up
                    pass

    def close(self):
        self.sock.close()
