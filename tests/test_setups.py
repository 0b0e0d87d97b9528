"""From a real user's box: setups other than the embedded demo end in an article, or fail in seconds.

- An attached server (the user's own, here bracket's reference server started by hand as vLLM answers)
  that serves the model under a hub-style name (--served-model-name, as vLLM's flag): with the name in no local cache, the article says the ceiling is
  unknown, why, and which key gives it; with the model in a local Hugging Face cache, the same run's
  article has the byte account and the ceiling. Physics runs before the first block.
- A model path that does not exist stops the run before any block, in seconds, naming the key.
Both run `snakemake` for real in a copy of the workflow."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bracket.physics import weights
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk
from tests.support import snakemake as run_snakemake

_spec = importlib.util.spec_from_file_location("hf_cache", Path(__file__).parent / "data" / "physics" / "hf_cache.py")
_hf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hf)

HUB_NAME = "Qwen/Qwen3-8B"
ATTACH = """title: "Attached: a server that names its model like the hub"
engine: {kind: openai, launch: attach, embedded: false, base_url: "http://127.0.0.1:%d", startup_timeout_s: 120}
arms:
  first: {label: "the server as it runs"}
  again: {label: "the same server, later"}
reference: first
workloads:
  code: {prompts: experiments/prompts/code.jsonl}
design: {kind: abab, rounds: 2, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}
request: {max_tokens: 16}
analysis: {bootstrap_resamples: 200}
hardware: {probe_bandwidth: false, bandwidth_gbps: 20}
"""


def snakemake(repo, *args, env=None, timeout=1500):
    """tests.support's runner, and the seconds it took."""
    t0 = time.monotonic()
    proc = run_snakemake(repo, *args, env=env, timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def hub_named_server(tmp_path_factory):
    """bracket's reference server, started the way a user starts vLLM, naming its model Qwen/Qwen3-8B; and a
    model folder (config, tokenizer, one safetensors file) whose bytes the account reads once it is cached.
    What is resolved here (the name, the cache, the byte account) is bracket's alone: no engine is needed."""
    model = tiny_model(tmp_path_factory.mktemp("model") / "tiny")
    port = fk.free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bracket.engines.reference_server",
            "--port",
            str(port),
            "--rate",
            "2000",
            "--ttft",
            "0.005",
            "--served-model-name",
            HUB_NAME,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONPATH=str(fk.ROOT / "workflow")),
    )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the reference server")
        yield port, model
    finally:
        server.kill()
        server.wait()


@pytest.mark.integration
def test_an_attached_hub_named_server_ends_in_an_article_with_or_without_its_bytes(hub_named_server, tmp_path_factory):
    port, model = hub_named_server
    repo = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    (repo / "experiments" / "attach_hub.yaml").write_text(ATTACH % port)
    cache = tmp_path_factory.mktemp("hf") / "hub"
    env = dict(fk.snakemake_env(), HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    proc, _ = snakemake(repo, "attach_hub", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]

    # No bytes anywhere: the article still comes, and says why and which key gives the ceiling.
    res = repo / "results" / "attach_hub"
    acct = json.loads((res / "weights.json").read_text())
    assert acct["status"] == "unknown" and acct["model"] == HUB_NAME
    assert json.loads((res / "ceiling.json").read_text())["status"] == "unknown"
    md = (repo / "report" / "attach_hub" / "article.md").read_text()
    assert "The ceiling is unknown" in md
    assert f"{HUB_NAME} is a hub id that is not in the local Hugging Face cache" in md
    assert "To get it, set engine.model" in md
    assert "not in the local Hugging Face cache" in (repo / "logs" / "attach_hub" / "weights.log").read_text()
    # Physics first: the account was written before the first block's records.
    blocks = sorted((res / "raw").glob("block-*.jsonl"))
    assert len(blocks) == 4
    assert (res / "weights.json").stat().st_mtime <= min(b.stat().st_mtime for b in blocks)
    block_mtimes = {b.name: b.stat().st_mtime for b in blocks}

    # The same name found in a local Hugging Face cache: the byte account and the ceiling, nothing remeasured.
    _hf.hf_cache(cache, HUB_NAME, model)
    proc, _ = snakemake(repo, "attach_hub", "--forcerun", "weights", env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    acct = json.loads((res / "weights.json").read_text())
    assert acct["status"] == "measured" and acct["source"]["kind"] == "hf-cache"
    assert acct["bytes_per_token"] == weights.account(model)["bytes_per_token"]
    c = json.loads((res / "ceiling.json").read_text())
    assert c["status"] == "computed" and c["ceiling_tok_s"] == pytest.approx(20e9 / acct["bytes_per_token"])
    md = (repo / "report" / "attach_hub" / "article.md").read_text()
    assert "The ceiling is unknown" not in md and "Byte account of" in md
    assert {b.name: b.stat().st_mtime for b in sorted((res / "raw").glob("block-*.jsonl"))} == block_mtimes


@pytest.mark.integration
def test_a_model_path_that_does_not_exist_stops_the_run_before_any_block_in_seconds(tmp_path):
    repo = fk.repo_copy(tmp_path / "repo")
    (repo / "experiments" / "missing_model.yaml").write_text(
        "engine: {kind: vllm, embedded: false, model: /nonexistent/Qwen3-8B, port: 8038}\narms: {baseline: {}}\n"
    )
    proc, took = snakemake(repo, "missing_model", timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "experiments/missing_model.yaml: cannot run on this host" in out
    assert "engine.model is '/nonexistent/Qwen3-8B', which does not exist on this host" in out
    assert not (repo / "results" / "missing_model").exists() and not (repo / "logs" / "missing_model").exists()
    assert took < 60, f"took {took:.1f} s"  # snakemake's own start-up is most of it
