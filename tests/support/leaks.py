"""Finding a secret in what a test collected, independently of bracket's own redaction (not named secrets.py: a
driver script run from this folder would shadow the standard library's secrets module)."""

from __future__ import annotations

import base64
import re


def decoded_leaks(text: str, key: str) -> list[str]:
    """Runs of base64-looking characters in `text` that decode (either alphabet, any start) to bytes that
    hold 8 consecutive bytes of `key`: what a reader could recover. Independent of bracket's own forms."""
    parts = {key.encode()[i : i + 8] for i in range(len(key) - 7)}
    hits = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{11,}", text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            for alt in (b"+/", b"-_"):
                try:
                    raw = base64.b64decode(chunk, altchars=alt, validate=False)
                except ValueError:
                    continue
                if any(p in raw for p in parts):
                    hits.append(run)
    return hits
