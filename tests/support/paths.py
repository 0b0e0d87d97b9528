"""Where the checkout is, and what a child Python needs to import from it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "workflow"


def python_env(base: dict | None = None, *more: Path | str) -> dict:
    """`base` (os.environ) with PYTHONPATH naming this checkout's workflow/ and root first, then `more`, then
    what was there: a child Python (`python -c ...`, a driver script) imports bracket and tests.support from the
    checkout under test, not from wherever the virtual environment was installed from."""
    env = dict(os.environ if base is None else base)
    parts = [str(WORKFLOW), str(ROOT), *map(str, more)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
