"""The article's inputs: the experiment's files read once into `Data`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bracket import records
from bracket.controls.corrections import load_corrections
from bracket.experiment import config
from bracket.stats.contract import current


@dataclass
class Data:
    """Everything the article reads; nothing else is consulted and no server is contacted."""

    name: str
    cfg: dict
    runs: pd.DataFrame
    stats: dict
    weights: dict | None
    ceiling: dict | None
    schedule: pd.DataFrame
    metas: dict  # block position -> meta dict
    raw: list  # raw records (with output_text)
    corrections: list | None
    corrections_path: str
    model_dir: str | None
    model_build: dict | None
    out_dir: Path
    failed_attempts: list = field(default_factory=list)  # meta of attempts set aside in raw/failed/

    @property
    def reference(self) -> str:
        return self.stats.get("reference") or self.cfg.get("reference")

    @property
    def workloads(self) -> list[str]:
        """Workloads in the experiment's order, then any others found in the runs."""
        seen = list(self.cfg.get("workloads", {}))
        return [w for w in seen if w in set(self.runs["workload"])] + sorted(
            set(self.runs["workload"].astype(str)) - set(seen)
        )

    @property
    def arms(self) -> list[str]:
        seen = list(self.cfg.get("arms", {}))
        return seen + sorted(set(self.runs["arm"].astype(str)) - set(seen))

    def cell(self, arm: str, workload: str) -> dict | None:
        return next((c for c in self.stats.get("cells", []) if c["arm"] == arm and c["workload"] == workload), None)

    def comparison(self, arm: str, workload: str) -> dict | None:
        return next(
            (c for c in self.stats.get("comparisons", []) if c["candidate"] == arm and c["workload"] == workload), None
        )

    def label(self, arm: str) -> str:
        lab = (self.cfg.get("arms", {}).get(arm) or {}).get("label")
        return f"{arm} ({lab})" if lab and lab != arm else arm


def _read_json(path) -> dict | None:
    p = Path(path) if path else None
    return json.loads(p.read_text()) if p and p.is_file() else None


def load(
    experiment_path,
    runs_csv,
    stats_json,
    weights_json,
    ceiling_json,
    schedule_csv,
    meta_dir,
    corrections_path,
    out_dir,
    *,
    block_files=None,
    attempts_json=None,
    model_dir=None,
) -> Data:
    """Read one experiment's files (the report rule's inputs) into a `Data`.

    The report rule names every file: `block_files` (the raw records of the blocks the schedule
    ran; their provenance is the `.meta.json` beside each), `attempts_json` (the failed attempts,
    written by the collect rule) and `model_dir` (the model the experiment served, as the workflow
    resolved it). Without them (the notebook on its own, the fixture) the blocks and attempts are
    found in `meta_dir`, and the model's build record at meta_dir/model-build.json.
    """
    cfg = config.load(experiment_path, measured=True)  # the article reads a run that happened
    runs = pd.read_csv(runs_csv)
    for col in ("valid", "warmup"):
        if col in runs:
            runs[col] = runs[col].map(lambda v: str(v).strip().lower() in ("true", "1"))
    meta_dir = Path(meta_dir)
    if block_files is None:
        block_files = sorted(meta_dir.glob("block-*.jsonl"), key=lambda q: int(q.stem.split("-")[1]))
    block_files = [Path(p) for p in block_files]
    metas = {}
    for jsonl in block_files:
        p = jsonl.with_name(jsonl.name.replace(".jsonl", ".meta.json"))
        if p.is_file():
            m = json.loads(p.read_text())
            metas[int(m.get("block", jsonl.stem.split("-")[1]))] = m
    raw = records.read(block_files)
    failed_attempts = (_read_json(attempts_json) or []) if attempts_json else records.failed_attempts(meta_dir)
    build = None
    # A relative model path is relative to the workflow's root (experiments/..).
    roots = [Path(experiment_path).resolve().parent.parent, Path.cwd()]
    dirs = (
        [Path(model_dir)]
        if model_dir and Path(model_dir).is_absolute()
        else [r / model_dir for r in roots]
        if model_dir
        else []
    )
    for cand in [p / "build.json" for p in dirs] + [meta_dir / "model-build.json"]:
        if cand.is_file():
            build = json.loads(cand.read_text())
            break
    name = Path(experiment_path).stem
    ceiling = _read_json(ceiling_json)
    stats = current(json.loads(Path(stats_json).read_text()), cfg=cfg, runs=runs, ceiling=ceiling)
    return Data(
        name=name,
        cfg=cfg,
        runs=runs,
        stats=stats,
        weights=_read_json(weights_json),
        ceiling=ceiling,
        schedule=pd.read_csv(schedule_csv),
        metas=metas,
        raw=raw,
        corrections=load_corrections(corrections_path),
        corrections_path=str(corrections_path or ""),
        model_dir=model_dir or None,
        model_build=build,
        out_dir=Path(out_dir),
        failed_attempts=failed_attempts,
    )
