"""Where the workflow's llama.cpp build and the embedded model's GGUF are found (no server needed)."""

import json
from pathlib import Path

import pytest
from bracket import embedded
from bracket.experiment import config
from bracket.experiment.config import ExperimentError


def _cfg(**engine):
    return config.validate({"engine": engine, "arms": {"a": {}}})


def test_the_embedded_model_is_served_as_gguf_by_llamacpp():
    assert embedded.model_dir(_cfg(kind="llamacpp")) == "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300.gguf"
    assert embedded.model_dir(_cfg(kind="vllm")) == "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"
    assert embedded.engine_python(_cfg(kind="llamacpp")) == "python3"  # no venv: llama-server is a program


def test_llamacpp_uses_the_workflows_build_unless_an_executable_is_named(tmp_path):
    record = tmp_path / embedded.LLAMACPP_BUILD
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"llama_server": "/cache/llama.cpp/0.3.36-cpu-x/bin/llama-server"}))
    native = _cfg(kind="llamacpp")
    assert (
        embedded.with_llama_server(native, tmp_path).engine.executable
        == "/cache/llama.cpp/0.3.36-cpu-x/bin/llama-server"
    )
    assert native.engine.executable == ""  # the loaded config is left as it was
    own = _cfg(kind="llamacpp", embedded=False, model="/m.gguf", executable="/opt/llama-server")
    assert embedded.with_llama_server(own, tmp_path) is own
    assert embedded.with_llama_server(_cfg(kind="vllm"), tmp_path).engine.executable == ""


def test_a_missing_build_record_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="snakemake --cores 1 resources/engines/llama.cpp-0.3.36/build.json"):
        embedded.llama_server(tmp_path)


def test_embedded_serves_with_vllm_or_llamacpp_only():
    with pytest.raises(ExperimentError, match="engine.embedded is true, which serves with vllm"):
        _cfg(kind="sglang")


def test_the_build_folder_comes_from_the_environment_else_the_record_else_a_path_that_does_not_exist(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("BRACKET_LLAMACPP_BUILD", raising=False)
    assert not embedded.llamacpp_build_dir(tmp_path).exists()  # no build yet: the caller names the rule to run
    record = tmp_path / embedded.LLAMACPP_BUILD
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"path": "/cache/llama.cpp/0.3.36-cpu-x"}))
    assert embedded.llamacpp_build_dir(tmp_path) == Path("/cache/llama.cpp/0.3.36-cpu-x")
    monkeypatch.setenv("BRACKET_LLAMACPP_BUILD", "/elsewhere")
    assert embedded.llamacpp_build_dir(tmp_path) == Path("/elsewhere")
