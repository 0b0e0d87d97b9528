"""Run one block against the stand-in engine in its own process, so a test can signal it.

python drive_block.py TMP PORT RUNS FLAG...      (FLAGs go to fake_engine.py)
(Its environment is tests.support.python_env(): it imports bracket and tests.support from the checkout.)
"""

import sys
from pathlib import Path

from bracket.block import runner

from tests.support import faultkit

tmp, port, runs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = faultkit.experiment(tmp, port, runs=runs)
try:
    faultkit.run(cfg, tmp, faultkit.fake_argv(port, *sys.argv[4:]))
except runner.BlockFailed as exc:
    print(f"block failed: {exc}", file=sys.stderr)
    sys.exit(1)
