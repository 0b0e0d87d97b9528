"""Prefix-caching arena cells: which server each cell of a block runs in, and the cache guard inverted for the
inference phase (cached tokens must cover the context), with an early stop allowed when tg is not exact."""

import pytest
from bracket import records
from bracket.experiment import arena_workload, config


def cfg_with(kind="vllm", launch="native", arm=None, **workloads):
    eng = {"kind": kind, "embedded": False, "model": "/models/m", "port": 8051, "launch": launch}
    if launch == "attach":
        eng = {"kind": kind, "launch": "attach", "embedded": False, "base_url": "http://127.0.0.1:8051"}
    return config.validate(
        {"engine": eng, "arms": {"a": arm or {}}, "workloads": workloads or {"x": {"prompts": "p.jsonl"}}}, source="t"
    )


PREFIX = {"prompts": "p.jsonl", "kind": "arena", "cache": "prefix", "depth": 512, "prompt_tokens": 64}
FRESH = {"prompts": "p.jsonl", "kind": "arena", "depth": 512, "prompt_tokens": 64}


@pytest.mark.parametrize("kind", ["vllm", "sglang", "llamacpp"])
def test_prefix_cells_get_a_server_of_their_own_with_the_cache_on(kind):
    wl = {**PREFIX, "api": "completions"} if kind == "sglang" else PREFIX
    cfg = cfg_with(
        kind,
        single={"prompts": "p.jsonl"},
        fresh=FRESH if kind != "sglang" else {**FRESH, "api": "completions"},
        cached=wl,
    )
    (arm0, names0), (arm1, names1) = arena_workload.servers(cfg, "a")
    assert names0 == ["single", "fresh"] and names1 == ["cached"]
    assert arm0.server is None and arm1.server.prefix_caching is True
    assert cfg.arms["a"] is arm0  # the arm itself is not changed
    # the cached server's other settings are the schema's defaults, as if the arm had stated the cache alone
    assert config.as_data(arm1) == config.as_data(cfg_with(arm={"server": {"prefix_caching": True}}).arms["a"])


def test_one_server_where_nothing_differs():
    assert [n for _, n in arena_workload.servers(cfg_with(only=PREFIX), "a")] == [["only"]]  # the one server, cache on
    ((arm, names),) = arena_workload.servers(cfg_with(only=PREFIX), "a")
    assert arm.server.prefix_caching is True
    on = cfg_with(arm={"server": {"prefix_caching": True}}, single={"prompts": "p.jsonl"}, cached=PREFIX)
    assert [n for _, n in arena_workload.servers(on, "a")] == [["single", "cached"]]
    attach = cfg_with("openai", "attach", single={"prompts": "p.jsonl"}, cached=PREFIX)
    assert [n for _, n in arena_workload.servers(attach, "a")] == [["single", "cached"]]
    assert [n for _, n in arena_workload.servers(cfg_with(single={"prompts": "p.jsonl"}, fresh=FRESH), "a")] == [
        ["single", "fresh"]
    ]


def rec(phase, cached, expected, finish="stop", exact=False, n=100):
    return {
        "error": None,
        "cached_tokens": cached,
        "cache_expected": expected,
        "arena_phase": phase,
        "finish_reason": finish,
        "tg_exact": exact,
        "max_tokens": None if not exact else 128,
        "completion_tokens": n,
        "wall_s": 1.0,
    }


def test_inference_must_find_its_context_in_the_cache():
    assert records.validity(rec("inference", 512, 512)) == []
    assert records.validity(rec("inference", 384, 512)) == []  # one 128-token block short: within the slack
    kinds = [k for k, _ in records.reasons(rec("inference", 0, 512))]
    assert kinds == ["cache miss"]
    assert "0 cached tokens of a 512-token context" in records.validity(rec("inference", 0, 512))[0]
    assert [k for k, _ in records.reasons(rec("inference", None, 512))] == ["cached_tokens unknown"]


def test_the_context_load_must_find_nothing_but_the_template():
    assert records.validity(rec("ctx", 0, 0)) == []
    assert records.validity(rec("ctx", 16, 0)) == []  # the shared chat template's first block
    assert [k for k, _ in records.reasons(rec("ctx", 4096, 0))] == ["cache hit"]


def test_an_early_stop_is_valid_only_when_tg_is_not_exact():
    assert records.validity(rec("inference", 512, 512, finish="stop", exact=False, n=40)) == []
    assert [k for k, _ in records.reasons(rec("inference", 512, 512, finish="stop", exact=True, n=40))] == [
        "early stop",
        "token count",
    ]
    # a fresh cell keeps the ordinary guard: any cached token is a hit
    fresh = {"error": None, "cached_tokens": 3, "finish_reason": "length", "wall_s": 1.0}
    assert [k for k, _ in records.reasons(fresh)] == ["cache hit"]


def test_the_cached_server_keeps_the_arms_other_settings():
    cfg = cfg_with(arm={"server": {"context_length": 4096}}, single={"prompts": "p.jsonl"}, cached=PREFIX)
    (arm0, _), (arm1, _) = arena_workload.servers(cfg, "a")
    assert arm0.server.prefix_caching is None and arm0.server.context_length == 4096
    assert arm1.server.prefix_caching is True and arm1.server.context_length == 4096
