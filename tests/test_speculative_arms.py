"""Speculative arms do what their labels say: the budget table compares arms that differ only in the
budget, an ngram-simple arm that cannot draft is refused, and an arm that never drafted is a finding."""

from __future__ import annotations

import pandas as pd
import pytest
from bracket.article.findings import message
from bracket.article.speculative import reading_words
from bracket.engines.llamacpp import never_drafts
from bracket.experiment import config
from bracket.stats import speculative as spec
from bracket.stats.analyze import analyze

NGRAM = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 3}


def validated(arms: dict) -> dict:
    """The arms as a validated experiment on llama.cpp holds them (ngram-mod is its method)."""
    engine = {"kind": "llamacpp", "launch": "native", "embedded": True}
    return config.validate({"engine": engine, "arms": arms}, source="test", measured=True).arms


def test_budget_groups_keep_one_method_and_one_lookup():
    arms = {
        "baseline": {"label": "no speculation"},
        "ngram_8": {"speculative": {**NGRAM, "draft_tokens": 8}},
        "ngram_3": {"speculative": {**NGRAM, "draft_tokens": 3}},
        "ngram_4": {"speculative": {**NGRAM, "draft_tokens": 4}},
        # another method as launched: the committed table compared ngram_2 with this one
        "ngram_mod_8": {"speculative": {**NGRAM, "engine_method": "ngram-mod", "draft_tokens": 8}},
        "ngram_mod_16": {"speculative": {**NGRAM, "engine_method": "ngram-mod", "draft_tokens": 16}},
        # another lookup window: a separate group, told apart by its arms
        "wide_4": {"speculative": {**NGRAM, "prompt_lookup_max": 4, "draft_tokens": 4}},
        "wide_8": {"speculative": {**NGRAM, "prompt_lookup_max": 4, "draft_tokens": 8}},
        # the same budget and settings but another server setting: not in the group
        "ngram_8_kv8": {"speculative": {**NGRAM, "draft_tokens": 8}, "server": {"kv_cache_dtype": "q8_0"}},
        # alone with its settings: no group
        "self_draft_4": {"speculative": {"method": "draft_model", "draft_tokens": 4, "model": "m.gguf"}},
    }
    groups = dict(spec.budget_groups(validated(arms)))
    assert groups == {
        "ngram (ngram_3, ngram_4, ngram_8)": [(3, "ngram_3"), (4, "ngram_4"), (8, "ngram_8")],
        "ngram-mod": [(8, "ngram_mod_8"), (16, "ngram_mod_16")],
        "ngram (wide_4, wide_8)": [(4, "wide_4"), (8, "wide_8")],
    }


def test_budget_groups_need_two_budgets():
    arms = {
        "a": {"speculative": {**NGRAM, "draft_tokens": 4}},
        "b": {"speculative": {**NGRAM, "engine_method": "ngram-mod", "draft_tokens": 8}},
    }
    assert spec.budget_groups(validated(arms)) == []


def speculative(**settings):
    """An arm's speculative settings as config.validate builds them (on vLLM, which refuses none of these)."""
    raw = {"engine": {"kind": "vllm", "embedded": False, "model": "/m"}, "arms": {"a": {"speculative": settings}}}
    return config.validate(raw).arms["a"].speculative


def test_ngram_simple_below_its_match_length_is_refused():
    assert never_drafts("ngram_2", speculative(**NGRAM, draft_tokens=2))  # size_m 2 < size_n 3: never drafts
    assert never_drafts("ngram_3", speculative(**NGRAM, draft_tokens=3)) == []
    assert never_drafts("ngram_2", speculative(**{**NGRAM, "prompt_lookup_max": 2}, draft_tokens=2)) == []
    assert never_drafts("mod_2", speculative(**NGRAM, engine_method="ngram-mod", draft_tokens=2)) == []
    assert never_drafts("plain", None) == []


def test_validation_names_the_arm_that_cannot_draft():
    raw = {
        "engine": {"kind": "llamacpp", "launch": "native", "embedded": True},
        "arms": {
            "baseline": {},
            "ngram_2": {"speculative": {"method": "ngram", "draft_tokens": 2, "prompt_lookup_max": 3}},
        },
        "workloads": {"chat": {"prompts": "experiments/prompts/chat.jsonl"}},
    }
    with pytest.raises(
        config.ExperimentError,
        match=r"arms\.ngram_2\.speculative: ngram-simple drafts only.*"
        r"raise draft_tokens to 3",
    ):
        config.validate(raw)
    # records of a run that already happened are re-rendered: the analysis finds the arm instead
    assert "ngram_2" in config.validate(raw, measured=True).arms
    raw["arms"]["ngram_2"]["speculative"]["draft_tokens"] = 3
    config.validate(raw)


def _runs(drafts: dict[str, list[int | None]]) -> pd.DataFrame:
    rows = []
    for arm, ds in drafts.items():
        for d in ds:
            rows.append(
                {
                    "arm": arm,
                    "workload": "code",
                    "valid": True,
                    "draft_budget": 2 if arm != "base" else None,
                    "draft_tokens": d,
                }
            )
    return pd.DataFrame(rows)


def test_never_drafted_needs_every_run_to_report_zero():
    runs = _runs({"base": [None, None], "silent": [0, 0, 0], "drafts": [0, 5, 3], "unknown": [0, None]})
    assert spec.never_drafted(runs) == [{"arm": "silent", "workload": "code", "runs": 3, "draft_budget": 2}]


def test_analysis_finds_the_arm_that_never_drafted():
    """Two blocks per arm; ngram_2's counters report no drafts: stats.json carries the finding."""
    rows = []
    for block, arm in enumerate(["baseline", "ngram_2", "ngram_4", "baseline", "ngram_2", "ngram_4"]):
        for run in range(3):
            n, wall = 100, 0.05 + 0.001 * run + 0.0005 * block
            d = {"baseline": None, "ngram_2": 0, "ngram_4": 30}[arm]
            rows.append(
                {
                    "experiment": "x",
                    "arm": arm,
                    "block": block,
                    "position": block,
                    "round": 1 + block // 3,
                    "run": run,
                    "warmup": False,
                    "workload": "code",
                    "prompt_id": run,
                    "valid": True,
                    "invalid_reason": None,
                    "started_at": 1000.0 + 10 * block + run,
                    "wall_s": wall,
                    "ttft_s": 0.01,
                    "completion_tokens": n,
                    "prompt_tokens": 20,
                    "decode_tok_s": n / wall,
                    "draft_budget": {"baseline": None, "ngram_2": 2, "ngram_4": 4}[arm],
                    "draft_tokens": d,
                    "accepted_tokens": None if d is None else d // 2,
                    "verify_steps": None if d is None else 80,
                    "acceptance_length": None,
                }
            )
    cfg = config.validate(
        {
            "engine": {"kind": "vllm"},
            "arms": {
                "baseline": {},
                "ngram_2": {"speculative": {"method": "ngram", "draft_tokens": 2}},
                "ngram_4": {"speculative": {"method": "ngram", "draft_tokens": 4}},
            },
            "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}},
            "design": {"kind": "abab", "rounds": 2, "runs_per_block": 3},
        }
    )
    stats = analyze(pd.DataFrame(rows), cfg).data()
    never = [f for f in stats["findings"] if f["kind"] == "never drafted"]
    assert [(f["arm"], f["workload"]) for f in never] == [("ngram_2", "code")]
    assert never[0]["payload"] == {"runs": 6, "draft_budget": 2}
    assert "proposed no draft token" in message(never[0])
    # the arm that never drafted is no budget: with it gone, ngram_4 is alone and there is no budget table
    assert stats["budget_groups"] == []
    assert [r["reading"] for r in stats["speculative"] if r["arm"] == "ngram_2"] == ["never drafted"]
    assert [reading_words(r["reading"]) for r in stats["speculative"] if r["arm"] == "ngram_2"] == [
        "never drafted: the engine proposed no draft token, so this arm measured the baseline"
    ]
    assert stats["never_drafted"] == [{"arm": "ngram_2", "workload": "code", "runs": 6, "draft_budget": 2}]
