"""The analysis step of the load workloads: the blocks' raw records -> one `WorkloadLoad` per load workload
(bracket.stats.results.load), for stats.json's `load`.

Each load workload is analysed alone (bracket.stats.load.analyze.analyze_load) on its own records: its requests
(`kind: load_request`) and level summaries (`kind: load_level`), which the runs table leaves out (records.tidy).
Every other arm is compared with the experiment's reference at each level; an arm with speculative settings also
gets the speculation gain over the reference per level. The SLO is the one the workload states (recorded on its
level summaries). The batch ceiling is drawn where ceiling.json knows the bandwidth and the bytes a decode step
reads (a dense model's weights, read once per step for the whole batch).
"""

from __future__ import annotations

from pathlib import Path

from bracket import records
from bracket.experiment import load_workload
from bracket.stats.load import frame
from bracket.stats.load.analyze import CeilingInput, analyze_load
from bracket.stats.results.load import WorkloadLoad
from bracket.typed.experiment import Experiment


def raw_paths(meta_paths) -> list[Path]:
    """The blocks' raw record files beside their provenance (raw/block-K.meta.json -> raw/block-K.jsonl)."""
    out = []
    for m in meta_paths:
        p = Path(str(m).removesuffix(".meta.json") + ".jsonl")
        if p.exists():
            out.append(p)
    return out


def ceiling_input(ceiling: dict | None) -> CeilingInput | None:
    """The batch ceiling's inputs from ceiling.json: its bandwidth and bytes per decoded token; None where unknown."""
    c = ceiling or {}
    bw, b = c.get("bandwidth_gbps"), c.get("bytes_per_token")
    if c.get("status") == "unknown" or not isinstance(bw, (int, float)) or not isinstance(b, (int, float)):
        return None
    return CeilingInput(bandwidth_gbps=float(bw), weight_bytes=float(b)) if bw > 0 and b > 0 else None


def load_stats(experiment: Experiment, raw: list[dict], ceiling: dict | None = None) -> tuple[WorkloadLoad, ...] | None:
    """One `WorkloadLoad` per load workload that has level summaries among `raw` (the blocks' records, as
    records.read gives them); None where the experiment has no load workload."""
    names = [n for n, wl in experiment.workloads.items() if load_workload.is_load(wl)]
    if not names:
        return None
    a, ref = experiment.analysis, experiment.reference
    spec_arms = tuple(n for n, arm in experiment.arms.items() if n != ref and arm.speculative is not None)
    out = []
    for name in names:
        mine = [r for r in raw if r.get("workload") == name and r.get("kind") in records.LOAD_KINDS]
        if not any(r.get("kind") == "load_level" for r in mine):
            continue
        requests, levels = frame.from_records(mine)
        # a verdict or a gain needs two blocks of each arm (one block per arm gives no interval over blocks)
        blocks = levels.groupby(levels["arm"].astype(str))["block"].nunique()
        arms = {a for a, n in blocks.items() if n >= 2}
        others = [n for n in experiment.arms if n != ref and n in arms] if ref in arms else []
        result = analyze_load(
            requests,
            levels,
            comparisons=[(ref, n) for n in others],
            speculation=[(ref, n) for n in spec_arms if n in others],
            ceiling=ceiling_input(ceiling),
            seed=int(a.seed),
            confidence=float(a.confidence),
            noise_threshold=float(a.noise_threshold),
        )
        out.append(
            WorkloadLoad(
                **dict(result),
                workload=name,
                level_kind=load_workload.spec(experiment, name).level_kind,
                reference=ref,
                speculative_arms=tuple(n for n in spec_arms if n in others),
            )
        )
    return tuple(out)


def from_metas(experiment: Experiment, meta_paths, ceiling: dict | None = None) -> tuple[WorkloadLoad, ...] | None:
    """`load_stats` over the raw files beside the blocks' provenance files (rule analyze's `metas`)."""
    if not any(load_workload.is_load(wl) for wl in experiment.workloads.values()):
        return None
    return load_stats(experiment, records.read(raw_paths(meta_paths), torn=[]), ceiling)
