"""llama-benchy's markdown table, printed by bracket (`bracket summarize --format llama-benchy`) and in the
article's arena section: column for column and digit for digit what llama-benchy 0.4.0 prints for the same
report (checked against its own writer where bench/README.md installed it)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from bracket import interop
from bracket.article.verdicts import ci_method_words
from bracket.cli import main

ROOT = Path(__file__).resolve().parents[1]
BENCHY_PY = Path(os.environ.get("BRACKET_PEERS_DIR", ROOT / "bench" / ".venv-peers")) / "llama-benchy/bin/python"


def metric(*values):
    import numpy as np

    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "values": list(values)}


def cell(c, depth, ctx=False, tg=True, **kw):
    return {
        "concurrency": c,
        "context_size": depth,
        "prompt_size": 2048,
        "response_size": 128,
        "is_context_prefill_phase": ctx,
        "pp_throughput": metric(1500.0, 1520.5, 1490.25),
        "pp_req_throughput": metric(800.0, 760.0, 790.0),
        "tg_throughput": metric(28.125, 29.5, 30.0) if tg else None,
        "tg_req_throughput": metric(14.0, 15.0, 15.5) if tg else None,
        "peak_throughput": metric(31.0, 32.0, 33.0) if tg else None,
        "peak_req_throughput": metric(16.0, 16.0, 17.0) if tg else None,
        "ttfr": metric(1366.4, 1350.0, 1370.0),
        "est_ppt": metric(1365.2, 1349.0, 1369.1),
        "e2e_ttft": metric(1400.0, 1390.0, 1410.0),
        "throughput_over_time": None,
        "requests_throughput_over_time": None,
        **kw,
    }


def report(max_c=2):
    cells = [cell(1, 0), cell(2, 4096, ctx=True), cell(2, 4096), cell(2, 8192, tg=False)]  # last: tg dropped
    return {
        "version": "0.4.0",
        "timestamp": "2026-01-01 00:00:00Z",
        "latency_mode": "api",
        "latency_ms": 1.2,
        "model": "Qwen/Qwen3-8B <b>",
        "prefix_caching_enabled": True,
        "max_concurrency": max_c,
        "benchmarks": cells,
    }


def test_rows_by_hand():
    md = interop.benchy_markdown(report())
    lines = md.splitlines()
    heads = [h.strip() for h in lines[0].strip("|").split("|")]
    assert heads == [
        "model",
        "test",
        "t/s (total)",
        "t/s (req)",
        "peak t/s",
        "peak t/s (req)",
        "ttfr (ms)",
        "est_ppt (ms)",
        "e2e_ttft (ms)",
    ]
    tests = [line.strip("|").split("|")[1].strip() for line in lines[2:]]
    # the null-tg cell keeps its pp row and loses its tg row, as llama-benchy prints it
    assert tests == [
        "pp2048 (c1)",
        "tg128 (c1)",
        "ctx_pp @ d4096 (c2)",
        "ctx_tg @ d4096 (c2)",
        "pp2048 @ d4096 (c2)",
        "tg128 @ d4096 (c2)",
        "pp2048 @ d8192 (c2)",
    ]
    # tg of 28.125, 29.5, 30.0: mean 29.2083, population SD 0.7932
    assert "29.21 ± 0.79" in lines[3]
    one = interop.benchy_markdown(report(max_c=1)).splitlines()
    assert [h.strip() for h in one[0].strip("|").split("|")] == [
        "model",
        "test",
        "t/s",
        "peak t/s",
        "ttfr (ms)",
        "est_ppt (ms)",
        "e2e_ttft (ms)",
    ]


@pytest.mark.skipif(not BENCHY_PY.exists(), reason=f"llama-benchy is not installed at {BENCHY_PY} (bench/README.md)")
@pytest.mark.parametrize("max_c", [1, 2])
def test_the_table_is_llama_benchys_own(tmp_path, max_c):
    doc = report(max_c)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    script = (
        "import json, sys\nfrom llama_benchy.results import BenchmarkResults, BenchmarkReport\n"
        "doc = BenchmarkReport(**json.load(open(sys.argv[1])))\nr = BenchmarkResults()\n"
        "r.runs = doc.benchmarks\nr.metadata = doc\nr.model_name = doc.model\n"
        "print(r._generate_md_report(doc.max_concurrency), end='')\n"
    )
    theirs = subprocess.run(
        [str(BENCHY_PY), "-c", script, str(path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert interop.benchy_markdown(doc) == theirs


def test_summarize_prints_it_for_a_report_and_for_an_arena_json(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report()))
    assert main(["summarize", str(path), "--format", "llama-benchy"]) == 0
    assert capsys.readouterr().out.strip() == interop.benchy_markdown(report()).strip()
    arena = {
        "cells": [{"arm": "base", "llama_benchy": b} for b in report()["benchmarks"]],
        "llama_benchy_metadata": {"latency_mode": "api", "latency_ms": 1.2, "prefix_caching_enabled": True},
    }
    path = tmp_path / "arena.json"
    path.write_text(json.dumps(arena))
    assert main(["summarize", str(path), "--format", "llama-benchy"]) == 0
    out = capsys.readouterr().out
    assert "arm base:" in out and "ctx_pp @ d4096 (c2)" in out
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert main(["summarize", str(bad), "--format", "llama-benchy"]) != 0
    assert "reads a llama-benchy report ('benchmarks') or bracket's results/NAME/arena.json" in capsys.readouterr().err


def test_the_article_shows_it_with_the_model_name_escaped():
    from bracket import article

    arena = {
        "cells": [{"arm": "base", "llama_benchy": b, "workload": "w"} for b in report()["benchmarks"]],
        "llama_benchy_metadata": {},
    }
    table = interop.benchy_markdown(interop.export_arena(arena, "base"))
    html = article.elements.Pre(table).html()
    assert "ctx_tg @ d4096 (c2)" in html and "<b>" not in html


def test_imported_values_are_worded_by_what_they_are(tmp_path, capsys):
    # tg_throughput at c1 is one value per request; at c2 llama-benchy's total is one value per run
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report()))
    assert main(["summarize", str(path), "--json"]) == 0
    cells = {c["workload"]: c["ci_method"] for c in json.loads(capsys.readouterr().out) if not c["dropped"]}
    assert (
        cells["tg pp2048 tg128 @ d0 c1"]["unit"] == "requests" and cells["tg pp2048 tg128 @ d4096 c2"]["unit"] == "runs"
    )
    assert ci_method_words(cells["tg pp2048 tg128 @ d4096 c2"]).startswith("percentile bootstrap of runs;")
    assert main(["summarize", str(path), "--metric", "ttfr"]) == 0  # per request at any concurrency
    out = capsys.readouterr().out
    assert "ttfr ms pp2048 tg128 @ d4096 c2: percentile bootstrap of requests" in out
