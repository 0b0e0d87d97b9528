"""The block's frozen context (bracket.measure.context.BlockContext): the one place a block's raw records are made."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from bracket import records
from bracket.controls import neutrality
from bracket.engines.base import ServerTiming
from bracket.experiment import config
from bracket.experiment.design import Block
from bracket.measure.context import BlockContext
from bracket.wire.client import Measurement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "bracket"

EXP = config.validate(
    {
        "arms": {"base": {}, "ng": {"speculative": {"method": "ngram", "draft_tokens": 4}}},
        "workloads": {"short": {"prompts": "p.jsonl"}, "long": {"prompts": "q.jsonl"}},
        "controls": {"neutrality_pairs": 3},
    }
)


def _ctx(arm="ng", host="", exp=EXP) -> BlockContext:
    return BlockContext(exp, "sweep", Block(position=5, arm=arm, round=2, seed=11, host=host), 12, "sweep-p5-1")


def test_a_record_names_where_it_came_from_and_keeps_what_the_request_measured():
    rec = _ctx(host="node-b").record(run=3, warmup=False, workload="short", prompt_id="p1", max_tokens=64, wall_s=1.5)
    assert {k: rec[k] for k in ("experiment", "arm", "block", "round", "position", "host", "server_id")} == {
        "experiment": "sweep",
        "arm": "ng",
        "block": 5,
        "round": 2,
        "position": 5,
        "host": "node-b",
        "server_id": "sweep-p5-1",
    }
    assert rec["draft_budget"] == 4 and rec["run"] == 3 and rec["warmup"] is False and rec["wall_s"] == 1.5
    assert rec["max_tokens"] == 64 and rec["ttft_s"] is None  # what the request did not say stays null
    assert set(rec) == set(records.FIELDS + records.EXTRA_FIELDS)
    # an arm that does not draft, a block pinned to no host
    plain = _ctx(arm="base").record(run=0, warmup=True, workload="long", prompt_id="q")
    assert plain["draft_budget"] is None and plain["host"] is None and plain["arm"] == "base"
    with pytest.raises(KeyError, match="tokens_per_event"):
        _ctx().record(run=0, warmup=True, workload="long", prompt_id="q", tokens_per_event=3)


def test_the_context_is_frozen_and_another_server_is_another_context():
    ctx = _ctx()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.server_id = "other"
    second = ctx.on_server("sweep-p5-1-s1")
    assert second.server_id == "sweep-p5-1-s1" and ctx.server_id == "sweep-p5-1" and second.exp is ctx.exp
    assert second.record(run=0, warmup=True, workload="w", prompt_id="x")["server_id"] == "sweep-p5-1-s1"
    assert ctx.name == "block 6/12 (block-5)"
    assert ctx.per_block is None  # a fresh server of the block's own
    attached = config.validate(
        {
            "arms": {"a": {}},
            "engine": {"kind": "openai", "launch": "attach", "embedded": False, "base_url": "http://127.0.0.1:9"},
        }
    )
    assert _ctx(arm="a", exp=attached).per_block == 5  # an attached server's cache outlives the block


class _Adapter:
    """A test double of an engine adapter's `control` (one request of the neutrality control)."""

    def __init__(self):
        self.sent = []

    def control(self, http, base, model, prompt, req, seed, arm, body):
        self.sent.append((prompt, body, arm))
        m = Measurement(started_at=1.0, wall_s=0.5, completion_tokens=req.max_tokens, output_text="same")
        return m, ServerTiming(seconds=0.25, tokens=req.max_tokens, source="test")


def test_the_neutrality_control_makes_its_records_through_the_context():
    ctx = _ctx(host="node-b")
    workloads = {
        "short": [{"id": "s0", "prompt": "a"}, {"id": "s1", "prompt": "b"}],
        "long": [{"id": "l0", "prompt": "c"}],
    }
    adapter = _Adapter()
    recs = list(neutrality.run(ctx, adapter, None, "http://x", "m", workloads, lambda wl, pair: f"[{wl}:{pair}]"))
    assert len(recs) == 6  # 3 pairs, two bodies each
    assert {(r["experiment"], r["arm"], r["block"], r["round"], r["host"], r["server_id"]) for r in recs} == {
        ("sweep", "ng", 5, 2, "node-b", "sweep-p5-1")
    }
    assert all(r["draft_budget"] == 4 and r["control"] == "neutrality" and r["run"] is None for r in recs)
    assert [r["body"] for r in recs[:2]] == ["plain", "bracket"]  # position 5 + pair 0 is odd: plain first
    assert [r["workload"] for r in recs[::2]] == ["short", "long", "short"]
    assert recs[0]["server_decode_s"] == 0.25 and recs[0]["server_tokens"] == EXP.request.max_tokens
    assert all(arm is ctx.arm for _, _, arm in adapter.sent)


def test_only_the_context_builds_a_raw_record_in_the_block_its_cells_and_controls():
    """One record builder: in the block runner, the arena and the controls, no module calls records.new_record or
    spells a record's experiment/arm/block/round itself; they ask the block's context."""
    folders = ("block", "arena", "controls", "measure")
    callers = []
    for folder in folders:
        for path in sorted((PACKAGE / folder).glob("*.py")):
            if path.name == "context.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "new_record",
                ):
                    callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not callers, f"raw records built outside BlockContext.record: {callers}"


def test_run_block_is_named_steps_and_no_function_of_the_block_is_long():
    """run_block under 80 lines, each step a function of its own; no function of the block, the arena's cell or the
    neutrality control over 100 lines; _serve_more and _measure take the context, not a dozen positional values."""
    lengths, params = {}, {}
    for rel in ("block/runner.py", "block/attempt.py", "arena/run.py", "controls/neutrality.py", "measure/context.py"):
        for node in ast.walk(ast.parse((PACKAGE / rel).read_text())):
            if isinstance(node, ast.FunctionDef):
                lengths[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
                params[f"{rel}:{node.name}"] = len(node.args.args)
    assert lengths["block/runner.py:run_block"] < 80
    assert not {k: n for k, n in lengths.items() if n > 100}
    assert params["block/runner.py:_serve_more"] <= 4 and params["block/runner.py:_measure"] <= 2
