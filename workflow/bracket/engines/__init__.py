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
from bracket.engines.sglang import SGLang
from bracket.engines.vllm import VLLM

ENGINES: dict[str, type[Engine]] = {"vllm": VLLM, "sglang": SGLang, "llamacpp": LlamaCpp, "ollama": Ollama,
                                    "openai": OpenAI}


def get(kind: str) -> Engine:
    try:
        return ENGINES[kind]()
    except KeyError:
        raise ValueError(f"engine.kind {kind!r} has no adapter; available: {', '.join(sorted(ENGINES))}") from None
