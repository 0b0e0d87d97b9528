"""`bracket compare` / `bracket summarize` run on a simulated frame (bracket.stats.simulate), as a user would.

The tests (tests/test_stats_blocks.py) and bench/design_efficiency.py read the command's JSON, so the numbers
they check are the ones a user gets from the command line.
"""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
from bracket.cli import main


def via_cli(df: pd.DataFrame, path, command: str, *args: str) -> object:
    """Write `df` as a CSV at `path` and return the JSON that `bracket COMMAND path --json ARGS` prints."""
    df.to_csv(path, index=False)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([command, str(path), "--json", *args])
    if rc != 0:
        raise RuntimeError(f"bracket {command} {path} exited {rc}")
    return json.loads(buf.getvalue())
