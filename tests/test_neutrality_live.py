"""The neutrality control on the real embedded engine (vLLM 0.32 CPU build, tiny local model): one block.

After the arm's own request, the block's server answers two pairs (bracket's body, the plain body);
each is timed by vLLM itself through its request_decode_time histogram read around the request, and
the records reach neither runs.csv nor any arm's statistics.
"""

from __future__ import annotations

import json

import pytest
from bracket import records
from bracket.block import runner
from bracket.experiment import config, design
from bracket.stats.neutrality import instrument_cost
from conftest import ROOT

from tests.support import free_port

pytestmark = pytest.mark.engine


def test_the_control_runs_on_the_real_engine_with_its_own_timing(embedded_engine, tmp_path, monkeypatch):
    engine, model = embedded_engine
    monkeypatch.chdir(ROOT)
    cfg = config.validate(
        {
            "engine": {"kind": "vllm", "embedded": True, "port": free_port(), "startup_timeout_s": 600},
            "arms": {"baseline": {}},
            "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}},
            "design": {"rounds": 1, "runs_per_block": 1, "warmup_runs": 0, "cooldown_s": 0},
            "request": {"max_tokens": 32, "timeout_s": 120},
            "controls": {"neutrality_pairs": 2},
        }
    )
    block = design.from_config(cfg)[0]
    raw = runner.run_block(
        cfg,
        "live",
        block,
        1,
        raw_path=tmp_path / "block-0.jsonl",
        meta_path=tmp_path / "block-0.meta.json",
        log_path=tmp_path / "server.log",
        model=str(model),
        python=str(engine / "bin" / "python"),
        root=ROOT,
        lock_dir=tmp_path / "locks",
    )
    recs = records.read([raw])
    assert json.loads((tmp_path / "block-0.meta.json").read_text())["neutrality"] == "on"
    assert len(records.tidy(recs)) == 1  # the arm's own request only
    ctl = records.control_table(recs)
    assert list(ctl["body"]) == ["bracket", "plain", "plain", "bracket"] and ctl["valid"].all(), ctl.to_string()
    assert (ctl["completion_tokens"] == 32).all() and (ctl["server_tokens"] == 31).all()
    assert set(ctl["server_timing"]) == {"vLLM /metrics request_decode_time_seconds / (request_generation_tokens - 1)"}
    # the server's decode time is inside the client's wall time of the same request
    assert ((ctl["server_decode_s"] > 0) & (ctl["server_decode_s"] < ctl["wall_s"])).all()
    cost = instrument_cost(ctl)
    assert cost["basis"] == "server timing" and cost["pairs"] == 2 and cost["blocks"] == 1 and cost["ratio"] > 0
