"""Where the embedded engine's noise comes from: the same short sweep under each setting, side by side.

    flock /tmp/bracket-engine.lock .venv/bin/python studies/quiet_engine/quiet_engine.py [--rounds 3] [--runs 12] \
        [--settings today,inproc,...] [--out studies/quiet_engine/results/quiet_engine.md]

Every block is a fresh embedded vLLM CPU server (the default experiment's engine and tiny model),
the baseline arm, greedy fixed-length decoding (256 tokens), started and measured by bracket's own
block runner. The settings run interleaved, round after round (A B C D, then the reverse, ...), so
drift on the machine falls on all of them alike.

Per setting the table gives the median decode rate (completion tokens / wall time of the request,
bracket's rate), the within-block spread ((max - min) / median of a block's timed runs, median over
blocks) of that rate and of the tg rate (first to last token, which leaves out the time to first
token), the robust CV (1.4826 MAD / median), the between-block variation (sd of the log block
medians) and the drift (Theil-Sen slope of log block medians over the run, per block). The
decomposition columns: the time to first token as a share of the request, the share of requests
whose first token came in the last 10 % of the request (the stream delivered in one burst), the
warm-up trend (the first three timed runs of a block against the rest), and the share of the
within-block variance that is between prompts (one-way, pooled over blocks: deterministic
prompt-to-prompt variation, not noise); `*_same` settings send one prompt every run (a fresh
unique prefix each time), the floor that prompt-to-prompt variation cannot explain.

Settings (vLLM's CPU build, by default, runs the model in a worker process whose one OpenMP thread
is bound to core 0, and the engine core, the scheduler, in another process that busy-waits, with
sched_yield, for the worker's results on the other core, "reserved" for it):
- today: vLLM's own layout, the embedded engine's default (engine.inproc_worker: off).
- inproc: engine.inproc_worker: auto (opt-in): the worker runs inside the engine core's
  process (VLLM_ENABLE_V1_MULTIPROCESSING=0, which in vLLM 0.32 changes only the CPU executor for an
  API server, and OMP_NUM_THREADS set to the threads vLLM would have bound), so no process spins.
- *_same: the setting with one prompt for every run.
- *_nice: the setting with engine.nice: -10 (the server's and the client's autogroups, and processes,
  at nice -10: Linux shares the CPU fairly between sessions, whatever a process's own nice).
- *_warm5: the setting with five warmup runs instead of one (the warm-up trend).
- pinned, two_threads, pinned_warm3: the earlier round's settings (engine.pin_cpus: auto; two
  compute threads over both cores; pinned with three warmup runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))  # this checkout's package, not an installed one

from bracket import embedded, records  # noqa: E402
from bracket.block import runner  # noqa: E402
from bracket.experiment import config, design  # noqa: E402

CODE, ONE = "experiments/prompts/code.jsonl", "studies/quiet_engine/prompts/code_one.jsonl"

SETTINGS = {
    "today": {"engine": {"inproc_worker": "off"}},
    "inproc": {"engine": {"inproc_worker": "auto"}},
    "today_same": {"engine": {"inproc_worker": "off"}, "prompts": ONE},
    "inproc_same": {"engine": {"inproc_worker": "auto"}, "prompts": ONE},
    "today_nice": {"engine": {"inproc_worker": "off", "nice": -10}},
    "inproc_nice": {"engine": {"inproc_worker": "auto", "nice": -10}},
    "today_warm5": {"engine": {"inproc_worker": "off"}, "warmup": 5},
    "inproc_warm5": {"engine": {"inproc_worker": "auto"}, "warmup": 5},
    "pinned": {"engine": {"inproc_worker": "off", "pin_cpus": "auto"}},
    "two_threads": {"engine": {"inproc_worker": "off", "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}}},
    "pinned_warm3": {"engine": {"inproc_worker": "off", "pin_cpus": "auto"}, "warmup": 3},
}
DEFAULT = "today,inproc,today_same,inproc_same"


def experiment(setting: dict, runs: int, port: int) -> dict:
    return config.validate(
        {
            "title": "quiet engine bench",
            "engine": {"kind": "vllm", "launch": "native", "embedded": True, "port": port, **setting["engine"]},
            "arms": {"baseline": {}},
            "reference": "baseline",
            "workloads": {"code": {"prompts": setting.get("prompts", CODE)}},
            "design": {
                "kind": "abab",
                "rounds": 1,
                "runs_per_block": runs,
                "warmup_runs": setting.get("warmup", 1),
                "cooldown_s": 0,
                "seed": 1,
            },
            "request": {"max_tokens": 256, "temperature": 0, "unique_prefix": True},
        },
        source="quiet_engine",
    )


def run_block(name: str, setting: dict, position: int, rnd: int, runs: int, work: Path) -> tuple[list[dict], dict]:
    """One block through bracket's block runner: the setting is the product's (engine.* keys)."""
    cfg = experiment(setting, runs, 8191)
    model, python = str(ROOT / embedded.model_dir(cfg)), str(ROOT / embedded.engine_python(cfg))
    raw, meta = work / f"{name}-{position}.jsonl", work / f"{name}-{position}.meta.json"
    runner.run_block(
        cfg,
        f"quiet-{name}",
        design.Block(position, "baseline", rnd, 1000 + position),
        99,
        raw_path=raw,
        meta_path=meta,
        log_path=work / f"{name}-{position}.log",
        model=model,
        python=python,
        root=ROOT,
        lock_dir=work / "locks",
    )
    return [r for r in records.read([raw]) if not r.get("warmup")], json.loads(meta.read_text())


def _spread(v) -> float:
    return float((max(v) - min(v)) / np.median(v))


def _prompt_share(blocks: list[list[dict]]) -> float:
    """Share of the within-block sum of squares of log rate that lies between prompts (pooled over blocks)."""
    between = total = 0.0
    for recs in blocks:
        x = np.log([r["decode_tok_s"] for r in recs])
        ids = [r["prompt_id"] for r in recs]
        if len(set(ids)) < 2:
            return float("nan")
        total += float(((x - x.mean()) ** 2).sum())
        for p in set(ids):
            xp = x[[i for i, q in enumerate(ids) if q == p]]
            between += len(xp) * float((xp.mean() - x.mean()) ** 2)
    return between / total if total else float("nan")


def _chance_share(blocks: list[list[dict]]) -> float:
    """What _prompt_share is on average when prompts make no difference: (k - 1) / (n - 1) per block."""
    v = [(len({r["prompt_id"] for r in recs}) - 1) / (len(recs) - 1) for recs in blocks if len(recs) > 1]
    return float(np.mean(v)) if v else float("nan")


def summary(blocks: list[tuple[int, list[dict]]]) -> dict:
    dec = [np.array([r["decode_tok_s"] for r in recs]) for _, recs in blocks]
    tg = [np.array([r["tg_tok_s"] for r in recs if r.get("tg_tok_s")]) for _, recs in blocks]
    allrecs = [r for _, recs in blocks for r in recs]
    meds = np.array([np.median(v) for v in dec])
    pos = np.array([p for p, _ in blocks], dtype=float)
    spreads = [_spread(v) for v in dec]
    cvs = [1.4826 * np.median(np.abs(v - np.median(v))) / np.median(v) for v in dec]
    logm = np.log(meds)
    slopes = [(logm[j] - logm[i]) / (pos[j] - pos[i]) for i in range(len(pos)) for j in range(i + 1, len(pos))]
    warm = [np.median(v[:3]) / np.median(v[3:]) - 1 for v in dec if len(v) > 4]
    # run-to-run noise: the sd of log rate from successive differences (von Neumann), which slow shifts of
    # the machine's speed within a block barely touch, against the plain sd, which they raise
    sd = [float(np.std(np.log(v), ddof=1)) for v in dec if len(v) > 2]
    ssd = [float(np.sqrt(np.mean(np.diff(np.log(v)) ** 2) / 2)) for v in dec if len(v) > 2]
    return {
        "median": float(np.median(np.concatenate(dec))),
        "spread": float(np.median(spreads)),
        "spread_max": float(max(spreads)),
        "cv": float(np.median(cvs)),
        "tg_spread": float(np.median([_spread(v) for v in tg if len(v) > 1]))
        if any(len(v) > 1 for v in tg)
        else float("nan"),
        "ttft_share": float(np.median([r["ttft_s"] / r["wall_s"] for r in allrecs])),
        "late_first_token": float(np.mean([r["ttft_s"] / r["wall_s"] > 0.9 for r in allrecs])),
        "first3": float(np.median(warm)) if warm else float("nan"),
        "prompt_share": _prompt_share([recs for _, recs in blocks]),
        "prompt_share_chance": _chance_share([recs for _, recs in blocks]),
        "sd": float(np.median(sd)) if sd else float("nan"),
        "sd_successive": float(np.median(ssd)) if ssd else float("nan"),
        "between": float(np.std(logm, ddof=1)) if len(logm) > 1 else float("nan"),
        "drift": float(np.expm1(statistics.median(slopes))) if slopes else float("nan"),
        "block_medians": [round(float(m), 1) for m in meds],
        "block_spreads": [round(s, 3) for s in spreads],
    }


def _pct(x: float, fmt: str = ".1%") -> str:
    return "n/a" if x != x else format(x, fmt)


def table(rows: dict, base: str = "today") -> list[str]:
    b = rows.get(base)
    out = [
        "| setting | median tok/s | within-block spread (median, max) | spread, first to last token | within-block CV "
        "| sd of log rate: all, run to run |  TTFT share | first token in the last 10 % | first 3 runs vs rest | variance between prompts (by chance alone) "
        "| between blocks (sd of log medians) | drift per block | block medians |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, s in rows.items():
        rel = f" ({s['spread'] / b['spread']:.2f}x today)" if b and n != base and b["spread"] else ""
        out.append(
            f"| {n} | {s['median']:.1f} | {s['spread']:.1%}, {s['spread_max']:.1%}{rel} | "
            f"{_pct(s['tg_spread'])} | {s['cv']:.1%} | {s['sd']:.3f}, {s['sd_successive']:.3f} | {s['ttft_share']:.1%} | {s['late_first_token']:.0%} | "
            f"{_pct(s['first3'], '+.1%')} | {_pct(s['prompt_share'], '.0%')} ({_pct(s['prompt_share_chance'], '.0%')}) | {s['between']:.1%} | "
            f"{s['drift']:+.2%} | {', '.join(map(str, s['block_medians']))} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--settings", default=DEFAULT)
    ap.add_argument("--out", type=Path, default=ROOT / "studies/quiet_engine/results/quiet_engine.md")
    ap.add_argument(
        "--table-from", type=Path, help="print the table of a saved run's JSON (its runs) again; runs nothing"
    )
    a = ap.parse_args()
    if a.table_from:
        saved = json.loads(a.table_from.read_text())
        rows = {}
        for n, row in saved.items():
            blocks: dict = {}
            for r in row["runs"]:
                blocks.setdefault(r["block"], []).append(r)
            rows[n] = summary(sorted(blocks.items()))
        print("\n".join(table(rows)))
        return
    names = a.settings.split(",")
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting(s) {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    t0, load0 = time.time(), os.getloadavg()
    per: dict[str, list] = {n: [] for n in names}
    layouts: dict[str, set] = {n: set() for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        position = 0
        for r in range(a.rounds):
            for n in names if r % 2 == 0 else names[::-1]:
                recs, meta = run_block(n, SETTINGS[n], position, r + 1, a.runs, Path(tmp))
                ok = [x for x in recs if x.get("decode_tok_s") and not records.validity(x)]
                per[n].append((position, ok))
                layouts[n].add(
                    json.dumps({k: meta.get(k) for k in ("engine_layout", "pinning", "priority")}, sort_keys=True)
                )
                print(
                    f"block {position}: {n}: median {np.median([x['decode_tok_s'] for x in ok]):.1f} tok/s over "
                    f"{len(ok)} runs; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                position += 1
    load1 = os.getloadavg()
    rows = {n: summary(b) for n, b in per.items()}
    for n in rows:
        rows[n]["provenance"] = [json.loads(x) for x in sorted(layouts[n])]
        rows[n]["runs"] = [
            {k: x.get(k) for k in ("block", "run", "prompt_id", "decode_tok_s", "tg_tok_s", "ttft_s", "wall_s")}
            for _, recs in per[n]
            for x in recs
        ]
    cmd = (
        f"flock /tmp/bracket-engine.lock .venv/bin/python studies/quiet_engine/quiet_engine.py --rounds {a.rounds} --runs {a.runs}"
        + (f" --settings {a.settings}" if a.settings != DEFAULT else "")
    )
    lines = [
        "# A quiet embedded engine: where the noise comes from",
        "",
        f"Generated by `{cmd}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}: {len(names)} settings "
        f"x {a.rounds} rounds, interleaved, each block a fresh embedded vLLM CPU server (baseline arm, 256 greedy "
        f"tokens, 1 warmup and {a.runs} timed runs). {os.cpu_count()} cores; load average (1 min) "
        f"{load0[0]:.2f} before, {load1[0]:.2f} after; {time.time() - t0:.0f} s.",
        "",
        *table(rows),
        "",
    ]
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
