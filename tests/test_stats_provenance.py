"""stats.json's `provenance` (bracket.stats.provenance) from hand-made block metas: what the article's method section
words, worked out here by hand from the metas each test writes."""

from __future__ import annotations

import json

from bracket.engines import provenance as EP
from bracket.experiment import config
from bracket.stats import provenance as P

VLLM_ARGV = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--enforce-eager"]
SPEC = '{"method":"ngram","num_speculative_tokens":4}'
NICE = {"nice": 10, "server": "set", "client": "set"}


def _cfg(**arms):
    return config.validate(
        {
            "arms": arms or {"base": {}, "spec": {"speculative": {"method": "ngram", "draft_tokens": 4}}},
            "reference": next(iter(arms or {"base": {}})),
            "workloads": {"w": {"prompts": "p.jsonl"}},
            "design": {"kind": "abab", "rounds": 1},
        }
    )


def _meta(block, arm, **kw):
    argv = VLLM_ARGV + (["--speculative-config", SPEC] if arm == "spec" else [])
    return {
        "block": block,
        "arm": arm,
        "round": 1,
        "engine": "vllm",
        "launch": "native",
        "argv": argv,
        "env": {"VLLM_TARGET_DEVICE": "cpu"},
        "status": "complete",
        "ready_s": 30.0 + block,
        "started_at": 1000.0 + 100 * block,
        "server_id": f"x-p{block}",
        "host": "a",
        "priority": NICE,
        "version": json.dumps({"version": "0.32.0"}),
        "server_state": {"prefix_cache": "off", "how": ["--no-enable-prefix-caching"], "graphs": None},
        **kw,
    }


def test_a_block_that_differed_in_priority_is_marked_and_the_shared_values_are_stated():
    metas = [_meta(0, "base"), _meta(1, "spec"), _meta(2, "base", priority={**NICE, "client": "denied"})]
    prov = P.provenance(metas, [], None, None, _cfg())
    assert prov["priority"] == {"differs": True, "value": None}
    assert prov["layout"] == {"differs": False, "value": None}  # no block set one
    same = P.provenance(metas[:2], [], None, None, _cfg())
    assert same["priority"] == {"differs": False, "value": NICE}
    assert P.provenance([], [], None, None, _cfg())["priority"] == {"differs": False, "value": None}
    # a block recorded before the key existed differs from one that set it
    assert P.shared([{"pinning": {"compute": "1"}}, {}], "pinning") == {"differs": True, "value": None}


def test_two_hosts_with_different_hardware_are_two_groups_with_their_hosts():
    h100 = {"name": "H100", "memory_mib": 81559, "driver": "550.1"}
    big = {"cpu": "EPYC", "cpus": 64, "memory_gib": 512, "kernel": "6.1"}
    metas = [
        _meta(0, "base", host="b", host_info=big, gpus=[h100, h100]),
        _meta(1, "spec", host="a", host_info={**big, "cpus": 8}, gpus=[]),
        _meta(2, "base", host="c", host_info=big, gpus=[h100, h100]),
        _meta(3, "spec", host="d"),  # nothing recorded of its machine: in no group
    ]
    groups = P.provenance(metas, [], None, None, _cfg())["hardware"]
    assert groups == [
        {**big, "gpus": [{"name": "H100", "memory_mib": 81559, "driver": "550.1", "count": 2}], "hosts": ["b", "c"]},
        {**big, "cpus": 8, "gpus": [], "hosts": ["a"]},
    ]


def test_an_old_meta_without_server_state_is_read_from_its_launch_command_by_the_adapter(tmp_path):
    old = [{k: v for k, v in _meta(0, "base").items() if k != "server_state"}]
    # the analysis reads the state from the meta alone: none recorded, none stated
    assert P.provenance(old, [], None, None, _cfg())["arms"][0]["states"] == [None]
    # the blocks' metas as the analysis is handed them (bracket.engines.provenance.read_block_metas): the adapter
    # reads an old block's state from its launch command. vLLM's on "--enforce-eager" without a prefix-caching
    # flag: the cache on (vLLM's default), no graphs
    path = tmp_path / "block-0.meta.json"
    path.write_text(json.dumps({k: v for k, v in old[0].items() if k != "block"}))
    read = EP.read_block_metas([path], _cfg())
    assert read[0]["block"] == 0  # from the file's name
    arm = P.provenance(read, [], None, None, _cfg())["arms"][0]
    assert arm["states"] == [
        {
            "prefix_cache": "on",
            "how": ["no prefix-caching flag (vLLM's default: on)"],
            "graphs": "off (--enforce-eager)",
        }
    ]
    # llama.cpp's adapter takes the arm as the experiment states it: prefix caching on asks cache_prompt true
    llama = {"block": 0, "arm": "b", "engine": "llamacpp", "argv": ["llama-server", "--cache-ram", "0"]}
    cfg = _cfg(b={"server": {"prefix_caching": True}}, c={})
    assert "cache_prompt true in each request" in EP.with_server_state(llama, cfg)["server_state"]["how"]
    off = EP.with_server_state({**llama, "arm": "c"}, cfg)["server_state"]
    assert off["prefix_cache"] == "off" and "cache_prompt false in each request" in off["how"]
    # a recorded state is kept as recorded, and the meta handed in is not changed
    assert EP.with_server_state(_meta(0, "base"), _cfg()) == _meta(0, "base")
    assert "server_state" not in llama
    # an engine no adapter knows: no state, and nothing raised
    assert EP.with_server_state({"engine": "nonesuch", "arm": "b", "argv": []}, cfg)["server_state"] is None
    assert P.server_state({"engine": "nonesuch", "argv": []}) is None


def test_arms_state_flags_launch_and_whether_their_states_differ():
    metas = [_meta(0, "base"), _meta(1, "spec"), _meta(2, "base")]
    prov = P.provenance(metas, [], None, None, _cfg())
    base, spec = prov["arms"]
    assert base["flags"] == [] and spec["flags"] == ["--speculative-config", SPEC]
    assert base["launch"] == {"block": 0, "argv": VLLM_ARGV, "env": {"VLLM_TARGET_DEVICE": "cpu"}}
    assert spec["launch"]["block"] == 1 and len(base["states"]) == 1 and not prov["arm_states_differ"]
    other = {"prefix_cache": "on", "how": ["x"], "graphs": None}
    prov = P.provenance([*metas[:2], _meta(2, "base", server_state=other)], [], None, None, _cfg())
    assert prov["arms"][0]["states"] == [metas[0]["server_state"], other] and prov["arm_states_differ"]
    # an arm no block ran: no flags, no state, no launch
    none = P.provenance(metas[:1], [], None, None, _cfg())["arms"][1]
    assert none == {"arm": "spec", "flags": None, "states": [], "launch": None}


def test_a_failed_block_keeps_its_status_and_log_tail_and_a_complete_one_no_tail():
    metas = [_meta(0, "base", log_tail="ok"), _meta(1, "spec", status="failed", log_tail="Error: bad flag <b>")]
    blocks = P.provenance(metas, [], None, None, _cfg())["blocks"]
    assert [b["status"] for b in blocks] == ["complete", "failed"]
    assert "log_tail" not in blocks[0] and blocks[1]["log_tail"] == "Error: bad flag <b>"  # kept as recorded
    assert blocks[1]["ready_s"] == 31.0 and blocks[1]["started_at"] == 1100.0 and blocks[1]["server_id"] == "x-p1"
    assert blocks[0]["telemetry"] is None  # no NVML samples
    tel = {"n": 3, "name": "H100", "sm_clock_mhz": {"min": 1980, "median": 1980, "max": 1980}}
    assert P.block_record(_meta(0, "base", telemetry=tel))["telemetry"] == tel


def test_attempts_model_and_what_served():
    attempt = {**_meta(1, "spec", status="failed"), "error": "killed", "records_kept": 2, "file": "raw/failed/x.jsonl"}
    build = {"layers": 4, "seed": 1}
    metas = [_meta(0, "base", platform="Linux-x"), _meta(1, "spec", version="0.33.0", platform="Linux-x")]
    prov = P.provenance(metas, [attempt], "resources/models/m", build, _cfg())
    assert prov["failed_attempts"] == [
        {
            "block": 1,
            "arm": "spec",
            "status": "failed",
            "error": "killed",
            "records_kept": 2,
            "file": "raw/failed/x.jsonl",
        }
    ]
    assert prov["model_build"] == build
    sv = prov["served"]
    assert sv["versions"] == ["0.32.0", "0.33.0"] and sv["kind"] == "vllm" and sv["launches"] == ["native"]
    assert sv["platforms"] == ["Linux-x"] and sv["model_dir"] == "resources/models/m" and sv["identified"] is None
    assert P.provenance(metas, [], "embedded", None, _cfg())["served"]["model_dir"] is None  # the schema's default
    assert not prov["flush_warnings"]
    assert P.provenance([_meta(0, "base", warnings=["flush failed"])], [], None, None, _cfg())["flush_warnings"]


def test_the_weights_served_are_read_against_the_pin():
    ok = {"file": "model.safetensors", "sha256": "aa", "pinned": "aa", "matches": True, "build": "AuthenticAMD"}
    other = {"file": "model.safetensors", "sha256": "bb", "pinned": "aa", "matches": False, "build": None}
    assert P.weights_served([{"model_sha256": ok}, {"model_sha256": ok}]) == {
        "files": ["model.safetensors"],
        "sha256": ["aa"],
        "pinned": ["aa"],
        "builds": ["AuthenticAMD"],
        "blocks": 2,
        "of": 2,
        "reading": "pinned",
    }
    assert P.weights_served([{"model_sha256": other}, {}])["reading"] == "other"
    assert P.weights_served([{"model_sha256": other}, {}])["blocks"] == 1
    assert P.weights_served([{"model_sha256": other}, {}])["builds"] == []
    assert P.weights_served([{"model_sha256": ok}, {"model_sha256": other}])["reading"] == "differ"
    assert P.weights_served([{"model_sha256": {**ok, "pinned": None, "matches": None}}])["reading"] == "unpinned"
    assert P.weights_served([{"model_fingerprint": {}}]) is None


def test_the_section_is_plain_json():
    metas = [_meta(0, "base"), _meta(1, "spec", status="failed", log_tail="x")]
    prov = P.provenance(metas, [], None, {"layers": 4}, _cfg())
    assert json.loads(json.dumps(prov, allow_nan=False)) == prov
