"""Engine adapters: how an arm becomes a server command, what "ready" means, how acceptance is read.

One module per engine. Each exposes an `Engine` subclass registered in ENGINES by its kind;
engines/launch.py starts them (native, docker) or attaches to them, engines/provenance.py records
what ran.
"""

from __future__ import annotations

from bracket.engines.base import Engine
from bracket.engines.llamacpp import LlamaCpp
from bracket.engines.ollama import Ollama
from bracket.engines.openai import OpenAI
from bracket.engines.reference import Reference
from bracket.engines.sglang import SGLang
from bracket.engines.vllm import VLLM

ENGINES: dict[str, type[Engine]] = {
    "vllm": VLLM,
    "sglang": SGLang,
    "llamacpp": LlamaCpp,
    "ollama": Ollama,
    "openai": OpenAI,
    "reference": Reference,
}


def get(kind: str) -> Engine:
    """The adapter of `kind`; `auto` (an attached server not yet asked) is the generic one until it is."""
    if kind == "auto":
        return OpenAI()
    try:
        return ENGINES[kind]()
    except KeyError:
        raise ValueError(f"engine.kind {kind!r} has no adapter; available: {', '.join(sorted(ENGINES))}") from None


def for_server(declared: str, found) -> Engine:
    """The adapter for an attached server identified as `found` (bracket.engines.identify.Identity).

    engine.kind auto takes the engine found; openai keeps the generic adapter whatever answers; a named
    kind is used as is (bracket.engines.identify.contradiction has refused one that does not match).
    """
    adapter = get(found.kind if declared == "auto" else declared)
    adapter.attached = True
    return adapter
