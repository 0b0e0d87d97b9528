"""Engine adapters: how an arm becomes a server command, what "ready" means, how acceptance is read.

One module per engine. Each exposes an `Engine` subclass registered in ENGINES by its kind.
"""

from __future__ import annotations

from bracket.engines.base import Engine
from bracket.engines.vllm import VLLM

ENGINES: dict[str, type[Engine]] = {"vllm": VLLM}


def get(kind: str) -> Engine:
    try:
        return ENGINES[kind]()
    except KeyError:
        raise ValueError(f"engine.kind {kind!r} has no adapter; available: {', '.join(sorted(ENGINES))}") from None
