"""A load workload in a block (bracket.block.runner._load): the block runs every level of it on its server through
the load driver (bracket.measure.load.run_levels), after the single-stream runs, in the order the block's round
rotates the levels; its records carry the block's context and stay out of the runs table; its levels' summaries go
into the block's meta. On bracket's reference engine: a real server process, no model."""

from __future__ import annotations

import json
import socket
from collections import Counter

import pytest
from bracket import records
from bracket.block import runner
from bracket.experiment import config, design, load_workload

pytestmark = pytest.mark.integration


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_block_runs_each_level_of_a_load_workload_and_records_it_in_its_meta(tmp_path, monkeypatch):
    # validation refuses a load workload until blocks run them by default (load_workload.RUN_BY_BLOCKS)
    monkeypatch.setattr(load_workload, "RUN_BY_BLOCKS", True)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"def f{i}(x):"}) + "\n" for i in range(3)))
    load = {"users": [1, 3], "warmup_s": 0.3, "steady_s": 0.8, "drain_s": 2}
    cfg = config.validate(
        {
            "engine": {"kind": "reference", "port": _port(), "startup_timeout_s": 30, "args": ["--rate", "2000"]},
            "arms": {"a": {}},
            "workloads": {
                "plain": {"prompts": str(prompts)},
                "busy": {"prompts": str(prompts), "kind": "load", "load": load},
            },
            "design": {"rounds": 1, "runs_per_block": 2, "warmup_runs": 1, "cooldown_s": 0},
            "request": {"max_tokens": 8, "timeout_s": 10},
            "controls": {"neutrality": False, "neutrality_off": "this test counts the block's records"},
        },
        source="t",
    )
    block = design.from_config(cfg)[0]
    raw, meta_path = tmp_path / "raw" / "block-0.jsonl", tmp_path / "raw" / "block-0.meta.json"
    runner.run_block(
        cfg,
        "t",
        block,
        1,
        raw_path=raw,
        meta_path=meta_path,
        log_path=tmp_path / "logs" / "block-0.log",
        lock_dir=tmp_path / "locks",
        model="embedded",
        python="python3",
        root="/",
    )
    recs = [json.loads(line) for line in raw.read_text().splitlines()]
    kinds = Counter((r.get("kind"), r["workload"]) for r in recs)
    assert kinds[(None, "plain")] == 3  # one warmup and two timed runs, one stream each
    assert kinds[("load_level", "busy")] == 2 and kinds[("load_request", "busy")] > 2
    # every record names the block and its server (BlockContext.record)
    assert {(r["experiment"], r["arm"], r["block"], r["round"]) for r in recs} == {("t", "a", 0, block.round)}
    assert len({r["server_id"] for r in recs}) == 1
    # single-stream runs first, then the levels in the order the block's round rotates them
    first_load = min(i for i, r in enumerate(recs) if r.get("kind"))
    assert all(r.get("kind") is None for r in recs[:first_load]) and first_load == 3
    rotated = [(1.0, 3.0)[i] for i in design.level_order(2, block.round)]
    meta = json.loads(meta_path.read_text())
    assert meta["status"] == "complete"
    assert [lv["level"] for lv in meta["load_levels"]] == rotated
    assert [r["level"] for r in recs if r.get("kind") == "load_level"] == rotated
    assert all(lv["steady_requests"] > 0 for lv in meta["load_levels"])
    # the runs table is the single-stream requests alone
    assert records.tidy(recs)["workload"].tolist() == ["plain"] * 3
