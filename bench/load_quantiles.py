"""Coverage of the load statistics' nominal-95 % interval of a tail quantile (p99), on a generator with known truth.

    .venv/bin/python bench/load_quantiles.py > bench/results/load_quantiles.md

Each simulated experiment: `blocks` fresh servers of one arm (schedule positions 0, 2, 4, ... as in A/B/A/B), each
running the level with `requests` steady requests; per-request latency = the server's scale (block effect
N(0, tau^2) on the log scale, drift per schedule position, drift per level position inside the block with the level
rotated across blocks) x a draw from a stated shape (bracket.stats.load.simulate.SHAPES). The truth is the typical
server's p99 at the arm's mean position (exact quantile of the shape). The interval is the library's
(bracket.stats.load.intervals): each block's median-unbiased p99, then the t interval of their log mean (with the
drift line from 4 blocks). Coverage is over SIMS experiments per row; its Monte Carlo standard error at 95 % is
about 0.35 points.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from bracket.stats.load import intervals as iv
from bracket.stats.load import simulate as sim
from scipy import stats

SIMS = 4000
P = 0.99
CONFIDENCE = 0.95
SEED = 20261203


def coverage(rng, *, blocks, requests, shape, tau, drift, level_drift) -> tuple[float, float, float]:
    """(coverage, mean log bias of the centre, median relative half-width) over SIMS experiments."""
    q, pos, truth = sim.block_quantiles(
        rng,
        sims=SIMS,
        blocks=blocks,
        requests=requests,
        p=P,
        shape=shape,
        tau=tau,
        drift=drift,
        level_drift=level_drift,
    )
    center, se, df = iv.t_fit(np.log(q), pos, iv.uses_trend(blocks, pos))
    t = stats.t.ppf(0.5 + CONFIDENCE / 2, df)
    hit = np.abs(center - math.log(truth)) <= t * se
    return float(hit.mean()), float(np.mean(center - math.log(truth))), float(np.median(np.expm1(t * se)))


def main() -> int:
    rng = np.random.default_rng(SEED)
    t0 = time.process_time()
    print("# p99 intervals over blocks: coverage of the nominal-95 % interval\n")
    print(
        f"Command: `.venv/bin/python bench/load_quantiles.py > bench/results/load_quantiles.md` (seed {SEED}, "
        f"{SIMS} experiments per row).\n"
    )
    print(
        "n(1-p): expected requests beyond p99 in one block; MIN_TAIL in bracket.stats.load.frame is "
        "the smallest the library gives a p99 for.\n"
    )
    print("| shape | requests/block | n(1-p) | blocks | tau | drift/pos | coverage | bias (log) | half-width |")
    print("|---|---|---|---|---|---|---|---|---|")
    kept = []
    for shape in sim.SHAPES:
        for requests in (50, 100, 200, 400):
            for blocks in (3, 4, 6, 10):
                for tau, drift in ((0.03, 0.0), (0.10, 0.01)):
                    c, b, hw = coverage(
                        rng, blocks=blocks, requests=requests, shape=shape, tau=tau, drift=drift, level_drift=0.01
                    )
                    if requests * (1 - P) >= 1.0:
                        kept.append(c)
                    print(
                        f"| {shape} | {requests} | {requests * (1 - P):.1f} | {blocks} | {tau} | {drift} | "
                        f"{c:.3f} | {b:+.3f} | {hw:.1%} |"
                    )
    kept = np.array(kept)
    print(
        f"\nRows with n(1-p) >= 1 (what the library reports): coverage {kept.min():.3f}-{kept.max():.3f}, "
        f"mean {kept.mean():.3f}, {np.mean((kept >= 0.93) & (kept <= 0.97)):.0%} of {kept.size} rows in "
        f"0.93-0.97. Below it (n(1-p) = 0.5) a block's p99 is its largest request, biased low, and coverage "
        f"falls as blocks shrink the interval around the bias.\n"
    )
    print(f"CPU: {time.process_time() - t0:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
