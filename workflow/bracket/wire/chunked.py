"""HTTP/1.1 chunked transfer coding undone, two ways: as bytes come (`ChunkDecoder`), and over reads
kept whole in one buffer (`decode_kept`, the timed path's: one pass, a search and a slice per chunk).

A malformed body raises httpx.RemoteProtocolError naming what was wrong, as httpx says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

HEX = re.compile(rb"[0-9A-Fa-f]{1,16}").fullmatch  # a chunk size, without extensions
HEADER_LIMIT = 1024  # the longest chunk header (size and extensions) read before the body is called malformed


class ChunkDecoder:
    """Chunked transfer coding undone incrementally: `feed` raw bytes as they come, get the body bytes they end.

    `complete` once the last (zero-size) chunk and its trailers were seen.
    """

    def __init__(self):
        self.complete = False
        self._buf = b""
        self._left = 0  # bytes of the current chunk's data still to come
        self._crlf = False  # the CRLF after a chunk's data is still to come

    def resume(self, pending: bytes, at: Cursor) -> None:
        """Go on where `decode_kept` stopped: `pending` the raw bytes it had not decoded, `at` its cursor."""
        self._buf, self._left, self._crlf = pending, at.left, at.crlf

    def feed(self, data: bytes) -> bytes:
        if self.complete:
            return b""
        buf = self._buf + data if self._buf else data
        if not self._left and not self._crlf:
            # The common case: the input is exactly one whole chunk (a server's write of one event).
            i = buf.find(b"\r\n", 0, 18)
            if i > 0 and HEX(buf, 0, i):
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
                if end - pos > HEADER_LIMIT:
                    raise httpx.RemoteProtocolError("malformed chunked body: chunk header too long")
                break
            size = _size(buf[pos:i])
            if size == 0:
                # The last chunk; trailers (if any) end with an empty line.
                if buf.startswith(b"\r\n", i + 2) or buf.find(b"\r\n\r\n", i) >= 0:
                    self.complete = True
                    pos = end
                break
            pos = i + 2
            left = size
        self._buf = buf[pos:] if pos < end else b""
        self._left, self._crlf = left, crlf
        return out[0] if len(out) == 1 else b"".join(out)


def _size(line: bytes) -> int:
    """A chunk header's size (its extensions, `;name=value`, dropped)."""
    if HEX(line):
        return int(line, 16)
    head = bytes(line).split(b";", 1)[0].strip()
    if not HEX(head):
        raise httpx.RemoteProtocolError(f"malformed chunked body: bad chunk size {bytes(line)[:40]!r}")
    return int(head, 16)


@dataclass
class Cursor:
    """Where `decode_kept` stopped in the kept bytes: the raw position, the bytes of a chunk's data still
    to come, whether the CRLF after a chunk's data is still to come, and whether the body ended."""

    pos: int = 0
    left: int = 0
    crlf: bool = False
    complete: bool = False


def decode_kept(buf: bytearray, ends: list[int], first: int, at: Cursor) -> tuple[bytes, list[int]]:
    """The body bytes that kept reads `first` onwards carried, framing undone, and where each read ends in them.

    `buf` holds the raw reads back to back, read i ending at `ends[i]`; decoding starts at `at` and moves it
    on (`at.complete` once the body's last chunk was seen). Returns (body, body_ends): body_ends[j] is the
    offset in `body` at which read first + j ends. One pass: per chunk a search for its size line and a
    slice, however the chunks fall into reads.
    """
    raw_end = ends[-1]
    view = memoryview(buf)
    find = buf.find
    pieces = []
    body_ends = []
    pos, left, crlf = at.pos, at.left, at.crlf
    size_out = 0  # body bytes so far
    r = first
    n_reads = len(ends)
    try:
        while pos < raw_end and not at.complete:
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
                if raw_end - pos > HEADER_LIMIT:
                    raise httpx.RemoteProtocolError("malformed chunked body: chunk header too long")
                break
            size = int(buf[pos:i], 16) if HEX(buf, pos, i) else _size(buf[pos:i])
            if size == 0:
                # The last chunk; trailers (if any) end with an empty line.
                if buf.startswith(b"\r\n", i + 2, raw_end) or find(b"\r\n\r\n", i, raw_end) >= 0:
                    at.complete = True
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
        body = b"".join(pieces) if len(pieces) != 1 else bytes(pieces[0])
    finally:
        pieces.clear()
        view.release()
    while r < n_reads:  # reads that ended in framing, or after the body's end
        body_ends.append(size_out)
        r += 1
    at.pos, at.left, at.crlf = pos, left, crlf
    return body, body_ends
