"""The vLLM adapter on the real embedded engine (vLLM 0.32 CPU build, tiny local model).

The end-to-end pipeline (test_pipeline.py) already reads acceptance from /metrics differences
through the runner; here the adapter's other source is checked against it: with
engine.per_request_metrics the response itself carries `metrics.speculative_decoding`, and for
a single stream the two must agree request by request.
"""

from __future__ import annotations

import httpx
import pytest
from bracket import engines
from bracket.engines import launch, provenance
from bracket.experiment import config
from bracket.wire.client import get_text
from conftest import ROOT

pytestmark = pytest.mark.engine
PORT = 8051


@pytest.fixture(scope="module")
def cfg(embedded_engine):
    c = config.validate(
        {
            "engine": {
                "kind": "vllm",
                "embedded": True,
                "port": PORT,
                "per_request_metrics": True,
                "startup_timeout_s": 600,
            },
            "arms": {"ngram_4": {"speculative": {"method": "ngram", "draft_tokens": 4}}},
            "request": {"max_tokens": 48, "timeout_s": 120},
        }
    )
    engine, model = embedded_engine  # the clone's own, or BRACKET_TEST_ENGINE / BRACKET_TEST_MODEL
    assert (engine / ".installed").exists() and (model / "build.json").exists()
    return c, engine, model


def test_per_request_acceptance_from_the_response_matches_the_counter_difference(cfg, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg, engine, model = cfg
    adapter = engines.get("vllm")
    arm = cfg.arms["ngram_4"]
    model = str(model)
    argv = launch.server_argv(cfg, adapter, arm, model, str(engine / "bin" / "python"), name="unused")
    assert argv[-3:] == ["--enable-per-request-metrics", "--per-request-spec-decode-metrics", "summary"]
    server = launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=tmp_path / "server.log",
        base_url=launch.base_url(cfg),
        secret_names=[],
    )
    with server:
        server.wait_ready(cfg.engine.startup_timeout_s)
        base = launch.base_url(cfg)
        with httpx.Client(timeout=30) as http:
            meta = provenance.collect(cfg, adapter, http, base, "bracket-model", model)
            assert meta["engine_version"] == "0.32.0"
            assert meta["model_fingerprint"]["covers"][0] == "config.json"
            prompts = [
                "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
                "The quick brown fox jumps over the lazy dog. The quick brown fox",
                "import os\nimport sys\nimport json\nimport",
            ]
            for i, prompt in enumerate(prompts):
                before = adapter.spec_counters(get_text(http, base + "/metrics"))
                out = adapter.measure(http, base, "bracket-model", f"# {i}\n{prompt}", cfg.request, 1234, arm)
                after = adapter.spec_counters(get_text(http, base + "/metrics"))
                m, spec = out.measurement, out.spec
                assert m.error is None and m.completion_tokens == 48 and m.finish_reason == "length"
                assert spec.source == "response metrics.speculative_decoding"
                assert spec.verify_steps == after.drafts - before.drafts
                assert spec.accepted_tokens == after.accepted - before.accepted
                assert spec.draft_tokens == after.draft_tokens - before.draft_tokens
                assert 1.0 <= spec.acceptance_length <= 5.0  # at most the budget plus the target's own token
    assert not server.alive()
