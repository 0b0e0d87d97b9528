"""Run one block on the real embedded engine in its own process, so a test can kill it.

python drive_engine_block.py TMP PORT ENGINE_VENV MODEL_DIR RUNS
(Its environment is tests.support.python_env(): it imports bracket and tests.support from the checkout.)
"""

import sys
from pathlib import Path

from bracket.block import runner
from bracket.experiment import design

from tests.support import faultkit

tmp, port, engine, model, runs = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
cfg = faultkit.experiment(tmp, port, runs=runs, startup_timeout_s=300)
blocks = design.from_config(cfg)
runner.run_block(
    cfg,
    "killed",
    blocks[0],
    1,
    model=model,
    python=str(engine / "bin" / "python"),
    root="/",
    **faultkit.block_paths(tmp),
)
