"""Where the embedded engine's noise comes from: the same short sweep under each setting, side by side.

    .venv/bin/python bench/quiet_engine.py [--rounds 3] [--runs 8] [--out bench/results/quiet_engine.md]

Every block is a fresh embedded vLLM CPU server (the default experiment's engine and tiny model),
the baseline arm, the `code` workload, greedy fixed-length decoding, started and measured by
bracket's own block runner. The settings run interleaved, round after round (A B C D, then the
reverse, ...), so drift on the machine falls on all of them alike. Per setting the table gives the
median decode rate, the within-block spread ((max - min) / median of a block's timed runs, median
over blocks) and its robust CV (1.4826 MAD / median), the between-block variation (sd of the log
block medians), and the drift (Theil-Sen slope of log block medians over the run, per block).

Settings (what the engine does by default: vLLM's CPU build binds its one OpenMP compute thread to
core 0 and reserves the other core "for other processes", which nothing then uses on purpose):
- today: engine.pin_cpus: off; the API server, the engine's other threads and bracket's client
  float over both cores.
- pinned: engine.pin_cpus: auto (bracket.pinning): the server's processes start on the reserved
  core (taskset), the compute thread is bound to its own core, and bracket's client runs on the
  reserved core too.
- two_threads: VLLM_CPU_OMP_THREADS_BIND=0-1, two compute threads over both cores, nothing pinned.
- pinned_warm3: pinned, with three warmup runs instead of one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bracket import config, design, embedded, records, runner

ROOT = Path(__file__).resolve().parents[1]


def _cores() -> tuple[str, str]:
    """(compute core, reserved core) as vLLM's auto binding picks them on a one-node machine."""
    cpus = sorted(os.sched_getaffinity(0))
    return str(cpus[0]), ",".join(map(str, cpus[1:])) or str(cpus[0])


SETTINGS = {
    "today": {"env": {}, "pin": "off", "warmup": 1},
    "pinned": {"env": {}, "pin": "auto", "warmup": 1},
    "two_threads": {"env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, "pin": "off", "warmup": 1},
    "pinned_warm3": {"env": {}, "pin": "auto", "warmup": 3},
}


def experiment(setting: dict, runs: int, port: int) -> dict:
    return config.validate({
        "title": "quiet engine bench", "engine": {"kind": "vllm", "launch": "native", "embedded": True, "port": port,
                                                   "env": setting["env"], "pin_cpus": setting["pin"]},
        "arms": {"baseline": {}}, "reference": "baseline",
        "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}},
        "design": {"kind": "abab", "rounds": 1, "runs_per_block": runs, "warmup_runs": setting["warmup"],
                   "cooldown_s": 0, "seed": 1},
        "request": {"max_tokens": 256, "temperature": 0, "unique_prefix": True},
    }, source="quiet_engine")


def run_block(name: str, setting: dict, position: int, rnd: int, runs: int, work: Path) -> list[dict]:
    """One block through bracket's block runner: the setting's pinning is the product's (engine.pin_cpus)."""
    cfg = experiment(setting, runs, 8191)
    model, python = str(ROOT / embedded.model_dir(cfg)), str(ROOT / embedded.engine_python(cfg))
    raw = work / f"{name}-{position}.jsonl"
    runner.run_block(cfg, f"quiet-{name}", design.Block(position, "baseline", rnd, 1000 + position), 99,
                     raw_path=raw, meta_path=work / f"{name}-{position}.meta.json",
                     log_path=work / f"{name}-{position}.log", model=model, python=python, root=ROOT,
                     lock_dir=work / "locks")
    return [r for r in records.read([raw]) if not r.get("warmup")]


def summary(blocks: list[tuple[int, list[float]]], late: float) -> dict:
    meds = np.array([np.median(v) for _, v in blocks])
    pos = np.array([p for p, _ in blocks], dtype=float)
    spreads = [(max(v) - min(v)) / np.median(v) for _, v in blocks]
    cvs = [1.4826 * np.median(np.abs(np.array(v) - np.median(v))) / np.median(v) for _, v in blocks]
    logm = np.log(meds)
    slopes = [(logm[j] - logm[i]) / (pos[j] - pos[i]) for i in range(len(pos)) for j in range(i + 1, len(pos))]
    return {"median": float(np.median(np.concatenate([v for _, v in blocks]))),
            "spread": float(np.median(spreads)), "spread_max": float(max(spreads)), "cv": float(np.median(cvs)),
            "between": float(np.std(logm, ddof=1)) if len(logm) > 1 else float("nan"),
            "drift": float(np.expm1(statistics.median(slopes))) if slopes else float("nan"),
            "block_medians": [round(float(m), 1) for m in meds], "late_first_token": late}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/quiet_engine.md")
    a = ap.parse_args()
    names = a.settings.split(",")
    t0, load0 = time.time(), os.getloadavg()
    per: dict[str, list] = {n: [] for n in names}
    late: dict[str, list] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        position = 0
        for r in range(a.rounds):
            for n in (names if r % 2 == 0 else names[::-1]):
                recs = run_block(n, SETTINGS[n], position, r + 1, a.runs, Path(tmp))
                ok = [x for x in recs if x.get("decode_tok_s") and not records.validity(x)]
                vals = [x["decode_tok_s"] for x in ok]
                per[n].append((position, vals))
                late[n] += [x["ttft_s"] / x["wall_s"] > 0.9 for x in ok]
                print(f"block {position}: {n}: median {np.median(vals):.1f} tok/s over {len(vals)} runs", flush=True)
                position += 1
    rows = {n: summary(b, float(np.mean(late[n]))) for n, b in per.items()}
    base = rows.get("today")
    lines = ["# A quiet embedded engine: where the noise comes from", "",
             f"Generated by `.venv/bin/python bench/quiet_engine.py --rounds {a.rounds} --runs {a.runs}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}: {len(names)} settings x {a.rounds} rounds, "
             f"interleaved, each block a fresh embedded vLLM CPU server (baseline arm, code workload, 256 greedy "
             f"tokens, {a.runs} timed runs). {os.cpu_count()} cores; load average {load0[0]:.1f} before, "
             f"{os.getloadavg()[0]:.1f} after; {time.time() - t0:.0f} s.", "",
             "| setting | median tok/s | within-block spread (median, max) | within-block CV | between blocks (sd of log medians) | drift per block | first token in the last 10 % of the request | block medians |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for n, s in rows.items():
        rel = f" ({s['spread'] / base['spread']:.2f}x today)" if base and n != "today" and base["spread"] else ""
        lines.append(f"| {n} | {s['median']:.1f} | {s['spread']:.1%}, {s['spread_max']:.1%}{rel} | {s['cv']:.1%} | "
                     f"{s['between']:.1%} | {s['drift']:+.2%} | {s['late_first_token']:.0%} | "
                     f"{', '.join(map(str, s['block_medians']))} |")
    a.out.write_text("\n".join(lines) + "\n")
    (a.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
