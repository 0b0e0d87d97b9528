"""Attached servers started the ordinary way, no extra flags: identified, probed, and measured to an article.

vLLM's CPU build is started as a user starts it (`python -m vllm.entrypoints.openai.api_server
--model M --served-model-name NAME` plus only what the CPU build needs on this machine), so it
reports no cached tokens (no --enable-prompt-tokens-details): the cache guard reads its
prefix-cache hit counters. llama-server is the workflow's CPU build, started with -m and --port
only. The generic case is the reference server answering as a generic OpenAI server. Each ends
in an article from the shipped experiments/examples/attach_openai.yaml (base_url changed, one small
round), whose method section says how the cache was checked. The workflow runs in a copy under tmp_path
(faultkit.repo_copy), so the checkout is left as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

import httpx
import pytest
import yaml
from bracket.engines import identify
from bracket.engines.reference_server import ReferenceServer, free_port
from bracket.experiment import probe

from tests.support import repo_copy
from tests.support import snakemake as run_snakemake

NAME = "qwen-tiny"  # a served name no bracket default would guess


def _wait(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 900) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError(f"not ready after {timeout_s} s: {log.read_text()[-3000:]}")


def _serve(argv: list[str], env: dict, tmp: Path):
    log = tmp / "server.log"
    proc = subprocess.Popen(
        argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
    )
    return proc, log


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def plain_vllm(embedded_engine, tmp_path_factory):
    engine, model = embedded_engine
    port = free_port()
    # The CPU build on a shared 2-core machine needs its KV space in GiB (the default 0.92 of RAM fails),
    # bfloat16 and, for a start in seconds rather than a minute, eager mode (DESIGN.md, "Engines").
    proc, log = _serve(
        [
            str(engine / "bin/python"),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "bfloat16",
            "--enforce-eager",
            "--max-model-len",
            "2048",
        ],
        {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
        tmp_path_factory.mktemp("vllm"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, log)
        yield url
    finally:
        _stop(proc)


def attach_experiment(wf: Path, name: str, url: str, **request) -> Path:
    """The shipped example with its URL changed and one small round (nothing else), as wf/experiments/NAME.yaml."""
    cfg = yaml.safe_load((wf / "experiments/examples/attach_openai.yaml").read_text())
    cfg["engine"]["base_url"] = url
    cfg["design"].update(rounds=1, runs_per_block=2, warmup_runs=1, cooldown_s=0)
    cfg["request"].update(max_tokens=32, **request)
    path = wf / "experiments" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def wf(tmp_path_factory) -> Path:
    """A copy of the workflow (no engine: every server here is attached); each test names its own experiment."""
    return repo_copy(tmp_path_factory.mktemp("attach"))


snakemake = partial(run_snakemake, timeout=1500)


def end_to_end(wf: Path, name: str, url: str) -> tuple[str, list[dict]]:
    attach_experiment(wf, name, url)
    proc = snakemake(wf, name)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    article = (wf / "report" / name / "article.md").read_text()
    metas = [json.loads(p.read_text()) for p in sorted((wf / "results" / name / "raw").glob("block-*.meta.json"))]
    return article, metas


@pytest.mark.engine
def test_a_plainly_started_vllm_is_identified_and_its_cache_read_from_its_counters(plain_vllm, wf):
    from bracket.experiment import config

    with httpx.Client() as http:
        found = identify.identify(http, plain_vllm)
    assert (found.kind, found.version) == ("vllm", "0.32.0")
    cfg_path = attach_experiment(wf, "attach_probe_vllm", plain_vllm)
    rep = probe.run(config.load(cfg_path), wf)
    assert rep.problems == [] and rep.model == NAME
    # No --enable-prompt-tokens-details: the counters, and the identical repeat shows the hit they count.
    assert rep.cache_check == "metrics" and rep.cache_repeat and rep.cache_repeat > 0
    assert rep.seconds < 20


@pytest.mark.engine
def test_the_shipped_attach_example_ends_in_an_article_on_a_plain_vllm(plain_vllm, wf):
    article, metas = end_to_end(wf, "attach_e2e_vllm", plain_vllm)
    assert {m["engine"] for m in metas} == {"vllm"}
    assert {m["engine_identified"]["version"] for m in metas} == {"0.32.0"}
    assert "Cache check:" in article and "prefix-cache hit counters on /metrics" in article


@pytest.mark.engine
def test_a_wrong_served_name_stops_the_workflow_before_any_block(plain_vllm, wf):
    name = "attach_wrong_name"
    path = attach_experiment(wf, name, plain_vllm)
    cfg = yaml.safe_load(path.read_text())
    cfg["engine"]["served_model"] = "Qwen/Qwen3-0.6B"
    path.write_text(yaml.safe_dump(cfg))
    t0 = time.monotonic()
    proc = snakemake(wf, name, timeout=300)
    assert proc.returncode != 0 and time.monotonic() - t0 < 60  # parse, probe, stop: no block, no wait
    assert "vLLM" in proc.stderr and f"serves '{NAME}'" in proc.stderr and "engine.served_model" in proc.stderr
    assert not (wf / "results" / name / "raw").exists()


@pytest.mark.integration
def test_the_shipped_attach_example_ends_in_an_article_on_a_generic_server(wf):
    with ReferenceServer(rate=3000, ttft=0.002, generic=True) as srv:
        article, metas = end_to_end(wf, "attach_e2e_generic", srv.url)
    assert {m["engine"] for m in metas} == {"openai"}
    assert "Cache check:" in article and "cache not reported" in article and "unique in the experiment" in article
    stats = json.loads((wf / "results/attach_e2e_generic/stats.json").read_text())
    assert any(f["kind"] == "cache" for f in stats["findings"])


@pytest.mark.integration
def test_a_server_that_cannot_pin_the_length_stops_the_workflow_before_any_block(wf):
    name = "attach_no_ignore_eos"
    with ReferenceServer(rate=3000, ttft=0.002, generic=True, eos_after=3, ignores_ignore_eos=True) as srv:
        attach_experiment(wf, name, srv.url)
        t0 = time.monotonic()
        proc = snakemake(wf, name, timeout=300)
        assert proc.returncode != 0 and time.monotonic() - t0 < 60
    assert "ignore_eos" in proc.stderr and "returned 3 of the 16 tokens" in proc.stderr
    assert not (wf / "results" / name / "raw").exists()


@pytest.mark.integration
def test_an_unreachable_url_stops_the_workflow_in_seconds(wf):
    name = "attach_nothing"
    attach_experiment(wf, name, f"http://127.0.0.1:{free_port()}")
    t0 = time.monotonic()
    proc = snakemake(wf, name, timeout=300)
    assert proc.returncode != 0 and time.monotonic() - t0 < 60  # was 5 min 23 s
    assert "nothing answers at" in proc.stderr and "engine.base_url" in proc.stderr


@pytest.fixture(scope="module")
def plain_llama_server(llama_server, tiny_gguf, tmp_path_factory):
    """The workflow's llama-server build with -m and --port only (and the host, to stay local)."""
    port = free_port()
    proc, log = _serve(
        [llama_server["llama_server"], "-m", tiny_gguf, "--host", "127.0.0.1", "--port", str(port)],
        {},
        tmp_path_factory.mktemp("llama"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc, log, timeout_s=300)
        yield url
    finally:
        _stop(proc)


@pytest.mark.engine
def test_a_plain_llama_server_is_identified_and_ends_in_an_article(plain_llama_server, wf):
    with httpx.Client() as http:
        found = identify.identify(http, plain_llama_server)
    assert found.kind == "llamacpp" and found.version  # build_info
    article, metas = end_to_end(wf, "attach_e2e_llamacpp", plain_llama_server)
    assert {m["engine"] for m in metas} == {"llamacpp"}
    assert (
        "Cache check:" in article
        and "cached tokens llama.cpp (llama-server)" in article
        and "reported in its response" in article
    )
