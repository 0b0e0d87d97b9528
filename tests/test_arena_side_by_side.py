"""studies/arena_side_by_side/arena_side_by_side.py's own logic: the flags of the Arena's mode, and the table's pooling and
agreement worked by hand (the live comparison itself is a measurement, run by hand: studies/arena_side_by_side/README.md)."""

import math

import pytest

from studies.arena_side_by_side import arena_side_by_side as sbs


def test_agree_is_means_within_the_two_sds():
    assert sbs.agree({"mean": 100.0, "std": 10.0}, {"mean": 115.0, "std": 5.0}) == "yes"  # 15 <= 10 + 5
    assert sbs.agree({"mean": 100.0, "std": 10.0}, {"mean": 116.0, "std": 5.0}) == "no"
    assert sbs.agree({"mean": 116.0, "std": 5.0}, {"mean": 100.0, "std": 10.0}) == "no"  # symmetric
    assert sbs.agree(None, {"mean": 1.0, "std": 0.0}) == "n/a"


def benchy_cell(ctx: bool, tg: list[float], users=2):
    m = {"mean": sum(tg) / len(tg), "std": 0.0, "values": tg}
    return {
        "concurrency": users,
        "context_size": 384,
        "prompt_size": 64,
        "response_size": 16,
        "is_context_prefill_phase": ctx,
        "tg_throughput": m,
    }


def test_rows_pool_llama_benchys_reports_and_keep_the_phases_apart():
    reports = [
        {"benchmarks": [benchy_cell(False, [100.0, 110.0]), benchy_cell(True, [900.0])]},
        {"benchmarks": [benchy_cell(False, [120.0, 130.0]), benchy_cell(True, [1100.0])]},
    ]
    ours = {"mean": 112.0, "std": 4.0, "values": [108.0, 116.0]}
    summary = {
        "cells": [
            {"users": 2, "phase": "inference", "llama_benchy": {"tg_throughput": ours}},
            {"users": 2, "phase": "ctx", "llama_benchy": {"tg_throughput": None}},
        ]
    }
    rows = {(r["phase"], r["metric"]): r for r in sbs.comparison_rows(summary, reports)}
    tg = rows[("inference", "tg")]
    # pooled 100, 110, 120, 130: mean 115, population SD sqrt((225 + 25 + 25 + 225) / 4) = 11.18
    assert tg["llama_benchy"]["mean"] == pytest.approx(115.0)
    assert tg["llama_benchy"]["std"] == pytest.approx(math.sqrt(125.0))
    assert tg["bracket"] is ours and tg["agree"] == "yes"  # |112 - 115| <= 4 + 11.18
    assert rows[("ctx", "tg")]["llama_benchy"]["values"] == [900.0, 1100.0] and rows[("ctx", "tg")]["agree"] == "n/a"
    assert rows[("inference", "pp")]["llama_benchy"] is None  # absent on both sides: said, not invented
    lines = sbs.table(list(rows.values()))
    assert "| inference | 2 | tg (t/s) | 112.0 ± 4.0 (2) | 115.0 ± 11.2 (4) | yes |" in lines


def test_arena_mode_sends_the_arenas_flags_to_both_tools():
    a = sbs.arguments(["--arena", "--quick", "--attach", "http://127.0.0.1:9"])
    assert (a.depth, a.pp, a.tg, a.runs, a.rounds, a.users) == (384, 64, 16, 2, 2, [1, 2])
    cfg = sbs.experiment(a)
    assert list(cfg.workloads) == ["c1", "c2"]
    assert {(w.cache, w.tg_exact, w.latency, w.users) for w in cfg.workloads.values()} == {
        ("prefix", False, "api", 1),
        ("prefix", False, "api", 2),
    }
    argv = sbs.benchy_argv(a, "http://h", "tok.json", "out.json")
    assert "--enable-prefix-caching" in argv and "--exact-tg" not in argv
    assert argv[argv.index("--latency-mode") + 1] == "api" and argv[argv.index("--concurrency") + 1 :][:2] == ["1", "2"]
    fresh = sbs.arguments(["--attach", "http://127.0.0.1:9"])
    assert fresh.users == [2] and "--exact-tg" in sbs.benchy_argv(fresh, "http://h", "t", "o")
    with pytest.raises(SystemExit):
        sbs.arguments(["--rounds", "1", "--attach", "http://x"])


def test_llama_server_is_launched_with_its_cache_on_and_a_slot_per_user(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "llama-server").write_text("")
    a = sbs.arguments(
        [
            "--arena",
            "--engine",
            "llamacpp",
            "--model",
            str(tmp_path / "m.gguf"),
            "--depth",
            "1024",
            "--llama-server",
            str(tmp_path / "llama-server"),
        ]
    )
    cfg = sbs.experiment(a)
    assert cfg.engine.kind == "llamacpp" and cfg.arms["server"].server.prefix_caching is True
    args = cfg.engine.args
    # two slots, each holding depth + pp + tg and a template's margin: 2 x (1024 + 128 + 32 + 256)
    assert args[args.index("--parallel") + 1] == "2" and args[args.index("--ctx-size") + 1] == "2880"
    with pytest.raises(SystemExit, match="--model"):
        sbs.arguments(
            [
                "--engine",
                "llamacpp",
                "--model",
                str(tmp_path / "none.gguf"),
                "--llama-server",
                str(tmp_path / "llama-server"),
            ]
        )
