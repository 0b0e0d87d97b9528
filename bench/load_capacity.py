"""The capacity answer and the per-level verdicts on a simulated server with a known batching law.

    .venv/bin/python bench/load_capacity.py > bench/results/load_capacity.md

Each run is one bracketed experiment (bracket.stats.load.simulate.bracketed_experiment): arms A and B, identical,
6 fresh-server blocks each in A/B/A/B order, every block running concurrency 1, 2, 4, 8, 16, 32 (closed loop, the
order rotated across blocks), a 5 s warm-up and a 30 s steady window per level; server effect sd 3 % per block, drift
0.5 % per block and per level position, per-request noise (TPOT sd 5 %, TTFT an exponential wait). The server's step
time is a + b x batch (a = 10 ms, b = 1.5 ms). Each run draws where the SLO is crossed: a true knee N* log-uniform
in [1.2, 28] users, and limits set so that the bound metric's true p99 equals its limit at N* (TPOT bound in half the
runs, TTFT in the other half, the other limit 1.5x looser). The true capacity is the highest level whose true p99
TTFT and TPOT meet the limits.

Capacity: the library's answer (bracket.stats.load.slo.capacity on the intervals of bracket.stats.load.intervals)
covers the truth when its [low, high) holds the true capacity. Verdicts: A vs B at each level
(bracket.stats.load.verdicts.compare_levels, Holm across the levels) on aggregate throughput and on p99 TPOT; any
"faster"/"slower" is false, the arms being identical.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from bracket.stats.load import simulate as sim
from bracket.stats.load.frame import block_table
from bracket.stats.load.intervals import arm_level_intervals
from bracket.stats.load.slo import Slo, capacity
from bracket.stats.load.verdicts import compare_levels, gain

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 250
SEED = 20261203
LEVELS = (1, 2, 4, 8, 16, 32)
EFFECT = 1.10
POWER_RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
METRICS = ("throughput_tok_s", "tpot_p99", "ttft_p99", "decode_rate_p50")


def true_capacity(server: sim.BatchServer, scale: float, slo: Slo) -> float | None:
    ok = [n for n in LEVELS if scale * server.true_tpot(n) <= slo.tpot_s and scale * server.true_ttft(n) <= slo.ttft_s]
    return float(max(ok)) if ok else None


def covers(cap, truth) -> bool:
    """[low, high) holds the true capacity (None: no level meets, which only low None holds)."""
    if truth is None:
        return cap.low is None
    return (cap.low is None or cap.low <= truth) and (cap.high is None or cap.high > truth)


def true_throughput(server: sim.BatchServer, scale: float, n: int) -> float:
    """N users x tokens per request / mean request time (renewal): TTFT mean prefill + step, TPOT mean
    step exp(sigma^2 / 2), all times the server's scale."""
    step = float(server.step_s(n))
    mean = server.prefill_s + step + (server.tokens - 1) * step * math.exp(server.sigma**2 / 2)
    return n * server.tokens / (scale * mean)


def _covers_metric(iv, arm: str, level: float, metric: str, truth: float) -> bool:
    r = iv[(iv["arm"] == arm) & (iv["level"] == level) & (iv["metric"] == metric)].iloc[0]
    return bool(r["low"] <= truth <= r["high"])


def one_run(rng: np.random.Generator, server: sim.BatchServer, i: int, effect: float = 1.0) -> dict:
    req, lv, truth = sim.bracketed_experiment(rng, server, levels=LEVELS, effect=effect)
    knee = math.exp(rng.uniform(math.log(1.2), math.log(28)))
    tpot_bound = i % 2 == 0
    ttft = truth["A"] * server.true_ttft(knee) * (1.0 if not tpot_bound else 1.5)
    tpot = truth["A"] * server.true_tpot(knee) * (1.0 if tpot_bound else 1.5)
    slo = Slo(ttft_s=float(ttft), tpot_s=float(tpot))
    tb = block_table(req, lv, slo)
    iv = arm_level_intervals(tb, metrics=list(METRICS))
    out = {"cover": [], "determined": [], "width": [], "cover_throughput": [], "cover_decode": []}
    for arm in ("A", "B"):
        cap = capacity(iv, slo, arm)
        t = true_capacity(server, truth[arm], slo)
        out["cover"].append(covers(cap, t))
        out["determined"].append(cap.determined)
        out["width"].append(
            (LEVELS.index(cap.high) if cap.high else len(LEVELS)) - (LEVELS.index(cap.low) if cap.low else -1)
        )
    for arm in ("A", "B"):
        for n in LEVELS:
            out["cover_throughput"].append(
                _covers_metric(iv, arm, n, "throughput_tok_s", true_throughput(server, truth[arm], n))
            )
            out["cover_decode"].append(
                _covers_metric(iv, arm, n, "decode_rate_p50", 1 / (truth[arm] * server.step_s(n)))
            )
    if effect != 1.0:
        for m in ("decode_rate_p50", "throughput_tok_s"):
            out["gain_" + m] = [
                r["ci_low"] is not None and r["ci_low"] <= effect <= r["ci_high"]
                for _, r in gain(tb, "A", "B", m, seed=i)
            ]
    for m in ("throughput_tok_s", "tpot_p99"):
        rows = compare_levels(tb, "A", "B", m, seed=i)
        out[m] = [r["verdict"] in ("faster", "slower") for _, r in rows]
        out[m + "_undetermined"] = [r["verdict"] == "undetermined" for _, r in rows]
        out[m + "_faster"] = [r["verdict"] == "faster" for _, r in rows]
    return out


def main() -> int:
    rng = np.random.default_rng(SEED)
    server = sim.BatchServer()
    t0 = time.process_time()
    runs = [one_run(rng, server, i) for i in range(RUNS)]
    cover = np.array([c for r in runs for c in r["cover"]])
    det = np.array([c for r in runs for c in r["determined"]])
    width = np.array([c for r in runs for c in r["width"]])
    print("# Capacity under an SLO and per-level verdicts, on a server with a known batching law\n")
    print(
        f"Command: `.venv/bin/python bench/load_capacity.py > bench/results/load_capacity.md` (seed {SEED}, "
        f"{RUNS} bracketed runs, each arm's capacity read separately: {cover.size} answers).\n"
    )
    print(
        f"Server: step = {server.a * 1e3:g} ms + {server.b * 1e3:g} ms x batch; levels {LEVELS}; 6 blocks per arm; "
        "SLO bound at p99.\n"
    )
    print("| quantity | value |")
    print("|---|---|")
    se = math.sqrt(cover.mean() * (1 - cover.mean()) / cover.size)
    print(f"| capacity interval [low, high) covers the true capacity | {cover.mean():.1%} (MC se {se:.1%}) |")
    print(f"| capacity determined (high the level right after low) | {det.mean():.1%} |")
    print(
        f"| levels spanned by [low, high) (1 = determined) | median {np.median(width):.0f}, "
        f"90th pct {np.percentile(width, 90):.0f} |"
    )
    for key, what in (("cover_throughput", "aggregate throughput"), ("cover_decode", "per-user decode rate (p50)")):
        c = np.array([x for r in runs for x in r[key]])
        print(f"| nominal-95 % interval of {what} covers its truth (all arms, levels) | {c.mean():.1%} ({c.size}) |")
    print(f"| coverage when determined | {cover[det].mean():.1%} ({det.sum()} answers) |")
    for m in ("throughput_tok_s", "tpot_p99"):
        per = np.array([r[m] for r in runs], dtype=float)
        und = np.array([r[m + "_undetermined"] for r in runs], dtype=float)
        print(
            f"| A vs identical B, {m}: false verdicts per level (Holm across {len(LEVELS)} levels) | "
            f"{per.mean():.1%} (max over levels {per.mean(axis=0).max():.1%}) |"
        )
        print(f"| A vs identical B, {m}: runs with any false verdict | {per.any(axis=1).mean():.1%} |")
        print(f"| A vs identical B, {m}: undetermined per level | {und.mean():.1%} |")
    print("\nPer level, false verdicts (throughput / p99 TPOT):\n")
    print("| level | " + " | ".join(str(n) for n in LEVELS) + " |")
    print("|---|" + "---|" * len(LEVELS))
    for m in ("throughput_tok_s", "tpot_p99"):
        per = np.array([r[m] for r in runs], dtype=float).mean(axis=0)
        print(f"| {m} | " + " | ".join(f"{x:.1%}" for x in per) + " |")
    power = [one_run(rng, server, RUNS + i, effect=EFFECT) for i in range(POWER_RUNS)]
    print(
        f'\nPower: B truly {EFFECT - 1:.0%} faster (its latencies / {EFFECT}), {POWER_RUNS} runs, "faster" per level:\n'
    )
    print("| level | " + " | ".join(str(n) for n in LEVELS) + " |")
    print("|---|" + "---|" * len(LEVELS))
    for m in ("throughput_tok_s", "tpot_p99"):
        per = np.array([r[m + "_faster"] for r in power], dtype=float).mean(axis=0)
        print(f"| {m} | " + " | ".join(f"{x:.1%}" for x in per) + " |")
    for m in ("decode_rate_p50", "throughput_tok_s"):
        c = np.array([x for r in power for x in r["gain_" + m]])
        print(
            f"\nGain B / A of {m} (bracket.stats.load.verdicts.gain, each level's own 95 % interval): covers the true "
            f"{EFFECT:g} in {c.mean():.1%} of {c.size} (runs x levels)."
        )
    print(f"\nCPU: {time.process_time() - t0:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
