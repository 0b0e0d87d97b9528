"""Run one block against the stand-in engine in its own process, so a test can signal it.

python drive_block.py TMP PORT RUNS FLAG...      (FLAGs go to fake_engine.py)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "workflow"))

import faultkit  # noqa: E402
from bracket.measure import runner  # noqa: E402

tmp, port, runs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = faultkit.experiment(tmp, port, runs=runs)
try:
    faultkit.run(cfg, tmp, faultkit.fake_argv(port, *sys.argv[4:]))
except runner.BlockFailed as exc:
    print(f"block failed: {exc}", file=sys.stderr)
    sys.exit(1)
