"""The article's inputs: stats.json (every number and judgement it states), runs.csv (the raw tables), and the
blocks' records where they are there (the models' outputs), read once into `Data`. No experiment file, byte
account, ceiling, block meta, failed attempts or model build record is read: stats.json states them
(`experiment`, `physics.weights`, `physics.ceiling`, `provenance`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bracket import records
from bracket.controls.corrections import load_corrections
from bracket.stats.contract import require, upgrade
from bracket.stats.results import Stats
from bracket.stats.stated import SCHEDULE_COLUMNS


@dataclass
class Data:
    """Everything the article reads; nothing else is consulted and no server is contacted."""

    name: str
    runs: pd.DataFrame
    stats: dict  # stats.json as JSON data (`results` is it typed): for the modules not yet reading `results`
    schedule: pd.DataFrame  # the planned blocks, from stats.json's experiment.schedule
    raw: list  # raw records (with output_text), for the outputs' excerpts
    corrections: list | None
    corrections_path: str
    out_dir: Path

    @property
    def results(self) -> Stats:
        """stats.json typed and frozen (bracket.stats.results.Stats): what the article reads, by attribute. The
        typed view of `stats` (the JSON data `load` read through bracket.stats.contract.upgrade), so a `Data` made
        with other stats (a test's) is read as those."""
        return typed(self.stats)

    @property
    def experiment(self) -> dict:
        """The experiment as stats.json states it (bracket.stats.stated.experiment)."""
        return self.stats.get("experiment") or {}

    @property
    def weights(self) -> dict | None:
        """The byte account as stats.json states it (physics.weights; None without one)."""
        return (self.stats.get("physics") or {}).get("weights")

    @property
    def ceiling(self) -> dict | None:
        """The ceiling as stats.json states it (physics.ceiling; None without one)."""
        return (self.stats.get("physics") or {}).get("ceiling")

    @property
    def provenance(self) -> dict:
        """What ran as stats.json states it (bracket.stats.provenance): blocks, served, hardware, arms, failed
        attempts, the model's build record."""
        return self.stats.get("provenance") or {}

    @property
    def reference(self) -> str:
        return self.stats.get("reference") or self.experiment.get("reference")

    @property
    def workloads(self) -> list[str]:
        """Workloads in the experiment's order, then any others found in the runs."""
        seen = list(self.experiment.get("workloads") or [])
        return [w for w in seen if w in set(self.runs["workload"])] + sorted(
            set(self.runs["workload"].astype(str)) - set(seen)
        )

    @property
    def arms(self) -> list[str]:
        seen = [a["arm"] for a in self.experiment.get("arms") or []]
        return seen + sorted(set(self.runs["arm"].astype(str)) - set(seen))

    def arm_config(self, arm: str) -> dict:
        """The arm's settings as stats.json states them: label, speculative, args, server ({} for an arm the
        experiment does not name)."""
        return next((a for a in self.experiment.get("arms") or [] if a["arm"] == arm), {})

    def cell(self, arm: str, workload: str) -> dict | None:
        return next((c for c in self.stats.get("cells", []) if c["arm"] == arm and c["workload"] == workload), None)

    def comparison(self, arm: str, workload: str) -> dict | None:
        return next(
            (c for c in self.stats.get("comparisons", []) if c["candidate"] == arm and c["workload"] == workload), None
        )

    def label(self, arm: str) -> str:
        lab = self.arm_config(arm).get("label")
        return f"{arm} ({lab})" if lab and lab != arm else arm


_TYPED: OrderedDict[int, tuple[dict, Stats]] = OrderedDict()


def typed(stats: dict) -> Stats:
    """`stats` (stats.json's JSON data, today's contract) as a `Stats`, validated once per dict (the last few kept)."""
    hit = _TYPED.get(id(stats))
    if hit is None or hit[0] is not stats:
        hit = (stats, Stats.model_validate(stats))
        _TYPED[id(stats)] = hit
        while len(_TYPED) > 8:
            _TYPED.popitem(last=False)
    return hit[1]


def _read_json(path) -> dict | None:
    p = Path(path) if path else None
    return json.loads(p.read_text()) if p and p.is_file() else None


def load(
    runs_csv,
    stats_json,
    meta_dir,
    corrections_path,
    out_dir,
    *,
    block_files=None,
) -> Data:
    """Read one experiment's files (the report rule's inputs) into a `Data`.

    stats.json states every number and judgement, the experiment, byte account and ceiling as the article
    names them, and what ran (`provenance`: the blocks' meta, the failed attempts, the model's build record)
    (read through bracket.stats.contract.upgrade into a `Stats`; a file before version 4 stops here with the
    command that analyses it again, bracket.stats.contract.require); runs.csv gives the raw tables. The blocks' raw records give the outputs'
    excerpts where they are there: `block_files` (the blocks the schedule ran), else every block-K.jsonl in
    `meta_dir` (the raw folder: the notebook on its own, the fixture).
    """
    runs = pd.read_csv(runs_csv)
    for col in ("valid", "warmup"):
        if col in runs:
            runs[col] = runs[col].map(lambda v: str(v).strip().lower() in ("true", "1"))
    results = require(upgrade(json.loads(Path(stats_json).read_text()), runs=runs), stats_json)
    stats = results.data()
    _TYPED[id(stats)] = (stats, results)
    if block_files is None:
        block_files = sorted(Path(meta_dir).glob("block-*.jsonl"), key=lambda q: int(q.stem.split("-")[1]))
    raw = records.read([Path(p) for p in block_files])
    plan = [row.model_dump() for row in results.experiment.schedule]
    return Data(
        name=results.experiment.name or Path(stats_json).parent.name,
        runs=runs,
        stats=stats,
        schedule=pd.DataFrame(plan, columns=list(SCHEDULE_COLUMNS)),
        raw=raw,
        corrections=load_corrections(corrections_path),
        corrections_path=str(corrections_path or ""),
        out_dir=Path(out_dir),
    )
