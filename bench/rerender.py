"""Re-render a committed article from its raw records with the current analysis and article code.

    .venv/bin/python bench/rerender.py RESULTS_TAR EXPERIMENT_YAML DEST [LEDGER]

RESULTS_TAR holds results/NAME/ (raw/, schedule.csv, weights.json, ceiling.json, controls) as a
workflow run wrote it. Nothing is measured again: the records are tidied, analysed and rendered by
the same package functions the collect, analyze and report rules call, so an article committed
under bench/results/ follows the statistics and article code of the day. DEST receives the
article (article.md, article.html, figures/, tables/) and the recomputed runs.csv and stats.json.
EXPERIMENT_YAML is the experiment as it was measured (its arms, its design), validated as a run that
already happened; LEDGER is its corrections ledger (default: beside EXPERIMENT_YAML).
"""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
from pathlib import Path

import pandas as pd
from bracket import records
from bracket.article import render as report
from bracket.engines.provenance import read_block_metas
from bracket.experiment import config
from bracket.stats import analyze

ROOT = Path(__file__).resolve().parents[1]


def main(tar: Path, experiment: Path, dest: Path, ledger: Path | None = None) -> None:
    name = experiment.stem
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tar) as t:
            t.extractall(tmp, filter="data")
        res = Path(tmp) / "results" / name
        if not res.is_dir():
            raise SystemExit(f"{tar} holds no results/{name}/; name the experiment file it was measured with.")
        cfg = config.load(experiment, measured=True)  # as it ran: its records, not a plan, are judged
        blocks = sorted(res.glob("raw/block-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
        runs = records.tidy(records.read(blocks))
        runs.to_csv(res / "runs.csv", index=False)
        attempts = json.loads(json.dumps(records.failed_attempts(res / "raw"), default=str))
        metas = read_block_metas(sorted(res.glob("raw/block-*.meta.json")), cfg)  # old blocks: state by adapter
        ceiling = json.loads((res / "ceiling.json").read_text())
        weights = json.loads((res / "weights.json").read_text())
        schedule = pd.read_csv(res / "schedule.csv")
        stats = analyze(
            pd.read_csv(res / "runs.csv"),
            cfg,
            ceiling,
            metas=metas,
            weights=weights,
            schedule=schedule,
            name=name,
            failed_attempts=attempts,
        ).data()
        (res / "stats.json").write_text(json.dumps(stats, indent=1, allow_nan=False))
        dest.mkdir(parents=True, exist_ok=True)
        out = dest.resolve()
        report.render(
            ROOT / "notebooks" / "article.ipynb",
            out,
            {
                "runs_csv": str(res / "runs.csv"),
                "stats_json": str(res / "stats.json"),
                "meta_dir": str(res / "raw"),
                "block_files": json.dumps([str(p) for p in blocks]),
                "corrections_path": str(
                    (ledger or experiment.with_suffix("").with_suffix(".corrections.yaml")).resolve()
                ),
                "agreement_json": str(res / "agreement.json"),
                "arena_json": str(res / "arena.json"),
                "determinism_json": str(res / "determinism.json"),
                "verdict_paths": "[]",
                "out_dir": str(out),
            },
        )
        for f in ("runs.csv", "stats.json"):
            (out / f).write_text((res / f).read_text())
        (out / "article.ipynb").unlink(missing_ok=True)  # the executed notebook repeats the article with code
    print(f"{dest}: article.md, article.html, stats.json from {len(runs)} records of {len(blocks)} blocks")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]) if len(sys.argv) == 5 else None)
