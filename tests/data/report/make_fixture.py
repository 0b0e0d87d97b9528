"""Regenerate the report fixture tests/data/report/probe/ from real raw records.

The records are three blocks measured on the embedded engine (vLLM's CPU build serving the
tiny trained model): baseline, ngram_4, ngram_8, one round, workloads code / prose / chat.
Everything else (runs.csv, stats.json, weights.json, ceiling.json, schedule.csv) is computed
from them and from the model's tensor headers with the package, exactly as the workflow does.

    .venv/bin/python tests/data/report/make_fixture.py [--raw /tmp/probe/out2] [--model /tmp/probe/model300]
    .venv/bin/python tests/data/report/make_fixture.py --stats-only   # stats.json again, from the committed files

The model itself is not committed; its build record (build.json) is copied beside the raw
records (raw/model-build.json), and stats.json states it with the blocks' provenance, as rule analyze
does from the model's folder, so the article can show how the model was made.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd
import yaml
from bracket import records
from bracket.experiment import config, design
from bracket.physics import ceiling, weights
from bracket.stats import analyze

HERE = Path(__file__).resolve().parent
OUT = HERE / "probe"

EXPERIMENT = {
    "title": "ngram draft budget on the embedded engine (fixture)",
    "question": "Which ngram draft budget decodes fastest on a 2-core CPU, and does it depend on the workload?",
    "engine": {"kind": "vllm", "embedded": True, "port": 8011},
    "arms": {
        "baseline": {"label": "no speculation"},
        "ngram_4": {"speculative": {"method": "ngram", "draft_tokens": 4}},
        "ngram_8": {"speculative": {"method": "ngram", "draft_tokens": 8}},
    },
    "reference": "baseline",
    "workloads": {
        "code": {"prompts": "experiments/prompts/code.jsonl"},
        "prose": {"prompts": "experiments/prompts/prose.jsonl"},
        "chat": {"prompts": "experiments/prompts/chat.jsonl"},
    },
    "design": {"kind": "abab", "rounds": 1, "runs_per_block": 3, "warmup_runs": 1, "cooldown_s": 0, "seed": 1},
    "request": {"max_tokens": 256},
    "analysis": {"bootstrap_resamples": 500},
    # The CPU copy probe (bracket.physics.bandwidth.probe_cpu) measured 7.2 GB/s median, 10.1 best,
    # on the machine that ran these blocks; stated here so the fixture does not change with
    # the machine that regenerates it.
    "hardware": {"probe_bandwidth": False, "bandwidth_gbps": 7.2},
}

# An example entry, so the fixture exercises the ledger; its claim is one a quick reading of the
# code workload alone would make, and its correction is true of these runs.
CORRECTIONS = [
    {
        "date": "2026-11-29",
        "claim": "Example entry: ngram_8 is the fastest arm on every workload.",
        "correction": "ngram_8 has the highest median on code only; on prose and chat ngram_4 does.",
        "evidence": "stats.json best; the raw tables per workload below.",
    },
]


def main(raw_dir: Path, model_dir: Path) -> None:
    cfg = config.validate(EXPERIMENT, source="fixture")
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "raw").mkdir(parents=True)
    (OUT / "probe.yaml").write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    (OUT / "probe.corrections.yaml").write_text(yaml.safe_dump(CORRECTIONS, sort_keys=False))
    blocks = sorted(raw_dir.glob("block-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    for p in blocks:
        shutil.copy(p, OUT / "raw" / p.name)
        meta = p.with_suffix(".meta.json")
        if meta.exists():
            shutil.copy(meta, OUT / "raw" / meta.name)
    runs = records.tidy(records.read(OUT / "raw" / p.name for p in blocks))
    runs.to_csv(OUT / "runs.csv", index=False)
    design.write(design.from_config(cfg), OUT / "schedule.csv")
    weights.write_json(model_dir, OUT / "weights.json", cfg)
    ceil = ceiling.write_json(OUT / "weights.json", cfg, OUT / "ceiling.json")
    if (model_dir / "build.json").exists():
        shutil.copy(model_dir / "build.json", OUT / "raw" / "model-build.json")
    stats = _analyze(runs, cfg, ceil)
    (OUT / "stats.json").write_text(json.dumps(stats, indent=1, allow_nan=False) + "\n")
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"{OUT}: {len(runs)} runs, {size / 1e3:.0f} kB")


def _analyze(runs, cfg: dict, ceil: dict) -> dict:
    """As rule analyze: the byte account, the schedule, the experiment's name, the blocks' provenance, the failed
    attempts and the model's build record go in too (stats.json states them). The model's folder is not named
    (it was a temporary one), as the notebook on its own did not name it."""
    acct = json.loads((OUT / "weights.json").read_text())
    schedule = pd.read_csv(OUT / "schedule.csv")
    metas = [json.loads(p.read_text()) for p in sorted((OUT / "raw").glob("block-*.meta.json"))]
    build = OUT / "raw" / "model-build.json"
    return analyze(
        runs,
        cfg,
        ceil,
        metas=metas,
        weights=acct,
        schedule=schedule,
        name="probe",
        failed_attempts=records.failed_attempts(OUT / "raw"),
        model_build=json.loads(build.read_text()) if build.is_file() else None,
    ).data()


def stats_only() -> None:
    """stats.json from the committed raw records and ceiling.json, as `main` computes it: after a change
    to the analysis or to stats.json's contract, without the original records or the model."""
    cfg = config.validate(EXPERIMENT, source="fixture")
    blocks = sorted((OUT / "raw").glob("block-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    runs = records.tidy(records.read(blocks))
    ceil = json.loads((OUT / "ceiling.json").read_text())
    stats = _analyze(runs, cfg, ceil)
    (OUT / "stats.json").write_text(json.dumps(stats, indent=1, allow_nan=False) + "\n")
    print(f"{OUT / 'stats.json'}: {len(runs)} runs")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", type=Path, default=Path("/tmp/probe/out2"))
    ap.add_argument("--model", type=Path, default=Path("/tmp/probe/model300"))
    ap.add_argument("--stats-only", action="store_true", help="recompute stats.json from the committed files")
    a = ap.parse_args()
    if a.stats_only:
        stats_only()
    else:
        main(a.raw, a.model)
