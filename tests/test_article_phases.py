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
    stats = json.loads(json.dumps(analyze(_runs(), cfg).data()))
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
    stats = json.loads(json.dumps(analyze(_runs({k: ARMS[k] for k in "ac"}), cfg).data()))
    md = article.section_phases(_fixture(tmp_path, stats=stats))._repr_markdown_()
    assert "No arm's TTFT moved further" in md
    d = _fixture(tmp_path)
    d = article.Data(**{**d.__dict__, "stats": {**d.stats, "phases": None}})  # a stats.json from before the phases
    assert article.section_phases(d) is None


def test_the_arms_table_shows_the_state_each_arm_ran_with(tmp_path):
    d = _fixture(tmp_path)
    # The fixture's blocks ran before bracket turned vLLM's prefix cache off: the analysis read their state from
    # their launch command (bracket.stats.provenance.server_state); the article words it.
    assert article.arm_state(d, "baseline") == (
        "prefix cache on (no prefix-caching flag (vLLM's default: on)); CUDA graphs off (--enforce-eager)"
    )
    md = article.section_method(d)._repr_markdown_()
    assert "server state" in md and "vLLM's default: on" in md and "ran with different server state" not in md
    # An arm whose blocks ran in two states lists both; stats.json's judgement that the arms differ is said.
    stats = json.loads(json.dumps(d.stats))
    prov = stats["provenance"]
    arm = next(a for a in prov["arms"] if a["arm"] == "ngram_4")
    arm["states"] = [{"prefix_cache": "off", "how": ["--no-enable-prefix-caching"], "graphs": None}]

    def with_stats():  # the article of these stats as they are now (a Data reads its stats once)
        return article.Data(**{**d.__dict__, "stats": json.loads(json.dumps(stats))})

    assert article.arm_state(with_stats(), "ngram_4") == "prefix cache off (--no-enable-prefix-caching)"
    assert (
        "ran with different server state" not in article.section_method(with_stats())._repr_markdown_()
    )  # not judged so
    prov["arm_states_differ"] = True
    assert "ran with different server state" in article.section_method(with_stats())._repr_markdown_()
    arm["states"].append(None)
    assert article.arm_state(with_stats(), "ngram_4") == (
        "differed between blocks: prefix cache off (--no-enable-prefix-caching) | not recorded"
    )
    arm["states"] = []
    assert article.arm_state(with_stats(), "ngram_4") == "no block ran"
