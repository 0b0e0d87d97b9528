"""bracket's httpx transport (bracket.wire.transport): the timed read taken only where httpx routes a request to
it, sending what httpx would send and measuring what httpx's own path measures.

A capturing server on a thread of this process keeps each request's bytes and answers with one whole SSE
stream, so the same request can be sent through bracket's client and a plain httpx.Client and compared.
"""

import contextlib
import json
import socket
import threading

import httpx
import pytest
from bracket.wire.client import stream_completion
from bracket.wire.transport import STREAM, timed_client


def sse(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def text_event(text: str, finish=None) -> bytes:
    return sse({"id": "c", "choices": [{"index": 0, "text": text, "finish_reason": finish}]})


def usage_event(n: int) -> bytes:
    return sse({"id": "c", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": n}})


class Capture:
    """Answers every request with one whole SSE stream (Content-Length, then close) and keeps each request's
    bytes as they came: the request line, the headers and the body."""

    BODY = text_event(" a") + text_event(" b", finish="length") + usage_event(2) + b"data: [DONE]\n\n"

    def __init__(self):
        self.requests: list[tuple[bytes, dict[bytes, bytes], bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/completions"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                head, body = buf.split(b"\r\n\r\n", 1)
                line, *fields = head.split(b"\r\n")
                headers = {k.strip().lower(): v.strip() for k, v in (f.split(b":", 1) for f in fields)}
                while len(body) < int(headers.get(b"content-length", b"0")):
                    body += conn.recv(65536)
                self.requests.append((line, headers, body))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(self.BODY))
                conn.sendall(self.BODY)

    def close(self) -> None:
        self.sock.close()


def _took_timed_read(http: httpx.Client, url: str) -> bool:
    """Whether a timed request through `http` was read by bracket's own Stream (the response says so)."""
    request = http.build_request("POST", url, json={"prompt": "x"}, timeout=5.0, extensions={"bracket.timed": True})
    with contextlib.closing(http.send(request, stream=True)) as resp:
        resp.read()
        return STREAM in resp.extensions


def test_the_timed_read_sends_what_httpx_sends_and_measures_the_same():
    """The same request through bracket's transport (its own socket) and through a plain httpx.Client (httpcore):
    the same request line, headers (Accept-Encoding narrowed to what the reader undoes) and body bytes, and the
    same measurement; the client's auth and event hooks applied on both paths, as httpx applies them."""
    srv = Capture()
    hooked = []
    kw = {"headers": {"X-Key": "k"}, "auth": ("u", "p"), "event_hooks": {"request": [hooked.append]}}
    with timed_client(**kw) as ours, httpx.Client(**kw) as plain:
        assert _took_timed_read(ours, srv.url) and not _took_timed_read(plain, srv.url)
        m_ours = stream_completion(ours, srv.url, {"prompt": "x", "stream": True}, 5.0)
        m_plain = stream_completion(plain, srv.url, {"prompt": "x", "stream": True}, 5.0)
    srv.close()
    assert len(hooked) == 4
    (l1, h1, b1), (l2, h2, b2) = srv.requests[2:]
    assert l1 == l2 == b"POST /v1/completions HTTP/1.1" and b1 == b2 == b'{"prompt":"x","stream":true}'
    assert h1.pop(b"accept-encoding") == b"gzip, deflate" and b"gzip" in h2.pop(b"accept-encoding")
    assert h1 == h2 and h1[b"authorization"] == b"Basic dTpw" and h1[b"x-key"] == b"k"
    for m in (m_ours, m_plain):
        assert m.error is None and m.output_text == " a b" and m.completion_tokens == 2 and m.prompt_tokens == 2


@pytest.mark.parametrize("no_proxy", ["", "127.0.0.1", "localhost,127.0.0.0/8", "*", ".example.org"])
def test_the_environment_s_proxies_route_bracket_s_client_as_httpx_s(monkeypatch, no_proxy):
    """httpx reads HTTP_PROXY and NO_PROXY only for a client whose transport it builds; bracket's client mounts
    them itself (environment_mounts), so a request goes where a plain httpx.Client sends it: to the proxy, and
    then through httpx's proxy transport, never the timed read; past it (NO_PROXY) to the server, timed."""
    proxy, srv = Capture(), Capture()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.rsplit("/v1/", 1)[0])
    monkeypatch.setenv("NO_PROXY", no_proxy)
    with timed_client() as ours, httpx.Client() as plain:
        timed = _took_timed_read(ours, srv.url)
        m = stream_completion(ours, srv.url, {"prompt": "x"}, 5.0)
        ours_proxied = len(proxy.requests)
        _took_timed_read(plain, srv.url)
        plain_proxied = len(proxy.requests) - ours_proxied
    proxy.close()
    srv.close()
    assert m.error is None and m.output_text == " a b"
    assert (ours_proxied, plain_proxied) in ((2, 1), (0, 0)) and timed is (ours_proxied == 0)
    # curl's rules, as httpx reads them: an address exactly (not a network), `*` for every host
    assert ours_proxied == {"": 2, "127.0.0.1": 0, "localhost,127.0.0.0/8": 2, "*": 0, ".example.org": 2}[no_proxy]
    if ours_proxied:
        assert {line for line, _, _ in proxy.requests} == {b"POST " + srv.url.encode() + b" HTTP/1.1"}


def test_a_mock_transport_or_a_given_proxy_takes_httpx_path():
    proxy = Capture()
    with timed_client(proxy=proxy.url.rsplit("/v1/", 1)[0]) as given:
        assert not _took_timed_read(given, "http://127.0.0.1:9/v1/completions")  # nothing listens on port 9
    proxy.close()
    assert len(proxy.requests) == 1
    with httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=Capture.BODY))) as mocked:
        assert not _took_timed_read(mocked, "http://127.0.0.1:9/v1/completions")
