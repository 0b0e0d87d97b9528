"""A GET whose answer costs this process a bounded size and time, whatever the server sends.

`/metrics`, `/version` and `/v1/models` of a server bracket measures, or identifies: an endless, oversized or
trickled page ends as OverLimit (get_bounded) or as no text (fetch_text, get_text), never as a hung block.
"""

from __future__ import annotations

import contextlib
import time
import zlib
from dataclasses import dataclass

import httpx

from bracket.wire.deadline import Deadline, socket_of
from bracket.wire.stream_events import size_words

# The most of a GET's body read (fetch_text: /metrics, /version, /v1/models): every engine's /metrics page
# is well under a megabyte.
GET_LIMIT = 4 << 20


class OverLimit(httpx.HTTPError):
    """A response's body that went past its reader's size or time limit (get_bounded), said in words;
    `status` is the response's."""

    def __init__(self, message: str, status: int | None):
        super().__init__(message)
        self.status = status


def get_bounded(
    client: httpx.Client,
    url: str,
    timeout: float | httpx.Timeout = 5.0,
    limit: int = GET_LIMIT,
    total_s: float | None = None,
) -> httpx.Response:
    """GET `url` and read its body whole, streamed: at most `limit` bytes (decompressed) within `total_s`
    from the start (default: `timeout`, or a Timeout's connect and read limits together).

    Returns the response with its body read (any status); raises OverLimit for a body past either limit
    (a server that sends an endless or oversized page, or trickles it), httpx's own errors otherwise (a
    connection refused or never made comes as httpx says it). What a server sends costs this process at
    most `limit` bytes, whatever it is.
    """
    if total_s is None:
        total_s = timeout if not isinstance(timeout, httpx.Timeout) else (timeout.connect or 0) + (timeout.read or 0)
    path = httpx.URL(url).path
    deadline = Deadline(total_s)
    deadline.arm()
    deadline.begin(time.perf_counter())
    status, got = None, 0
    try:
        request = client.build_request(
            "GET", url, timeout=timeout, headers={"Accept-Encoding": "identity"}, extensions={"trace": deadline.trace}
        )
        with contextlib.closing(client.send(request, stream=True)) as r:
            deadline.watch(socket_of(r))
            status = r.status_code
            encoding = r.headers.get("content-encoding", "identity").lower().strip()
            inflate = None
            if r.is_stream_consumed:  # read whole already (a test transport): its content, decoded
                raw = iter([r.content])
            else:
                raw = r.iter_raw()
                if encoding in ("gzip", "x-gzip", "deflate"):
                    inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding != "deflate" else zlib.MAX_WBITS)
                elif encoding not in ("identity", ""):
                    raise OverLimit(f"GET {path} answered in Content-Encoding {encoding!r}, which is not read", status)
            pieces = []
            for data in raw:
                if inflate is not None:
                    data = inflate.decompress(data, limit + 1 - got)
                    if inflate.unconsumed_tail:
                        got = limit + 1
                got += len(data)
                if got > limit:
                    raise OverLimit(
                        f"GET {path} sent more than {size_words(limit)}, read no further (no engine's page is that "
                        f"long: the server's {path} is endless or broken)",
                        status,
                    )
                pieces.append(data)
            headers = [
                (k, v)
                for k, v in r.headers.raw
                if k.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")
            ]
    except OverLimit:
        raise
    except (httpx.HTTPError, zlib.error) as exc:
        if deadline.fired:
            raise OverLimit(
                f"GET {path} did not end within {total_s:g} s ({got:,} bytes came), read no further (the "
                f"server's {path} trickles, stalls or never ends)",
                status,
            ) from exc
        if isinstance(exc, zlib.error):
            raise httpx.DecodingError(f"GET {path}: {exc}") from exc
        raise
    finally:
        deadline.cancel()
    return httpx.Response(status, headers=headers, content=b"".join(pieces), request=request)


@dataclass(frozen=True)
class Fetched:
    """A GET's answer: its status (None: no answer), its body as text where the status was 200 and the body
    came whole within the limits, and why not where a 200 answer's body did not (`problem`, in words)."""

    status: int | None
    text: str | None = None
    problem: str | None = None


def fetch_text(client: httpx.Client, url: str, timeout_s: float = 5.0, limit: int = GET_LIMIT) -> Fetched:
    """GET `url` and read its body as text, at most `limit` bytes (decompressed) and `timeout_s` altogether
    (get_bounded). A 200 answer's body over either limit is read no further: `text` None and `problem` says
    which; any other answer, or none, is just that (`status`)."""
    try:
        r = get_bounded(client, url, timeout_s, limit)
    except OverLimit as exc:
        return Fetched(exc.status, None, str(exc) if exc.status == 200 else None)
    except httpx.HTTPError:
        return Fetched(None)
    if r.status_code != 200:
        return Fetched(r.status_code)
    return Fetched(200, r.text)


def get_text(client: httpx.Client, url: str, timeout_s: float = 5.0) -> str | None:
    """The body of a GET answered 200, as text; None for any other answer, none, or a body past fetch_text's limits."""
    return fetch_text(client, url, timeout_s).text
