"""The article's TTFT / decode table and the arms table's server state, from stats.json and the blocks' provenance."""

import json

import pandas as pd
from bracket import article
from bracket.experiment import config
from bracket.stats import analyze
from conftest import ROOT
from test_stats_phases import ARMS, _runs

FIXTURE = ROOT / "tests" / "data" / "report" / "probe"


def _fixture(tmp_path, **changes):
    d = article.load(
        str(FIXTURE / "runs.csv"),
        str(FIXTURE / "stats.json"),
        str(FIXTURE / "raw"),
        str(FIXTURE / "probe.corrections.yaml"),
        str(tmp_path),
    )
    return article.Data(**{**d.__dict__, **changes})


def test_the_synthetic_arms_read_as_the_finding_says(tmp_path):
    cfg = config.validate(
        {
            "arms": {k: {} for k in ARMS},
            "workloads": {"w": {"prompts": "p.jsonl"}},
            "design": {"kind": "abab", "rounds": 2},
            "analysis": {"bootstrap_resamples": 200},
        }
    )
    stats = json.loads(json.dumps(analyze(_runs(), cfg)))
    d = _fixture(tmp_path, stats=stats)
    t = article.phase_table(d)
    assert list(t["arm"]) == ["a", "b", "c", "d"]
    assert list(t["difference lives in"]) == ["reference", "TTFT", "decode", "TTFT"]
    b = t.set_index("arm").loc["b"]
    assert b["TTFT vs reference (CI)"].startswith("20.00x (") and b["tg vs reference"] == "0.95x"
    assert b["decode rate vs reference"] == "0.45x" and b["TTFT ms (CI)"].startswith("400.0")
    s = article.section_phases(d)
    md = s._repr_markdown_()
    assert "for b on w (TTFT 20.00x" in md and "d on w (TTFT 1.30x" in md and "c on w" not in md
    assert "more than 10% further from 1" in md
    assert [p.name for p in s.save_tables(tmp_path)] == ["phases.csv"]
    assert len(pd.read_csv(tmp_path / "tables" / "phases.csv")) == 4


def test_no_arm_flagged_and_no_phases(tmp_path):
    cfg = config.validate(
        {
            "arms": {k: {} for k in "ac"},
            "workloads": {"w": {"prompts": "p.jsonl"}},
            "analysis": {"bootstrap_resamples": 200},
        }
    )
    stats = json.loads(json.dumps(analyze(_runs({k: ARMS[k] for k in "ac"}), cfg)))
    md = article.section_phases(_fixture(tmp_path, stats=stats))._repr_markdown_()
    assert "No arm's TTFT moved further" in md
    d = _fixture(tmp_path)
    d = article.Data(**{**d.__dict__, "stats": {**d.stats, "phases": None}})  # a stats.json from before the phases
    assert article.section_phases(d) is None


def test_the_arms_table_shows_the_state_each_arm_ran_with(tmp_path):
    d = _fixture(tmp_path)
    # The fixture's blocks ran before bracket turned vLLM's prefix cache off: read from their launch command.
    assert article.arm_state(d, "baseline") == (
        "prefix cache on (no prefix-caching flag (vLLM's default: on)); CUDA graphs off (--enforce-eager)"
    )
    md = article.section_method(d)._repr_markdown_()
    assert "server state" in md and "vLLM's default: on" in md and "ran with different server state" not in md
    # A block that recorded its state is read as recorded; arms that differ are named.
    metas = {k: dict(m) for k, m in d.metas.items()}
    first = min(k for k, m in metas.items() if m["arm"] == "ngram_4")
    metas[first]["server_state"] = {"prefix_cache": "off", "how": ["--no-enable-prefix-caching"], "graphs": None}
    d2 = article.Data(**{**d.__dict__, "metas": metas})
    assert article.arm_state(d2, "ngram_4") == "prefix cache off (--no-enable-prefix-caching)"
    assert article.states_differ(d2)
    assert "ran with different server state" in article.section_method(d2)._repr_markdown_()


def test_an_old_llama_server_block_is_read_with_the_arm_stats_json_states(tmp_path):
    """A block from before bracket recorded its server state: llama.cpp's adapter reads it from the launch
    command and the arm's settings, which the article takes from stats.json's experiment, not a file."""
    d = _fixture(tmp_path)
    metas = {k: {**m, "engine": "llamacpp", "argv": ["llama-server", "--cache-ram", "0"]} for k, m in d.metas.items()}
    for m in metas.values():
        m.pop("server_state", None)
    stats = json.loads(json.dumps(d.stats))
    arms = stats["experiment"]["arms"]
    for a in arms:
        if a["arm"] == "ngram_4":
            # as stats.json states a server block: every key, the schema's defaults (null) filled
            a["server"] = {
                "memory_fraction": None,
                "context_length": None,
                "kv_cache_dtype": None,
                "prefix_caching": True,
                "chunked_prefill": None,
            }
    d2 = article.Data(**{**d.__dict__, "metas": metas, "stats": stats})
    assert "cache_prompt true in each request" in article.arm_state(d2, "ngram_4")
    assert "cache_prompt false in each request" in article.arm_state(d2, "baseline")
