"""The httpx transport of bracket's clients: a timed request's body read from a socket of its own.

`timed_client()` is an httpx.Client whose transport is `TimedTransport`, a subclass of httpx's own
HTTPTransport. A request that asks for the timed read (the request extension TIMED, which
bracket.wire.client.timed_stream sets) over plain `http://` is sent and read by
bracket.wire.http_stream.Stream; every other request goes through httpx's HTTPTransport unchanged. The
response carries its Stream as the response extension STREAM, so the caller knows which path it took
without looking into the client.

Being a transport, the timed read sends what httpx would send by construction: httpx hands it the request
after the client's auth, cookies, event hooks and headers, and routes a URL that a proxy (given, or from
the environment) or a mount takes to that transport instead, which knows nothing of TIMED and reads the
body as httpx does. A client that is not bracket's (a plain httpx.Client, a test's MockTransport) takes
httpx's path for every request, with the same results at httpx's cost per event. No private attribute of
httpx or httpcore is read: custom transports and request and response extensions are httpx's public API.

httpx's own send (auth flow, hooks, routing) runs before the transport: about 40 us per request (median of 300
on loopback, 2 shared cores), outside every time the client reports, whose t0 the transport takes.
"""

from __future__ import annotations

import ipaddress
import socket
import time
import urllib.request
from collections.abc import Iterator

import httpx

from bracket.wire.http_stream import Stream

TIMED = (
    "bracket.timed"  # request extension: read this body on the timed path; its value, if callable, is told the socket
)
STREAM = "bracket.stream"  # response extension: the Stream that reads the body (absent: httpx's path)


class TimedTransport(httpx.HTTPTransport):
    """httpx's HTTPTransport, with the timed read for the requests that ask for it (the module's docstring).

    Keeps one idle keep-alive socket per (host, port) between timed requests, as httpx's pool keeps its
    connections; closed with the transport (the client's close).
    """

    def __init__(self) -> None:
        super().__init__()
        self.idle: dict[tuple[str, int], socket.socket] = {}
        self.closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        ask = request.extensions.get(TIMED)
        read_s = (request.extensions.get("timeout") or {}).get("read")
        if ask is None or request.url.scheme != "http" or read_s is None:
            return super().handle_request(request)
        t0 = time.perf_counter()  # the request's start as the timed client takes it: before connecting
        stream = Stream(self, request, read_s, on_socket=ask if callable(ask) else None)
        stream.t0 = t0
        stream.open()
        return httpx.Response(
            stream.status,
            headers=stream.raw_headers,
            stream=_Body(stream),
            extensions={STREAM: stream, "http_version": stream.http_version, "reason_phrase": stream.reason},
        )

    def close(self) -> None:
        self.closed = True
        idle, self.idle = self.idle, {}
        for sock in idle.values():
            sock.close()
        super().close()


class _Body(httpx.SyncByteStream):
    """A timed response's body as httpx reads one (resp.read(), iter_bytes): framing undone, Content-Encoding
    left to httpx's decoders, as httpcore hands it over; closing it closes (or keeps alive) the Stream."""

    def __init__(self, stream: Stream):
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        for _, data in self.stream.reads(decode=False):
            yield data

    def close(self) -> None:
        self.stream.close()


def timed_client(**kwargs) -> httpx.Client:
    """An httpx.Client (any of its arguments but `transport`) whose timed requests take the timed read.

    httpx reads the environment's proxies (HTTP_PROXY, ALL_PROXY, NO_PROXY, ...) only for a client it builds
    the transport of; given one, it reads none. So that bracket's client goes where a plain httpx.Client
    would, the environment's proxies are mounted here as httpx mounts them (`environment_mounts`), unless
    the caller gives `proxy`, `mounts` or trust_env=False.
    """
    if kwargs.get("trust_env", True) and "proxy" not in kwargs and "mounts" not in kwargs:
        kwargs["mounts"] = environment_mounts()
    return httpx.Client(transport=TimedTransport(), **kwargs)


def environment_mounts() -> dict[str, httpx.HTTPTransport | None]:
    """The environment's proxies as httpx.Client mounts: a proxy's transport per `scheme://` that names one,
    and None (the client's own transport) per NO_PROXY host, with NO_PROXY=* meaning no proxy at all.

    urllib.request.getproxies reads the variables (any case, as httpx reads them through it); the patterns
    follow httpx 0.28's reading of them (curl's NO_PROXY rules: an IP or `localhost` exactly, a name also
    as a suffix). tests/test_client_reads.py checks that a request goes where a plain httpx.Client sends it.
    """
    found = urllib.request.getproxies()
    proxies = {f"{scheme}://": found[scheme] for scheme in ("http", "https", "all") if found.get(scheme)}
    mounts: dict[str, httpx.HTTPTransport | None] = {
        pattern: httpx.HTTPTransport(proxy=url if "://" in url else f"http://{url}") for pattern, url in proxies.items()
    }
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host) or host.lower() == "localhost":
            mounts[f"all://[{host}]" if ":" in host else f"all://{host}"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts if proxies else {}


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("/")[0])  # an address, or a network's (`192.168.0.0/16`)
    except ValueError:
        return False
    return True
