"""How steady is this machine's CPU itself? Fixed work, timed back to back, with no server at all.

    flock /tmp/bracket-engine.lock .venv/bin/python studies/quiet_engine/cpu_steadiness.py [--seconds 120] [--unit-s 0.8] \
        [--runs 12] [--out studies/quiet_engine/results/cpu_steadiness.md]

An engine cannot be steadier than the cores it runs on. This probe runs one fixed unit of work over
and over on each core at once (one process pinned per core, one thread each, as the embedded
engine keeps both cores busy), and reads each unit's duration as a rate. Three kinds of work:
`compute` (a float32 matrix product that stays in a core's own caches), `cache` (a sum over 8 MiB,
the size of the embedded model's weights: beyond a core's L2, within a large shared L3) and
`memory` (a sum over an array much larger than the last-level cache, the way decoding a large
model streams its weights). The unit is calibrated to
last about as long as one of the quiet bench's requests (256 tokens at about 300 tok/s: 0.8 s), and
consecutive units are grouped into pseudo-blocks of `--runs`, so the columns read like
studies/quiet_engine/quiet_engine.py's: the within-block spread ((max - min) / median), the sd of the log rate
over all units and from successive differences (run to run: slow steps cancel), and the sd of the
log medians of the pseudo-blocks (between blocks). If fixed work on an otherwise idle machine
spreads as much as the engine's requests do, the rest of the engine's spread is the machine's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("compute", "cache", "memory")


def _work(kind: str):
    import numpy as np

    if kind == "compute":
        a = np.random.default_rng(0).random((192, 192), dtype=np.float32)
        return lambda: float((a @ a)[0, 0])
    if kind == "cache":  # 8 MiB: the tiny model's weights (8.4 MB) are this size; beyond L2, within a large L3
        mid = np.ones(8 * 2**20 // 8)
        return lambda: float(mid.sum())
    big = np.ones(64 * 2**20 // 8)  # 64 MiB of float64, well beyond any last-level cache here
    return lambda: float(big.sum())


def _calibrate(step, unit_s: float) -> int:
    n, t = 1, 0.0
    while t < unit_s / 4:
        n *= 2
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        t = time.perf_counter() - t0
    return max(1, round(n * unit_s / t))


def _worker(core: int, kind: str, unit_s: float, seconds: float, start_at: float, q) -> None:
    os.sched_setaffinity(0, {core})
    step = _work(kind)
    reps = _calibrate(step, unit_s)
    while time.time() < start_at:
        time.sleep(0.01)
    units = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        units.append(time.perf_counter() - t0)
    q.put({"core": core, "kind": kind, "reps": reps, "durations": units})


def probe(kind: str, seconds: float, unit_s: float, cores: list[int]) -> list[dict]:
    """Every core of `cores` runs `kind` units at once for `seconds`; each core's unit durations."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 2 + 0.5 * len(cores)  # after every worker has calibrated
    procs = [ctx.Process(target=_worker, args=(c, kind, unit_s, seconds, start_at, q)) for c in cores]
    for p in procs:
        p.start()
    out = [q.get() for _ in procs]
    for p in procs:
        p.join()
    return sorted(out, key=lambda r: r["core"])


def summary(durations: list[float], runs: int) -> dict:
    import numpy as np

    rate = 1 / np.asarray(durations)
    log = np.log(rate)
    blocks = [rate[i : i + runs] for i in range(0, len(rate) - runs + 1, runs)]
    spreads = [(b.max() - b.min()) / np.median(b) for b in blocks]
    med = np.log([np.median(b) for b in blocks])
    return {
        "units": len(rate),
        "blocks": len(blocks),
        "spread_median": float(np.median(spreads)),
        "spread_max": float(np.max(spreads)),
        "sd_log": float(np.std(log, ddof=1)),
        "sd_log_run_to_run": float(np.std(np.diff(log), ddof=1) / np.sqrt(2)),
        "between_blocks": float(np.std(med, ddof=1)) if len(med) > 1 else float("nan"),
        "slowest_vs_median": float(rate.min() / np.median(rate) - 1),
    }


def table(results: list[dict], runs: int) -> list[str]:
    lines = [
        "| work | core | units | within-block spread (median, max) | sd of log rate: all, run to run "
        "| between blocks (sd of log medians) | slowest unit vs median |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = summary(r["durations"], runs)
        lines.append(
            f"| {r['kind']} | {r['core']} | {s['units']} ({s['blocks']} blocks) "
            f"| {s['spread_median']:.1%}, {s['spread_max']:.1%} | {s['sd_log']:.3f}, {s['sd_log_run_to_run']:.3f} "
            f"| {s['between_blocks']:.1%} | {s['slowest_vs_median']:+.1%} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120, help="per kind of work")
    ap.add_argument("--unit-s", type=float, default=0.8)
    ap.add_argument("--runs", type=int, default=12, help="units per pseudo-block")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", type=Path, default=ROOT / "studies/quiet_engine/results/cpu_steadiness.md")
    a = ap.parse_args()
    os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    cores = sorted(os.sched_getaffinity(0))
    started, load0 = dt.datetime.now(dt.timezone.utc), os.getloadavg()[0]
    t0 = time.time()
    results = []
    for kind in a.kinds.split(","):
        if kind not in KINDS:
            raise SystemExit(f"unknown kind {kind!r}: choose from {', '.join(KINDS)}")
        results += probe(kind, a.seconds, a.unit_s, cores)
    head = (
        f"Generated by `.venv/bin/python studies/quiet_engine/cpu_steadiness.py --seconds {a.seconds:g} --unit-s {a.unit_s:g} "
        f"--runs {a.runs}` on {started:%Y-%m-%d %H:%M} UTC: {len(cores)} cores, one pinned process each, "
        f"{a.seconds:g} s per kind of work; load average (1 min) {load0:.2f} before, {os.getloadavg()[0]:.2f} after; "
        f"{time.time() - t0:.0f} s."
    )
    text = "\n".join(
        ["# Fixed work on this machine's cores, timed back to back", "", head, "", *table(results, a.runs), ""]
    )
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    a.out.with_suffix(".json").write_text(json.dumps({"runs": a.runs, "unit_s": a.unit_s, "results": results}))


if __name__ == "__main__":
    main()
