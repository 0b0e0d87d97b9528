"""Does a memory probe just outside a block predict the block's speed? Blocks of the quiet bench's
`today` setting, each with a copy probe just before its server starts and just after it stops.

    flock /tmp/bracket-engine.lock .venv/bin/python studies/quiet_engine/probe_beside_blocks.py [--blocks 8] \
        [--out studies/quiet_engine/results/probe_beside_blocks.json]

Prints, per block, the median decode rate and the probes (bracket.physics.bandwidth.probe_cpu, 64 MiB, median
of 7 copies), then the correlation of the log block medians with the log probes (Pearson's r and
Spearman's rho with its p). With `--from FILE` it prints the table of a saved run again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT / "workflow")]

import quiet_engine as q  # noqa: E402
from bracket.physics import bandwidth  # noqa: E402


def report(blocks: list[dict]) -> None:
    med = [float(np.median([r["decode_tok_s"] for r in b["runs"]])) for b in blocks]
    print("| block | median tok/s | probe before GB/s | probe after GB/s |\n|---:|---:|---:|---:|")
    for i, (m, b) in enumerate(zip(med, blocks)):
        print(f"| {i + 1} | {m:.1f} | {b['before']:.2f} | {b['after']:.2f} |")
    for name, p in (
        ("before", [b["before"] for b in blocks]),
        ("after", [b["after"] for b in blocks]),
        ("geometric mean", [np.sqrt(b["before"] * b["after"]) for b in blocks]),
    ):
        rho = stats.spearmanr(med, p)
        print(
            f"{name}: Pearson r of logs {np.corrcoef(np.log(med), np.log(p))[0, 1]:+.2f}, "
            f"Spearman rho {rho.statistic:+.2f} (p {rho.pvalue:.2f}); sd of log probe {np.std(np.log(p), ddof=1):.3f}"
        )
    print(f"sd of log block medians {np.std(np.log(med), ddof=1):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--out", type=Path, default=ROOT / "studies/quiet_engine/results/probe_beside_blocks.json")
    ap.add_argument("--from", dest="src", type=Path, help="print a saved run's table; runs nothing")
    a = ap.parse_args()
    if a.src:
        return report(json.loads(a.src.read_text()))
    work, out = Path(tempfile.mkdtemp()), []
    for i in range(a.blocks):
        before = bandwidth.probe_cpu(64 * 2**20, 7)["gbps"]
        runs, _ = q.run_block("today", q.SETTINGS["today"], i, 1, 12, work)
        after = bandwidth.probe_cpu(64 * 2**20, 7)["gbps"]
        out.append(
            {
                "before": before,
                "after": after,
                "runs": [{k: r.get(k) for k in ("decode_tok_s", "tg_tok_s", "ttft_s", "wall_s")} for r in runs],
            }
        )
        a.out.write_text(json.dumps(out))  # kept as it goes
    report(out)


if __name__ == "__main__":
    main()
