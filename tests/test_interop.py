"""llama-benchy and vllm bench serve files both ways: cells kept apart on import, round trips on export."""

import json

import numpy as np
import pytest
from bracket import interop
from bracket.arena import readings as arena_stats
from bracket.experiment import config
from bracket.stats import io as sio


def run(pp, tg=128, depth=0, c=1, ctx=False, tgv=(50.0, 51.0, 52.0), ppv=(900.0, 910.0, 920.0)):
    def m(v):
        return {"mean": float(np.mean(v)), "std": float(np.std(v)), "values": list(v)}

    return {
        "concurrency": c,
        "context_size": depth,
        "prompt_size": pp,
        "response_size": tg,
        "is_context_prefill_phase": ctx,
        "pp_throughput": m(ppv),
        "pp_req_throughput": m(ppv),
        "tg_throughput": m(tgv),
        "tg_req_throughput": m(tgv),
        "peak_throughput": None,
        "peak_req_throughput": None,
        "ttfr": m([120.0, 130.0, 125.0]),
        "est_ppt": m([119.0, 129.0, 124.0]),
        "e2e_ttft": m([121.0, 131.0, 126.0]),
        "throughput_over_time": None,
        "requests_throughput_over_time": None,
    }


# What llama-benchy 0.4.0 writes for `--pp 512 4096 --depth 0 4096 --concurrency 1 2` (a slice of it):
# the same tg and concurrency at two prompt sizes must stay two cells.
REPORT = {
    "version": "0.4.0",
    "timestamp": "2026-11-29 18:00:00Z",
    "latency_mode": "api",
    "latency_ms": 1.2,
    "model": "Qwen/Qwen3-0.6B",
    "prefix_caching_enabled": False,
    "max_concurrency": 2,
    "benchmarks": [
        run(512),
        run(4096, tgv=(40.0, 41.0, 42.0)),
        run(512, depth=4096),
        run(512, c=2, tgv=(90.0, 95.0, 100.0)),
        run(512, depth=4096, ctx=True),
    ],
}


def test_prompt_sizes_depths_and_concurrency_stay_apart(tmp_path):
    p = tmp_path / "qwen.json"
    p.write_text(json.dumps(REPORT))
    df = sio.load(p)
    cells = sorted(df["workload"].unique())
    assert cells == [
        "tg pp4096 tg128 @ d0 c1",
        "tg pp512 tg128 @ d0 c1",
        "tg pp512 tg128 @ d0 c2",
        "tg pp512 tg128 @ d4096 c1",
        "tg pp512 tg128 @ d4096 c1 ctx",
    ]
    assert df[df.workload == "tg pp512 tg128 @ d0 c1"]["value"].tolist() == [50, 51, 52]
    assert df[df.workload == "tg pp4096 tg128 @ d0 c1"]["value"].tolist() == [40, 41, 42]
    rows = interop.llama_benchy_rows(REPORT, "q", 0, metric="pp_throughput")
    assert {r["workload"] for r in rows} >= {"pp pp512 tg128 @ d0 c1", "pp pp4096 tg128 @ d0 c1"}
    with pytest.raises(ValueError, match="not a llama-benchy metric"):
        interop.llama_benchy_rows(REPORT, "q", 0, metric="decode")


def test_llama_benchy_round_trip_gives_the_same_cells(tmp_path):
    cells = interop.benchy_cells(REPORT)
    doc = interop.export_llama_benchy(cells, model="Qwen/Qwen3-0.6B")
    p = tmp_path / "exported.json"
    interop.write(doc, p)
    again = interop.benchy_cells(json.loads(p.read_text()))
    assert again == cells
    assert doc["max_concurrency"] == 2 and doc["model"] == "Qwen/Qwen3-0.6B" and len(doc["benchmarks"]) == 5
    # and a third time through the statistics' loader, values unchanged
    assert sio.load(p)["value"].tolist() == sio.load(_write(tmp_path / "orig.json", REPORT))["value"].tolist()


def _write(p, doc):
    p.write_text(json.dumps(doc))
    return p


def test_a_report_without_sizes_or_with_a_cell_twice_is_refused():
    bad = {
        "benchmarks": [{"concurrency": 1, "response_size": 128, "tg_throughput": {"mean": 1, "std": 0, "values": [1]}}]
    }
    with pytest.raises(ValueError, match="prompt_size"):
        interop.benchy_cells(bad)
    with pytest.raises(ValueError, match="twice"):
        interop.benchy_cells({"benchmarks": [run(512), run(512)]})


def test_arena_cells_export_as_llama_benchy_and_import_back():
    cfg = config.validate(
        {
            "workloads": {
                "arena": {"kind": "arena", "depth": 1024, "prompt_tokens": 128, "tokens": 16, "prompts": "p"}
            },
            "arms": {"b": {}},
            "analysis": {"confidence": 0.95, "bootstrap_resamples": 200, "seed": 1, "spread_warning": 0.15},
        }
    )
    raw = []
    for run_i, tg in enumerate([100.0, 110.0, 120.0]):
        for ttft in (0.5, 0.6):
            raw.append(
                {
                    "started_at": 10.0 * run_i,
                    "ttft_s": ttft,
                    "completion_tokens": 16,
                    "tg_tok_s": tg,
                    "error": None,
                    "arm": "b",
                    "workload": "arena",
                    "block": 0,
                    "run": run_i,
                    "warmup": False,
                    "cached_tokens": 0,
                    "finish_reason": "length",
                    "max_tokens": 16,
                    "wall_s": 1.0,
                    "prompt_tokens": 1152,
                    "ttfr_s": ttft - 0.01,
                    "first_event_tokens": 1,
                }
            )
    summary = arena_stats.summarize(raw, cfg)
    doc = interop.export_arena(summary, "b", model="tiny")
    (cell,) = interop.benchy_cells(doc)
    assert (cell["prompt_size"], cell["context_size"], cell["concurrency"], cell["response_size"]) == (128, 1024, 2, 16)
    assert cell["tg_throughput"] == summary["cells"][0]["llama_benchy"]["tg_throughput"]
    assert interop.benchy_cells(interop.export_llama_benchy([cell], "tiny")) == [cell]
    # the ttfr by hand: 490 and 590 ms in each run
    assert cell["ttfr"]["mean"] == pytest.approx(540.0) and cell["ttfr"]["std"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="arms with cells: b"):
        interop.export_arena(summary, "nope")


def test_vllm_bench_cells_and_round_trip(tmp_path):
    recs = [
        {
            "arm": "a",
            "workload": "code",
            "warmup": False,
            "prompt_tokens": 200,
            "completion_tokens": 64,
            "ttft_s": 0.1 + 0.01 * i,
            "tg_tok_s": 50.0,
            "wall_s": 0.1 + 0.01 * i + 63 / 50.0,
            "started_at": 100.0 + 2 * i,
            "error": None,
        }
        for i in range(4)
    ]
    recs.append({**recs[0], "warmup": True})
    doc = interop.export_vllm(recs, max_concurrency=1)
    assert doc["num_prompts"] == 4 and doc["completed"] == 4 and len(doc["itls"][0]) == 63
    p = _write(tmp_path / "a.json", doc)
    df = sio.load(p)
    assert df["workload"].unique().tolist() == ["decode in200 out64 c1 rateinf"]
    # n / (ttft + sum itl) = 64 / (ttft + 63/50), the request's decode rate to its last token
    assert df["value"].tolist() == pytest.approx([64 / (0.1 + 0.01 * i + 63 / 50.0) for i in range(4)])
    again = interop.vllm_rows(json.loads(p.read_text()), "a", 0)
    assert [r["value"] for r in again] == pytest.approx(df["value"].tolist())
    other = _write(tmp_path / "b.json", {**doc, "input_lens": [4096] * 4})
    assert sio.load([p, other])["workload"].nunique() == 2  # input 200 and 4096 stay apart
    with pytest.raises(ValueError, match="one at a time"):
        interop.export_vllm(recs + [{**recs[0], "workload": "chat"}])


def test_export_command_writes_what_summarize_reads(tmp_path, capsys):
    from bracket import cli

    summary = {
        "cells": [
            {"arm": "b", "llama_benchy": interop.benchy_cells({"benchmarks": [run(128, tg=16, depth=1024, c=2)]})[0]}
        ]
    }
    src = _write(tmp_path / "arena.json", summary)
    out = tmp_path / "b.json"
    assert cli.main(["export", "llama-benchy", str(src), "-o", str(out)]) == 0
    df = sio.load(out)
    assert df["workload"].unique().tolist() == ["tg pp128 tg16 @ d1024 c2"] and df["value"].tolist() == [50, 51, 52]


def _null_cell(**kw):
    r = run(512, depth=8192, **kw)
    for m in ("tg_throughput", "tg_req_throughput", "peak_throughput", "peak_req_throughput"):
        r[m] = None  # llama-benchy dropped every run's tg (streams in one read)
    return r


def test_a_null_cell_and_the_metadata_survive_a_round_trip(tmp_path):
    doc = {
        **REPORT,
        "latency_mode": "api",
        "latency_ms": 3.92,
        "prefix_caching_enabled": True,
        "benchmarks": REPORT["benchmarks"] + [_null_cell()],
    }
    back = interop.export_llama_benchy(
        interop.benchy_cells(doc), model=doc["model"], metadata=interop.benchy_metadata(doc)
    )
    assert json.loads(json.dumps(back)) == doc  # nothing lost or changed, metadata included
    rows = interop.llama_benchy_rows(doc, "q", 0)
    cells = {r["workload"] for r in rows}
    assert len(cells) == len(doc["benchmarks"]) == 6  # every cell in, every cell out
    (null,) = [r for r in rows if r["workload"] == "tg pp512 tg128 @ d8192 c1"]
    assert null["valid"] is False and "no tg_throughput" in null["invalid_reason"]


def test_summarize_names_the_dropped_cell_and_imports_any_metric(tmp_path, capsys):
    from bracket import cli

    p = _write(tmp_path / "arena_mode.json", {**REPORT, "benchmarks": [run(512), _null_cell()]})
    assert cli.main(["summarize", str(p)]) == 0
    out = capsys.readouterr().out
    assert (
        "dropped: arena_mode / tg pp512 tg128 @ d8192 c1: no valid value (llama-benchy reported no tg_throughput" in out
    )
    assert cli.main(["summarize", str(p), "--metric", "pp_throughput"]) == 0
    out = capsys.readouterr().out
    assert "pp pp512 tg128 @ d8192 c1" in out and " 910.0000 " in out and "dropped" not in out


def test_summarize_json_lists_the_dropped_cell_with_its_reason(tmp_path, capsys):
    from bracket import cli

    p = _write(tmp_path / "arena_mode.json", {**REPORT, "benchmarks": [run(512), _null_cell()]})
    assert cli.main(["summarize", str(p), "--json"]) == 0
    got = {c["workload"]: c for c in json.loads(capsys.readouterr().out)}
    assert set(got) == {"tg pp512 tg128 @ d0 c1", "tg pp512 tg128 @ d8192 c1"}
    assert got["tg pp512 tg128 @ d0 c1"]["dropped"] is None and got["tg pp512 tg128 @ d0 c1"]["median"] == 51.0
    dropped = got["tg pp512 tg128 @ d8192 c1"]
    assert dropped["n"] == 0 and dropped["dropped"].startswith("llama-benchy reported no tg_throughput")


def test_a_report_whose_every_cell_is_null_says_llama_benchy_dropped_every_run(tmp_path):
    doc = {**REPORT, "benchmarks": [_null_cell(), _null_cell(c=2)]}
    with pytest.raises(ValueError, match="llama-benchy dropped every run: tg_throughput is null in all 2 cells"):
        interop.llama_benchy_rows(doc, "q", 0)
    old = {**REPORT, "benchmarks": [run(512)]}
    old["benchmarks"][0]["tg_throughput"] = {"mean": 50.0, "std": 1.0}  # a llama-benchy before 'values'
    with pytest.raises(ValueError, match="with a llama-benchy version that writes them"):
        interop.llama_benchy_rows(old, "q", 0)


def test_the_cli_reads_a_llama_benchy_report_and_writes_it_back_unchanged(tmp_path, capsys):
    from bracket import cli

    doc = {**REPORT, "latency_mode": "generation", "benchmarks": REPORT["benchmarks"] + [_null_cell()]}
    src = _write(tmp_path / "benchy.json", doc)
    out = tmp_path / "back.json"
    assert cli.main(["export", "llama-benchy", str(src), "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == doc  # cells, null cell, metadata and timestamp as they were
    assert cli.main(["export", "llama-benchy", str(src), "-o", str(out), "--model", "renamed"]) == 0
    assert json.loads(out.read_text()) == {**doc, "model": "renamed"}
    bad = _write(tmp_path / "neither.json", {"rows": []})
    capsys.readouterr()
    assert cli.main(["export", "llama-benchy", str(bad), "-o", str(out)]) != 0
    assert "is neither bracket's results/NAME/arena.json ('cells') nor a llama-benchy report" in capsys.readouterr().err


def _arena_record(phase, prompt_tokens, i):
    return {
        "arm": "a",
        "workload": "arena",
        "warmup": False,
        "arena_phase": phase,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 32 if phase == "inference" else 1,
        "ttft_s": 0.5 if phase == "inference" else 0.1,
        "tg_tok_s": 40.0,
        "wall_s": 1.3 if phase == "inference" else 0.1,
        "started_at": 1000.0 + 10 * i + (5 if phase == "inference" else 0),
        "error": None,
    }


def test_a_vllm_export_of_an_arena_cell_keeps_its_phases_apart(tmp_path, capsys):
    from bracket import cli

    recs = [_arena_record(ph, n, i) for i in range(3) for ph, n in (("ctx", 513), ("inference", 640))]
    with pytest.raises(ValueError, match=r"2 phases \(ctx, inference\).*--phase inference"):
        interop.export_vllm(recs)
    raw = tmp_path / "block-0.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "v.json"
    assert cli.main(["export", "vllm", str(raw), "-o", str(out), "--phase", "inference"]) == 0
    doc = json.loads(out.read_text())
    assert doc["input_lens"] == [640, 640, 640] and doc["label"] == "a / arena (inference)"
    assert cli.main(["export", "vllm", str(raw), "-o", str(out), "--phase", "ctx"]) == 0
    assert json.loads(out.read_text())["input_lens"] == [513, 513, 513]


def test_arena_export_keeps_the_metadata_bracket_ran_with():
    arena = {
        "cells": [{"arm": "b", "llama_benchy": interop.benchy_cells({"benchmarks": [run(128)]})[0]}],
        "llama_benchy_metadata": {"latency_mode": "api", "latency_ms": 1.5, "prefix_caching_enabled": True},
    }
    doc = interop.export_arena(arena, "b")
    assert (doc["latency_mode"], doc["latency_ms"], doc["prefix_caching_enabled"]) == ("api", 1.5, True)


def test_vllm_export_carries_vllms_summary_over_the_cells_own_time():
    # two requests of 5 tokens an hour apart (other cells ran between): ttft 0.1 s, wall 0.5 s, tg 10 t/s
    # -> itl 0.1 s each; tpot (0.5 - 0.1) / 4 = 0.1 s; duration 0.5 + 0.5 = 1.0 s, not 3600.5
    recs = [
        {
            "arm": "a",
            "workload": "w",
            "started_at": t,
            "ttft_s": 0.1,
            "wall_s": 0.5,
            "completion_tokens": 5,
            "prompt_tokens": 20,
            "tg_tok_s": 10.0,
            "error": None,
        }
        for t in (1000.0, 4600.0)
    ]
    doc = interop.export_vllm(recs)
    assert doc["duration"] == pytest.approx(1.0)
    assert doc["output_throughput"] == pytest.approx(10.0) and doc["total_token_throughput"] == pytest.approx(50.0)
    assert doc["request_throughput"] == pytest.approx(2.0)
    for k in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms"):
        assert doc[k] == pytest.approx(100.0)
    for k in ("mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms"):
        assert doc[k] == pytest.approx(100.0)
    assert doc["std_ttft_ms"] == pytest.approx(0.0)


def test_busy_time_is_the_union_of_request_intervals():
    # [0, 2] and [1, 3] overlap -> 3 s; [10, 11] apart -> 1 s more
    assert interop.busy_time([(0.0, 2.0), (1.0, 2.0), (10.0, 1.0)]) == pytest.approx(4.0)
    assert interop.busy_time([(None, 1.0)]) is None
