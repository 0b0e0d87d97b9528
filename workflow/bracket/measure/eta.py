"""How long is left: in the block (from the requests done so far) and in the experiment (from the
blocks already finished, as their provenance records them)."""

from __future__ import annotations

import json
from pathlib import Path


def left_in_block(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far: elapsed / done x (total - done); None before the first request."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed_s / done * (total - done)


def finished_block_seconds(meta_dir: str | Path) -> list[float]:
    """Duration of every finished block beside ``meta_dir`` (raw/block-*.meta.json: started_at to ended_at)."""
    out = []
    for p in sorted(Path(meta_dir).glob("block-*.meta.json")):
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if m.get("status") == "complete" and m.get("started_at") and m.get("ended_at"):
            out.append(float(m["ended_at"]) - float(m["started_at"]))
    return out


def left_in_experiment(meta_dir: str | Path, blocks_left: int, cooldown_s: float = 0.0) -> tuple[float, int] | None:
    """(seconds, blocks measured) for ``blocks_left`` more blocks at the mean of those finished; None if none has."""
    done = finished_block_seconds(meta_dir)
    if not done:
        return None
    return blocks_left * (sum(done) / len(done) + cooldown_s), len(done)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
