"""Where the byte account finds the model on a user's box: a hub id in the local Hugging Face cache, a
container path mapped through docker volumes, a local GGUF; and, with none, an account that says why
the ceiling is unknown. The checks a run makes before its first block (bracket.experiment.preflight)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest
from bracket.experiment import config, preflight
from bracket.physics import ceiling, modelsource, weights
from bracket.typed.experiment import Experiment

_spec = importlib.util.spec_from_file_location("hf_cache", Path(__file__).parent / "data" / "physics" / "hf_cache.py")
_hf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hf)
hf_cache = _hf.hf_cache


def experiment(**engine) -> Experiment:
    return config.validate(
        {
            "engine": {"embedded": False, **engine},
            "arms": {"baseline": {}},
            "hardware": {"probe_bandwidth": False, "bandwidth_gbps": 20},
        },
        source="test",
    )


@pytest.fixture()
def offline(monkeypatch, tmp_path):
    """No hub, an empty cache of our own: nothing leaks in from the machine's real cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"


@pytest.mark.engine  # the embedded engine's trained model, built by the workflow when absent
def test_a_hub_id_found_in_the_local_cache_gives_the_byte_account(embedded_engine, offline):
    _, model = embedded_engine
    snap = hf_cache(offline, "Qwen/Qwen3-8B", model)
    cfg = experiment(kind="vllm", model="Qwen/Qwen3-8B")
    src = modelsource.resolve(cfg)
    assert (src.kind, src.repo_id, Path(src.path)) == ("hf-cache", "Qwen/Qwen3-8B", snap)
    acct = weights.account_for_experiment(cfg)
    direct = weights.account(model)
    assert acct["status"] == "measured" and acct["source"]["kind"] == "hf-cache"
    assert acct["bytes_per_token"] == direct["bytes_per_token"] > 0
    assert acct["components"] == direct["components"]


@pytest.mark.engine  # the embedded engine's trained model, built by the workflow when absent
def test_a_hub_id_at_a_revision_the_cache_lacks_is_unknown(embedded_engine, offline):
    _, model = embedded_engine
    hf_cache(offline, "Qwen/Qwen3-8B", model)
    assert modelsource.hf_cache_snapshot("Qwen/Qwen3-8B", revision="main") is not None
    assert modelsource.hf_cache_snapshot("Qwen/Qwen3-4B") is None


@pytest.mark.engine  # the embedded engine's trained model, built by the workflow when absent
def test_a_container_path_is_mapped_to_the_host_through_the_volumes(embedded_engine, tmp_path, offline):
    _, model = embedded_engine
    host = tmp_path / "data" / "models"
    shutil.copytree(model, host / "tiny")
    cfg = experiment(
        kind="sglang",
        launch="docker",
        model="/models/tiny",
        docker={"image": "lmsysorg/sglang:v0.5.23", "volumes": [f"{host}:/models:ro"]},
    )
    src = modelsource.resolve(cfg)
    assert (src.kind, Path(src.path)) == ("container", host / "tiny")
    acct = weights.account_for_experiment(cfg)
    assert acct["source"]["kind"] == "container"
    assert acct["bytes_per_token"] == weights.account(model)["bytes_per_token"]
    assert preflight.model_problems(cfg, tmp_path) == []


def test_a_container_path_no_volume_covers_is_unknown_and_names_the_key(offline):
    cfg = experiment(
        kind="sglang",
        launch="docker",
        model="/opt/baked/Qwen3-8B",
        docker={"image": "img:1", "volumes": ["/data/models:/models:ro"]},
    )
    acct = weights.account_for_experiment(cfg)
    assert acct["status"] == "unknown" and acct["key"].startswith("engine.docker.volumes")
    assert "no mount of engine.docker.volumes covers" in acct["reason"]


def test_a_local_gguf(tmp_path, offline):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((64, 16), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((16, 16), dtype=np.float32))
    w.add_tensor("output.weight", np.zeros((64, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    acct = weights.account_for_experiment(experiment(kind="llamacpp", model=str(path)))
    assert acct["format"] == "gguf" and acct["source"]["kind"] == "local"
    # backbone 16x16 + output 64x16 + one embedding row of 16, all float32
    assert acct["bytes_per_token"] == 4 * (16 * 16 + 64 * 16 + 16)


def test_an_unknown_model_leaves_an_account_and_a_ceiling_that_say_why(tmp_path, offline):
    cfg = experiment(kind="vllm", model="Qwen/Qwen3-8B")
    assert modelsource.hub_reachable() is False  # HF_HUB_OFFLINE
    out = tmp_path / "weights.json"
    acct = weights.write_for_experiment(cfg, out)
    assert json.loads(out.read_text()) == acct
    assert acct["status"] == "unknown" and acct["bytes_per_token"] is None
    assert "not in the local Hugging Face cache" in acct["reason"] and str(offline) in acct["reason"]
    assert acct["key"].startswith("engine.model")
    cfg = cfg.model_copy(update={"hardware": cfg.hardware.model_copy(update={"steadiness_s": 0})})  # probed elsewhere
    c = ceiling.write_json(out, cfg, tmp_path / "ceiling.json")
    assert c["status"] == "unknown" and c["ceiling_tok_s"] is None and c["reason"] == acct["reason"]
    assert c["bandwidth_gbps"] == 20


def test_an_attached_server_names_its_model_and_unreadable_headers_are_unknown_not_fatal(tmp_path, offline):
    cfg = experiment(kind="openai", launch="attach", base_url="http://127.0.0.1:9", served_model="org/model")
    src = modelsource.resolve(cfg, model="embedded")
    assert (src.kind, src.name) == ("unknown", "org/model")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"\x00" * 4)
    acct = weights.account_for_experiment(experiment(kind="vllm", model=str(broken)))
    assert acct["status"] == "unknown" and "headers could not be read" in acct["reason"]


def test_an_attached_server_that_does_not_answer_is_unknown_with_the_url(offline):
    cfg = experiment(kind="openai", launch="attach", base_url="http://127.0.0.1:9")
    acct = weights.account_for_experiment(cfg, model="embedded")
    assert acct["status"] == "unknown" and "http://127.0.0.1:9/v1/models did not answer" in acct["reason"]


def test_hub_metadata_becomes_tensor_headers():
    """The remote path's one conversion, on huggingface_hub's own metadata classes (no hub here)."""
    from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

    def info(dtype, shape, begin, end):
        return TensorInfo(dtype=dtype, shape=shape, data_offsets=(begin, end))

    files = {
        "model-00001-of-00002.safetensors": SafetensorsFileMetadata(
            metadata={}, tensors={"model.embed_tokens.weight": info("BF16", [64, 16], 0, 2048)}
        ),
        "model-00002-of-00002.safetensors": SafetensorsFileMetadata(
            metadata={}, tensors={"lm_head.weight": info("BF16", [64, 16], 0, 2048)}
        ),
    }
    meta = SafetensorsRepoMetadata(metadata=None, sharded=True, weight_map={}, files_metadata=files)
    from bracket.physics.tensor_headers import hub_tensors

    tensors = hub_tensors(meta)
    assert [(t.name, t.dtype, t.shape, t.nbytes) for t in tensors] == [
        ("model.embed_tokens.weight", "BF16", (64, 16), 2048),
        ("lm_head.weight", "BF16", (64, 16), 2048),
    ]


@pytest.mark.integration
@pytest.mark.serial
def test_preflight_names_a_missing_model_and_engine_program_in_seconds(tmp_path):
    cfg = experiment(kind="llamacpp", model=str(tmp_path / "nope.gguf"), executable=str(tmp_path / "no-server"))
    t0 = time.monotonic()
    problems = preflight.problems(cfg, tmp_path)
    assert time.monotonic() - t0 < 5
    assert any("engine.model" in p and "does not exist on this host" in p for p in problems)
    assert any("no-server" in p and "engine.executable" in p for p in problems)
    # a hub id is the engine's to download; an attached server's model is not this host's business
    assert preflight.model_problems(experiment(kind="vllm", model="Qwen/Qwen3-8B"), tmp_path) == []
    assert preflight.model_problems(experiment(kind="openai", launch="attach", model="/elsewhere/m"), tmp_path) == []
    missing_python = experiment(kind="vllm", model="Qwen/Qwen3-8B", python=str(tmp_path / "python"))
    assert "not on PATH" in preflight.binary_problems(missing_python)[0]


def test_preflight_leaves_llama_server_to_the_workflows_own_build(tmp_path, monkeypatch):
    # A native llama.cpp with no executable named is served by the build rule's llama-server (not yet
    # built when the DAG is checked), so nothing on PATH is asked for; a named executable still is.
    monkeypatch.setenv("PATH", str(tmp_path))
    built = experiment(kind="llamacpp", model=str(tmp_path / "m.gguf"))
    assert preflight.binary_problems(built) == []
    named = experiment(kind="llamacpp", model=str(tmp_path / "m.gguf"), executable="llama-server")
    assert "'llama-server', which is not on PATH" in preflight.binary_problems(named)[0]


def test_an_arena_cell_on_an_engine_with_a_native_stream_is_refused_before_launch(tmp_path):
    # llama-benchy's chat request: SGLang's adapter (native /generate, no chat template) is refused at
    # validation; Ollama sends it through its own /api/chat stream; api: completions runs everywhere.
    arena_wl = {"w": {"prompts": "p.jsonl"}, "arena": {"kind": "arena", "prompts": "p.jsonl", "depth": 1024}}
    with pytest.raises(config.ExperimentError, match="native /generate.*api: completions"):
        config.validate(
            {
                "engine": {"embedded": False, "kind": "sglang", "model": "Qwen/Qwen3-8B"},
                "arms": {"baseline": {}},
                "workloads": arena_wl,
            },
            source="test",
        )
    as_text = {**arena_wl, "arena": {**arena_wl["arena"], "api": "completions"}}
    for kind, extra, wls in (
        ("sglang", {}, as_text),
        ("ollama", {}, arena_wl),
        ("vllm", {}, arena_wl),
        ("llamacpp", {}, arena_wl),
        ("openai", {"launch": "attach", "base_url": "http://127.0.0.1:8000"}, arena_wl),
    ):
        cfg = config.validate(
            {
                "engine": {"embedded": False, "kind": kind, "model": "Qwen/Qwen3-8B", **extra},
                "arms": {"baseline": {}},
                "workloads": wls,
            },
            source="test",
        )
        assert preflight.arena_problems(cfg) == []


@pytest.mark.engine  # the embedded engine's trained model, built by the workflow when absent
def test_bracket_weights_takes_a_hub_id_from_the_local_cache(embedded_engine, offline, capsys):
    from bracket import cli

    _, model = embedded_engine
    hf_cache(offline, "Qwen/Qwen3-8B", model)
    assert cli.main(["weights", "Qwen/Qwen3-8B", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes_per_token"] == weights.account(model)["bytes_per_token"]
    assert cli.main(["weights", "Qwen/Qwen3-4B"]) == 2
    assert "neither a path on this host nor a hub id in the local Hugging Face cache" in capsys.readouterr().err
