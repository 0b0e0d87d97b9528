"""Engine adapters against their documented formats: launch commands, response parsing, absent fields.

Response bodies are under tests/data/engines/, written from the documented formats (not captured;
see its README for the numbers worked out by hand). Each is served to the adapter by an
httpx.MockTransport, so the adapters' own request code runs; only the server is recorded.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from bracket import engines
from bracket.cli.launch import launch_command
from bracket.engines import launch, llamacpp, provenance, sglang
from bracket.engines.base import SpecFields
from bracket.experiment import config
from bracket.experiment.config import ExperimentError
from bracket.typed.experiment import Arm, Experiment
from conftest import ROOT

DATA = ROOT / "tests" / "data" / "engines"


def body(name: str) -> bytes:
    return (DATA / name).read_bytes()


class Recorded:
    """An httpx client whose server answers from recorded bodies, route by route; requests are kept."""

    def __init__(self, routes: dict):
        self.routes = {k: (v if isinstance(v, list) else [v]) for k, v in routes.items()}
        self.requests: list[httpx.Request] = []
        self.http = httpx.Client(transport=httpx.MockTransport(self._answer))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = f"{request.method} {request.url.path}"
        if key not in self.routes:
            return httpx.Response(404, json={"error": f"no route {key}"})
        answers = self.routes[key]
        status, content = answers.pop(0) if len(answers) > 1 else answers[0]
        return httpx.Response(status, content=content)

    def sent(self, path: str) -> dict:
        return json.loads(next(r for r in self.requests if r.url.path == path).content)


def cfg_for(kind: str, arms: dict | None = None, **engine) -> Experiment:
    return config.validate(
        {
            "engine": {"kind": kind, "embedded": False, "model": "/models/m", "port": 8051, **engine},
            "arms": arms or {"a": {}},
            "request": {"max_tokens": 8},
        },
        source="test",
    )


def arm_for(kind: str, arm: dict) -> Arm:
    """An arm as config.validate builds it for an experiment on `kind`."""
    return cfg_for(kind, {"a": arm}).arms["a"]


REQ = config.validate(
    {"arms": {"a": {}}, "request": {"max_tokens": 8, "temperature": 0.0, "seed": 1234, "timeout_s": 10.0}}
).request
SPEC_ARM = arm_for("sglang", {"speculative": {"method": "eagle3", "draft_tokens": 3, "model": "/models/draft"}})
PLAIN_ARM = arm_for("vllm", {})


# ------------------------------------------------------------------------------------------ SGLang


@pytest.mark.parametrize(
    "name", ["sglang-0.5.23-generate-spec.sse", "sglang-0.5.10-generate-spec.sse", "sglang-0.5.4-generate-spec.sse"]
)
def test_sglang_acceptance_is_read_per_request_under_every_05x_field_name(name):
    rec = Recorded({"POST /generate": (200, body(name))})
    out = engines.get("sglang").measure(rec.http, "http://s", "bracket-model", "def add", REQ, 1234, SPEC_ARM)
    m = out.measurement
    assert m.error is None
    assert (m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (8, 12, 0, "length")
    assert m.output_text == " def add(a, b):\n    return"  # cumulative chunks turned into increments
    assert m.stream_events == 4
    assert (out.spec.verify_steps, out.spec.accepted_tokens, out.spec.draft_tokens) == (3, 4, 9)
    assert out.spec.acceptance_length == pytest.approx(1 + 4 / 3)
    sent = rec.sent("/generate")
    assert sent["stream"] is True and sent["text"] == "def add"
    # greedy: SGLang makes temperature 0 top_k 1 itself; no sampling_seed, which old releases reject
    assert sent["sampling_params"] == {
        "max_new_tokens": 8,
        "ignore_eos": True,
        "repetition_penalty": 1.0,
        "temperature": 0.0,
    }


def test_sglang_oldest_release_reports_only_verify_steps_and_accepted_follows_from_the_token_count():
    rec = Recorded({"POST /generate": (200, body("sglang-0.5.2-generate-verify-ct-only.sse"))})
    out = engines.get("sglang").measure(rec.http, "http://s", "m", "p", REQ, 1, SPEC_ARM)
    # 8 tokens = 1 from the prefill + 3 verify steps x (1 own token) + 4 accepted drafts
    assert (out.spec.verify_steps, out.spec.accepted_tokens, out.spec.draft_tokens) == (3, 4, None)
    assert out.spec.acceptance_length == pytest.approx(7 / 3)
    assert "completion_tokens - 1 - spec_verify_ct" in out.spec.source


def test_sglang_without_spec_fields_leaves_acceptance_null_and_incremental_text_is_joined():
    rec = Recorded({"POST /generate": (200, body("sglang-0.5.23-generate-nospec.sse"))})
    out = engines.get("sglang").measure(rec.http, "http://s", "m", "p", REQ, 1, SPEC_ARM)
    assert out.spec == SpecFields() and out.measurement.completion_tokens == 8
    rec = Recorded({"POST /generate": (200, body("sglang-0.5.23-generate-incremental.sse"))})
    m = engines.get("sglang").measure(rec.http, "http://s", "m", "p", REQ, 1, PLAIN_ARM).measurement
    assert m.output_text == " def add(a, b):\n    return" and m.cached_tokens == 5 and m.stream_events == 4


def test_sglang_not_streamed_body_parses_the_same():
    b = json.loads(body("sglang-0.5.23-generate.json"))
    spec = sglang.spec_from_meta(b["meta_info"])
    assert (spec.verify_steps, spec.accepted_tokens, spec.acceptance_length) == (3, 4, pytest.approx(7 / 3))
    assert sglang.finish_type(b["meta_info"]["finish_reason"]) == "length"
    assert sglang.spec_from_meta({"completion_tokens": 8}) is None  # speculation off


def test_sglang_errors_are_recorded_not_raised():
    rec = Recorded({"POST /generate": (400, b'{"error": "sampling_seed is not a valid argument"}')})
    m = engines.get("sglang").measure(rec.http, "http://s", "m", "p", REQ, 1, PLAIN_ARM).measurement
    assert m.error.startswith("HTTP 400") and "sampling_seed" in m.error
    truncated = body("sglang-0.5.23-generate-nospec.sse").replace(b"data: [DONE]\n\n", b"")
    m = (
        engines.get("sglang")
        .measure(Recorded({"POST /generate": (200, truncated)}).http, "http://s", "m", "p", REQ, 1, PLAIN_ARM)
        .measurement
    )
    assert m.error == "stream ended before [DONE]" and m.completion_tokens == 8


# ---------------------------------------------------------------------------------------- llama.cpp


def test_llamacpp_draft_counts_come_from_timings_on_the_usage_chunk():
    rec = Recorded(
        {
            "POST /v1/completions": (200, body("llamacpp-b9251-completions-spec.sse")),
            "GET /metrics": (200, b"llamacpp:tokens_predicted_total 8\n"),
        }
    )
    arm = arm_for("llamacpp", {"speculative": {"method": "draft_model", "draft_tokens": 4, "model": "/m/d.gguf"}})
    out = engines.get("llamacpp").measure(rec.http, "http://l", "bracket-model", "p", REQ, 7, arm)
    m = out.measurement
    assert (m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (8, 808, 804, "length")
    # verify steps = predicted_n - 1 - draft_n_accepted = 8 - 1 - 5
    assert (out.spec.draft_tokens, out.spec.accepted_tokens, out.spec.verify_steps) == (9, 5, 2)
    assert out.spec.acceptance_length == pytest.approx(3.5)
    sent = rec.sent("/v1/completions")
    assert sent["ignore_eos"] is True and sent["stream_options"] == {"include_usage": True}
    assert (sent["temperature"], sent["repeat_penalty"]) == (0.0, 1.0) and "top_k" not in sent  # greedy: no seed


def test_llamacpp_older_build_gives_cache_from_timings_and_no_acceptance():
    rec = Recorded(
        {"POST /v1/completions": (200, body("llamacpp-b6000-completions-nodraft.sse")), "GET /metrics": (404, b"")}
    )
    arm = arm_for("llamacpp", {"speculative": {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 4}})
    out = engines.get("llamacpp").measure(rec.http, "http://l", "m", "p", REQ, 1, arm)
    assert out.measurement.error is None
    assert (out.measurement.completion_tokens, out.measurement.cached_tokens) == (8, 3)
    assert out.spec == SpecFields()


def test_llamacpp_acceptance_falls_back_to_its_prometheus_counters():
    def prom(d, t, a):
        return (
            f"llamacpp:spec_decode_num_drafts_total {d}\nllamacpp:spec_decode_num_draft_tokens_total {t}\n"
            f"llamacpp:spec_decode_num_accepted_tokens_total {a}\n"
        ).encode()

    rec = Recorded(
        {
            "POST /v1/completions": (200, body("llamacpp-b6000-completions-nodraft.sse")),
            "GET /metrics": [(200, prom(5, 20, 6)), (200, prom(8, 32, 10))],
        }
    )
    out = engines.get("llamacpp").measure(
        rec.http,
        "http://l",
        "m",
        "p",
        REQ,
        1,
        arm_for("llamacpp", {"speculative": {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 4}}),
    )
    assert (out.spec.verify_steps, out.spec.draft_tokens, out.spec.accepted_tokens) == (3, 12, 4)
    assert out.spec.acceptance_length == pytest.approx(1 + 4 / 3)


def test_llamacpp_not_streamed_body_and_absent_draft_fields():
    b = json.loads(body("llamacpp-b9251-completions.json"))
    assert llamacpp.spec_from_timings(b["timings"]).acceptance_length == pytest.approx(3.5)
    assert llamacpp.spec_from_timings({"predicted_n": 8, "cache_n": 0}) is None


def test_llamacpp_0336_captured_stream_agrees_with_its_metrics_deltas():
    """Captured from llama-server built from the llama-cpp-python 0.3.36 sdist (CPU), ngram-mod, the
    embedded model: timings draft_n 3 / draft_n_accepted 3; /metrics 12 -> 15 and 12 -> 15 (one draft
    round, 2 -> 3). verify steps = predicted_n - 1 - accepted = 64 - 1 - 3 = 60; AL = 1 + 3/60."""
    rec = Recorded(
        {
            "POST /v1/completions": (200, body("llamacpp-0.3.36-completions-ngram-mod.sse")),
            "GET /metrics": [
                (200, body("llamacpp-0.3.36-metrics-before.txt")),
                (200, body("llamacpp-0.3.36-metrics-after.txt")),
            ],
        }
    )
    arm = arm_for("llamacpp", {"speculative": {"method": "ngram", "engine_method": "ngram-mod", "draft_tokens": 8}})
    out = engines.get("llamacpp").measure(
        rec.http, "http://l", "bracket-model", "p", REQ.model_copy(update={"max_tokens": 64}), 7, arm
    )
    m = out.measurement
    assert (m.error, m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (
        None,
        64,
        20,
        0,
        "length",
    )
    assert (out.spec.draft_tokens, out.spec.accepted_tokens, out.spec.verify_steps) == (3, 3, 60)
    assert out.spec.acceptance_length == pytest.approx(1 + 3 / 60)
    assert out.spec.source.endswith("/metrics deltas agree")
    assert rec.sent("/v1/completions")["cache_prompt"] is False


def test_llamacpp_timings_that_disagree_with_metrics_are_said_and_the_counters_kept():
    rec = Recorded(
        {
            "POST /v1/completions": (200, body("llamacpp-0.3.36-completions-ngram-mod.sse")),
            "GET /metrics": [
                (200, body("llamacpp-0.3.36-metrics-before.txt")),
                (200, body("llamacpp-0.3.36-metrics-before.txt").replace(b"total 12", b"total 17")),
            ],
        }
    )
    arm = arm_for("llamacpp", {"speculative": {"method": "ngram", "engine_method": "ngram-mod", "draft_tokens": 8}})
    with pytest.warns(UserWarning, match="timings report 3 drafted / 3 accepted, its /metrics deltas 5 / 5"):
        out = engines.get("llamacpp").measure(
            rec.http, "http://l", "m", "p", REQ.model_copy(update={"max_tokens": 64}), 7, arm
        )
    # 64 tokens = verify steps + accepted + the prefill's token: 60 + 3 + 1, so with 5 accepted, 58 steps
    assert (out.spec.draft_tokens, out.spec.accepted_tokens, out.spec.verify_steps) == (5, 5, 58)


def test_llamacpp_0336_captured_stream_without_speculation_and_its_props():
    rec = Recorded({"POST /v1/completions": (200, body("llamacpp-0.3.36-completions-nospec.sse"))})
    out = engines.get("llamacpp").measure(
        rec.http, "http://l", "m", "p", REQ.model_copy(update={"max_tokens": 24}), 7, PLAIN_ARM
    )
    assert (out.measurement.completion_tokens, out.measurement.cached_tokens, out.spec) == (24, 0, SpecFields())
    props = Recorded({"GET /props": (200, body("llamacpp-0.3.36-props.json"))})
    info = engines.get("llamacpp").provenance(props.http, "http://l", "m")
    # A source tree without git (the sdist) reports b0-unknown; with the workflow's build, its record names the version.
    assert info["engine_version"] == "b0-unknown" and info["server_info"]["total_slots"] == 1
    assert "engine_build" not in info


# --------------------------------------------------------------------------------------------- vLLM


def test_vllm_per_request_metrics_are_preferred_to_counter_differences():
    rec = Recorded(
        {
            "POST /v1/completions": (200, body("vllm-0.32-completions-per-request-metrics.sse")),
            "GET /metrics": [(200, body("vllm-0.32-metrics-before.txt")), (200, b"")],
        }
    )
    out = engines.get("vllm").measure(
        rec.http,
        "http://v",
        "bracket-model",
        "p",
        REQ.model_copy(update={"max_tokens": 12}),
        1,
        arm_for("vllm", {"speculative": {"method": "ngram", "draft_tokens": 4}}),
    )
    assert (out.spec.verify_steps, out.spec.accepted_tokens, out.spec.draft_tokens) == (4, 7, 16)
    assert out.spec.acceptance_length == pytest.approx(2.75)
    assert out.spec.source == "response metrics.speculative_decoding"
    assert out.measurement.completion_tokens == 12 and out.measurement.stream_events == 12


def test_vllm_without_per_request_metrics_reads_metrics_before_and_after_the_request():
    rec = Recorded(
        {
            "POST /v1/completions": (200, body("vllm-0.32-completions.sse")),
            "GET /metrics": [(200, body("vllm-0.32-metrics-before.txt")), (200, body("vllm-0.32-metrics-after.txt"))],
        }
    )
    out = engines.get("vllm").measure(
        rec.http,
        "http://v",
        "bracket-model",
        "p",
        REQ.model_copy(update={"max_tokens": 12}),
        1,
        arm_for("vllm", {"speculative": {"method": "ngram", "draft_tokens": 4}}),
    )
    assert (out.spec.verify_steps, out.spec.draft_tokens, out.spec.accepted_tokens) == (4, 16, 7)
    assert out.spec.acceptance_length == pytest.approx(2.75)
    paths = [r.url.path for r in rec.requests]
    assert paths == ["/metrics", "/v1/completions", "/metrics"]  # the counters bracket the request
    assert rec.sent("/v1/completions") == {
        "model": "bracket-model",
        "prompt": "p",
        "max_tokens": 12,
        "temperature": 0.0,
        "repetition_penalty": 1.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_vllm_plain_arm_reads_no_metrics_and_absent_usage_is_an_error():
    no_usage = b"".join(
        line + b"\n\n" for line in body("vllm-0.32-completions.sse").split(b"\n\n") if line and b'"usage"' not in line
    )
    rec = Recorded({"POST /v1/completions": (200, no_usage)})
    out = engines.get("vllm").measure(rec.http, "http://v", "m", "p", REQ, 1, PLAIN_ARM)
    assert [r.url.path for r in rec.requests] == ["/v1/completions"]
    assert out.measurement.error.startswith("no usage in the response") and out.spec == SpecFields()
    b = json.loads(body("vllm-0.32-completions.json"))
    assert engines.get("vllm").spec_from_stream([b]).acceptance_length == pytest.approx(2.75)


# ------------------------------------------------------------------------------------------- Ollama


def test_ollama_ndjson_stream_gives_counts_and_never_acceptance():
    rec = Recorded({"POST /api/generate": (200, body("ollama-generate-stream.ndjson"))})
    arm = arm_for(
        "ollama", {"speculative": {"method": "draft_model", "draft_tokens": 4}, "server": {"context_length": 4096}}
    )
    out = engines.get("ollama").measure(rec.http, "http://o", "qwen3:0.6b", "def f", REQ, 1234, arm)
    m = out.measurement
    assert m.error is None
    assert (m.completion_tokens, m.prompt_tokens, m.cached_tokens, m.finish_reason) == (8, 12, None, "length")
    assert m.output_text == " def add(a, b):\n    return" and m.stream_events == 8
    assert out.spec == SpecFields()
    sent = rec.sent("/api/generate")
    assert sent["raw"] is True and sent["model"] == "qwen3:0.6b" and sent["keep_alive"] == -1
    assert sent["options"] == {
        "num_predict": 8,
        "temperature": 0.0,
        "repeat_penalty": 1.0,
        "num_ctx": 4096,
        "draft_num_predict": 4,
    }


def test_ollama_absent_done_reason_and_an_unfinished_stream():
    rec = Recorded({"POST /api/generate": (200, body("ollama-generate-stream-no-done-reason.ndjson"))})
    m = engines.get("ollama").measure(rec.http, "http://o", "m", "p", REQ, 1, PLAIN_ARM).measurement
    assert m.finish_reason is None and m.completion_tokens == 8 and m.error is None
    cut = b"\n".join(body("ollama-generate-stream.ndjson").splitlines()[:3]) + b"\n"
    m = (
        engines.get("ollama")
        .measure(Recorded({"POST /api/generate": (200, cut)}).http, "http://o", "m", "p", REQ, 1, PLAIN_ARM)
        .measurement
    )
    assert m.error == "stream ended before the final object (done: true)" and m.completion_tokens is None
    b = json.loads(body("ollama-generate.json"))
    from bracket.engines.ollama import counts

    assert counts([b]).completion_tokens == 8


def test_ollama_ready_means_up_then_model_preloaded_and_flush_is_unload_reload():
    o = engines.get("ollama")
    rec = Recorded(
        {
            "GET /": (200, b"Ollama is running"),
            "POST /api/generate": [
                (200, body("ollama-generate-load.json")),
                (200, body("ollama-generate-unload.json")),
                (200, body("ollama-generate-load.json")),
            ],
        }
    )
    assert o.ready(rec.http, "http://o")
    assert o.after_ready(rec.http, "http://o", "qwen3:0.6b")["preload"] == "load"
    assert rec.sent("/api/generate") == {"model": "qwen3:0.6b", "keep_alive": -1}
    assert o.flush_cache(rec.http, "http://o", "qwen3:0.6b").startswith("flushed")
    sent = [json.loads(r.content) for r in rec.requests if r.url.path == "/api/generate"]
    assert [s["keep_alive"] for s in sent] == [-1, 0, -1]
    missing = Recorded({"POST /api/generate": (404, b'{"error":"model \\"x\\" not found, try pulling it first"}')})
    with pytest.raises(Exception, match="has no model 'x'.*ollama create"):
        o.after_ready(missing.http, "http://o", "x")


# ------------------------------------------------------------------------------------ launch argv


def argv_of(kind, arm, **engine):
    cfg = cfg_for(kind, {"a": arm}, **engine)
    return engines.get(kind).launch_argv(cfg, cfg.arms["a"], "/models/m", "python3")


def test_sglang_argv_for_an_eagle3_arm_with_server_settings():
    arm = {
        "speculative": {"method": "eagle3", "draft_tokens": 3, "model": "/models/eagle3"},
        "server": {
            "memory_fraction": 0.9,
            "context_length": 262144,
            "kv_cache_dtype": "bf16",
            "prefix_caching": False,
            "chunked_prefill": False,
        },
        "args": ["--attention-backend", "fa3"],
    }
    assert argv_of("sglang", arm) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/m",
        "--served-model-name",
        "bracket-model",
        "--host",
        "127.0.0.1",
        "--port",
        "8051",
        "--random-seed",
        "1234",
        "--enable-cache-report",
        "--mem-fraction-static",
        "0.9",
        "--context-length",
        "262144",
        "--kv-cache-dtype",
        "bf16",
        "--disable-radix-cache",
        "--chunked-prefill-size",
        "-1",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/models/eagle3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--attention-backend",
        "fa3",
    ]


def test_sglang_tree_dflash_and_ngram_flags():
    tree = argv_of(
        "sglang", {"speculative": {"method": "eagle", "draft_tokens": 7, "model": "/d", "steps": 3, "topk": 4}}
    )
    assert tree[tree.index("--speculative-num-steps") :] == [
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    ]
    dflash = argv_of("sglang", {"speculative": {"method": "dflash", "draft_tokens": 16, "model": "/d"}})
    assert dflash[dflash.index("--speculative-algorithm") :] == [
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "/d",
        "--speculative-num-draft-tokens",
        "16",
    ]  # the block size the DFlash checkpoint was trained for
    ngram = argv_of(
        "sglang", {"speculative": {"method": "ngram", "draft_tokens": 11}, "server": {"chunked_prefill": 4096}}
    )
    assert "NGRAM" in ngram and "--speculative-num-steps" not in ngram
    assert ngram[ngram.index("--chunked-prefill-size") + 1] == "4096"


def test_vllm_gpu_argv_carries_server_settings_and_speculative_config():
    arm = {
        "speculative": {"method": "mtp", "draft_tokens": 2},
        "server": {
            "memory_fraction": 0.85,
            "context_length": 32768,
            "kv_cache_dtype": "fp8",
            "prefix_caching": False,
            "chunked_prefill": 8192,
        },
    }
    argv = argv_of("vllm", arm, per_request_metrics=True)
    assert argv[:16] == [
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/m",
        "--served-model-name",
        "bracket-model",
        "--host",
        "127.0.0.1",
        "--port",
        "8051",
        "--seed",
        "1234",
        "--generation-config",
        "vllm",
        "--enable-prompt-tokens-details",
    ]
    assert argv[16:] == [
        "--gpu-memory-utilization",
        "0.85",
        "--max-model-len",
        "32768",
        "--kv-cache-dtype",
        "fp8",
        "--no-enable-prefix-caching",
        "--enable-chunked-prefill",
        "--max-num-batched-tokens",
        "8192",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":2}',
        "--enable-per-request-metrics",
        "--per-request-spec-decode-metrics",
        "summary",
    ]
    dflash = argv_of("vllm", {"speculative": {"method": "dflash", "draft_tokens": 16, "model": "z-lab/Q3-8B-DFlash"}})
    assert json.loads(dflash[dflash.index("--speculative-config") + 1]) == {
        "method": "dflash",
        "num_speculative_tokens": 16,
        "model": "z-lab/Q3-8B-DFlash",
    }


def test_vllm_embedded_argv_for_the_shipped_experiment():
    cfg = config.load(ROOT / "experiments" / "smoke.yaml")
    argv = engines.get("vllm").launch_argv(cfg, cfg.arms["ngram_4"], "resources/models/m", "py")
    assert argv == [
        "py",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "resources/models/m",
        "--served-model-name",
        "bracket-model",
        "--host",
        "127.0.0.1",
        "--port",
        "8012",
        "--seed",
        "1234",
        "--generation-config",
        "vllm",
        "--enable-prompt-tokens-details",
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        "8",
        "--no-enable-prefix-caching",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":5}',
    ]


# The prefix cache is server state: off unless an arm measures prefix caching (schema, prefix_caching).
STATE_FLAGS = {
    "vllm": {
        None: ["--no-enable-prefix-caching"],
        False: ["--no-enable-prefix-caching"],
        True: ["--enable-prefix-caching"],
    },
    "sglang": {None: ["--disable-radix-cache"], False: ["--disable-radix-cache"], True: []},
    "llamacpp": {
        None: ["--no-cache-prompt", "--cache-ram", "0"],
        False: ["--no-cache-prompt", "--cache-ram", "0"],
        True: [],
    },
}
ALL_STATE_FLAGS = {
    "--no-enable-prefix-caching",
    "--enable-prefix-caching",
    "--disable-radix-cache",
    "--no-cache-prompt",
    "--cache-prompt",
    "--cache-ram",
    "0",
}


@pytest.mark.parametrize("kind", sorted(STATE_FLAGS))
@pytest.mark.parametrize("setting", [None, False, True], ids=["left-out", "false", "true"])
def test_the_prefix_cache_is_off_by_default_and_on_only_when_an_arm_asks(kind, setting):
    arm = {} if setting is None else {"server": {"prefix_caching": setting}}
    argv = argv_of(kind, arm)
    assert [a for a in argv if a in ALL_STATE_FLAGS] == STATE_FLAGS[kind][setting]
    exp = cfg_for(kind, {"a": arm})
    state = engines.get(kind).server_state(argv, {}, exp.arms["a"])
    assert state["prefix_cache"] == ("on" if setting else "off")
    if kind == "llamacpp":  # the request's field follows the arm, whatever the server's default
        body = engines.get(kind).request_body("m", "p", exp.request, 1, exp.arms["a"])
        assert body["cache_prompt"] is bool(setting)


def test_server_state_reads_the_argv_as_launched_the_last_flag_winning():
    llama = engines.get("llamacpp")
    argv = argv_of("llamacpp", {"args": ["--cache-ram", "2048"]})  # an arm's own args come last and win
    assert llama.server_state(argv, {}, PLAIN_ARM)["prefix_cache"] == "partly"
    assert llama.server_state(argv, {}, PLAIN_ARM)["how"] == ["cache_prompt false in each request", "--cache-ram 2048"]
    # llama.cpp before bracket turned it off: slot reuse off per request, the RAM cache on at its default.
    plain = ["llama-server", "-m", "m"]
    assert llama.server_state(plain, {}, PLAIN_ARM) == {
        "prefix_cache": "partly",
        "graphs": None,
        "how": ["cache_prompt false in each request", "--cache-ram not set (8192 MiB)"],
    }
    assert llama.server_state(plain, {"LLAMA_ARG_CACHE_RAM": "0"}, PLAIN_ARM)["prefix_cache"] == "off"
    assert llama.server_state(plain + ["-cram=0"], {}, PLAIN_ARM)["how"][1] == "-cram 0"
    assert llama.server_state(None, {}, PLAIN_ARM)["prefix_cache"] == "unknown"  # attach: started by hand
    vllm = engines.get("vllm")
    assert vllm.server_state(["python3", "--enforce-eager"], {}, PLAIN_ARM) == {
        "prefix_cache": "on",
        "how": ["no prefix-caching flag (vLLM's default: on)"],
        "graphs": "off (--enforce-eager)",
    }
    assert (
        vllm.server_state(argv_of("vllm", {"args": ["--enable-prefix-caching"]}), {}, PLAIN_ARM)["prefix_cache"] == "on"
    )
    sglang = engines.get("sglang").server_state(argv_of("sglang", {}), {}, PLAIN_ARM)
    assert sglang == {"prefix_cache": "off", "how": ["--disable-radix-cache"], "graphs": "captured at start-up"}
    assert engines.get("ollama").server_state(["ollama", "serve"], {}, PLAIN_ARM)["prefix_cache"] == "on"
    assert engines.get("openai").server_state(None, {}, PLAIN_ARM)["prefix_cache"] == "unknown"


def test_last_flag_takes_values_in_both_spellings_and_negative_numbers():
    from bracket.engines.base import last_flag

    assert last_flag(["--cache-ram", "0", "--cache-ram=-1"], ("--cache-ram",)) == ("--cache-ram", "-1")
    assert last_flag(["-cram", "-1"], ("--cache-ram", "-cram")) == ("-cram", "-1")
    assert last_flag(["--enforce-eager", "--port", "1"], ("--enforce-eager",)) == ("--enforce-eager", None)
    assert last_flag(["--port", "1"], ("--cache-ram",)) is None


def test_llamacpp_argv_uses_the_renamed_spec_flags():
    arm = {
        "speculative": {"method": "draft_model", "draft_tokens": 6, "model": "/models/draft.gguf"},
        "server": {"context_length": 8192, "kv_cache_dtype": "q8_0", "prefix_caching": False, "chunked_prefill": 1024},
    }
    assert argv_of("llamacpp", arm, executable="/opt/llama/llama-server") == [
        "/opt/llama/llama-server",
        "-m",
        "/models/m",
        "--host",
        "127.0.0.1",
        "--port",
        "8051",
        "--alias",
        "bracket-model",
        "--seed",
        "1234",
        "--parallel",
        "1",
        "--metrics",
        "--ctx-size",
        "8192",
        "--cache-type-k",
        "q8_0",
        "--cache-type-v",
        "q8_0",
        "--no-cache-prompt",
        "--cache-ram",
        "0",
        "--batch-size",
        "1024",
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        "/models/draft.gguf",
        "--spec-draft-n-max",
        "6",
    ]
    own = argv_of("llamacpp", {"speculative": {"method": "ngram", "draft_tokens": 8, "engine_method": "ngram-mod"}})
    # ngram-mod's default n-min (48) exceeds n-max, so it would never draft (measured, docs/llamacpp.md)
    assert own[own.index("--spec-type") :] == [
        "--spec-type",
        "ngram-mod",
        "--spec-ngram-mod-n-min",
        "1",
        "--spec-ngram-mod-n-max",
        "8",
        "--spec-draft-n-max",
        "8",
    ]
    simple = argv_of("llamacpp", {"speculative": {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 3}})
    assert simple[simple.index("--spec-type") :] == [
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "3",
        "--spec-ngram-simple-size-m",
        "4",
        "--spec-draft-n-max",
        "4",
    ]


def test_ollama_is_configured_by_environment():
    cfg = cfg_for("ollama", {"a": {"server": {"context_length": 8192, "kv_cache_dtype": "q8_0"}}}, model="qwen3:0.6b")
    o = engines.get("ollama")
    assert o.launch_argv(cfg, cfg.arms["a"], "qwen3:0.6b", "python3") == ["ollama", "serve"]
    assert o.launch_env(cfg, cfg.arms["a"]) == {
        "OLLAMA_HOST": "127.0.0.1:8051",
        "OLLAMA_NUM_PARALLEL": "1",
        "OLLAMA_KEEP_ALIVE": "-1",
        "OLLAMA_NO_CLOUD": "1",
        "OLLAMA_CONTEXT_LENGTH": "8192",
        "OLLAMA_KV_CACHE_TYPE": "q8_0",
        "OLLAMA_FLASH_ATTENTION": "1",
    }
    assert o.request_model(cfg) == "qwen3:0.6b"


def test_docker_run_passes_environment_by_name_and_publishes_the_port_on_loopback(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    cfg = cfg_for(
        "sglang",
        {"a": {"speculative": {"method": "dflash", "draft_tokens": 15, "model": "/models/d"}}},
        launch="docker",
        env={"SGLANG_ENABLE_SPEC_V2": "True"},
        secret_env=["HF_TOKEN"],
        docker={
            "image": "lmsysorg/sglang:v0.5.23-cu129",
            "volumes": ["/data/models:/models:ro"],
            "ipc": "host",
            "extra_args": ["--cpuset-cpus", "0-9"],
        },
    )
    argv = launch.server_argv(
        cfg,
        engines.get("sglang"),
        cfg.arms["a"],
        "/models/m",
        "python3",
        name="bracket-x-a-b0",
        env_names=["HF_TOKEN"],
    )
    image = argv.index("lmsysorg/sglang:v0.5.23-cu129")
    assert argv[:image] == [
        "docker",
        "run",
        "-d",
        "--name",
        "bracket-x-a-b0",
        "--label",
        "org.bracket.managed=1",
        "--pull",
        "missing",
        "--gpus",
        "all",
        "--shm-size",
        "16g",
        "--ipc",
        "host",
        "-p",
        "127.0.0.1:8051:8051",
        "-v",
        "/data/models:/models:ro",
        "-e",
        "HF_TOKEN",
        "-e",
        "SGLANG_ENABLE_SPEC_V2",
        "--cpuset-cpus",
        "0-9",
        "--entrypoint",
        "python3",
    ]
    inner = argv[image + 1 :]
    assert inner[:4] == ["-m", "sglang.launch_server", "--model-path", "/models/m"]
    assert inner[inner.index("--host") + 1] == "0.0.0.0"  # inside the container; published on loopback only
    assert "hf_secret_value_123" not in " ".join(argv) and "True" not in argv
    host_net = cfg_for("vllm", launch="docker", docker={"image": "vllm/vllm-openai:v0.33.0", "network": "host"})
    argv = launch.server_argv(host_net, engines.get("vllm"), host_net.arms["a"], "/m", "python3", name="n")
    assert "--network" in argv and "-p" not in argv and argv[argv.index("--host") + 1] == "127.0.0.1"


def test_bracket_launch_print_shows_the_exact_command_for_every_engine_and_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    exp = tmp_path / "gpu.yaml"
    exp.write_text(
        json.dumps(
            {
                "engine": {
                    "kind": "sglang",
                    "embedded": False,
                    "model": "/models/m",
                    "launch": "docker",
                    "port": 30000,
                    "secret_env": ["HF_TOKEN"],
                    "docker": {"image": "lmsysorg/sglang:v0.5.23"},
                },
                "arms": {"base": {}, "eagle": {"speculative": {"method": "eagle3", "draft_tokens": 3, "model": "/d"}}},
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "bracket.cli", "launch", str(exp), "eagle", "--print"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "workflow"), "PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_secret_value_123"},
    )
    assert out.returncode == 0, out.stderr
    words = shlex.split(out.stdout)
    assert words[0] == "HF_TOKEN=$HF_TOKEN" and words[1:4] == ["docker", "run", "-d"]
    assert "--speculative-algorithm" in words and "lmsysorg/sglang:v0.5.23" in words
    assert "hf_secret_value_123" not in out.stdout
    cfg = cfg_for("llamacpp", {"a": {"speculative": {"method": "ngram", "draft_tokens": 8}}})  # >= its 5-token match
    assert launch_command(cfg, "a").startswith("llama-server -m /models/m --host 127.0.0.1 --port 8051")
    cfg = cfg_for("openai", launch="attach", base_url="http://10.0.0.5:8000")
    assert launch_command(cfg, "a").startswith("# engine.launch is attach")
    assert "http://10.0.0.5:8000" in launch_command(cfg, "a")


# -------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "engine, arms, needles",
    [
        ({"kind": "openai"}, {"a": {}}, ["attaches to a server you run", "engine.launch: attach"]),
        ({"kind": "sglang", "launch": "docker"}, {"a": {}}, ["engine.docker.image is not set"]),
        (
            {"kind": "vllm", "launch": "attach"},
            {"base": {}, "spec": {"speculative": {"method": "ngram", "draft_tokens": 4}}, "other": {}},
            [
                "engine.launch is attach",
                "arms 'base' and 'spec' differ",
                "speculative",
                "engine.launch: native or docker",
            ],
        ),
        (
            {"kind": "vllm", "launch": "attach"},
            {"a": {"server": {"context_length": 4096}}, "b": {"args": ["--x"]}},
            ["arms 'a' and 'b' differ", "server, args"],
        ),
        ({"kind": "vllm", "launch": "attach", "args": ["--x"]}, {"a": {}}, ["engine.args would be ignored"]),
        (
            {"kind": "llamacpp"},
            {"a": {"server": {"memory_fraction": 0.9}}},
            ["arms.a.server.memory_fraction has no llamacpp switch"],
        ),
        (
            {"kind": "llamacpp"},
            {"a": {"speculative": {"method": "eagle", "draft_tokens": 3, "model": "/d"}}},
            ["method 'eagle' is not available on llamacpp", "speculative.engine_method"],
        ),
        (
            {"kind": "vllm"},
            {"a": {"speculative": {"method": "eagle3", "draft_tokens": 3, "model": "/d", "topk": 2}}},
            ["arms.a.speculative.topk has no vllm equivalent"],
        ),
        ({"kind": "ollama"}, {"a": {"server": {"prefix_caching": False}}}, ["prefix_caching has no ollama switch"]),
        (
            {"kind": "ollama"},
            {"a": {"speculative": {"method": "draft_model", "draft_tokens": 4, "model": "/d"}}},
            ["Modelfile's DRAFT"],
        ),
        (
            {"kind": "sglang"},
            {"a": {"speculative": {"method": "suffix", "draft_tokens": 4}}},
            ["'suffix' is not available on sglang"],
        ),
        ({"kind": "vllm", "base_url": "http://x:1"}, {"a": {}}, ["engine.base_url is only used under"]),
    ],
)
def test_what_an_engine_or_attach_mode_cannot_do_is_named_before_anything_runs(engine, arms, needles):
    with pytest.raises(ExperimentError) as err:
        config.validate({"engine": {"embedded": False, "model": "/m", **engine}, "arms": arms}, source="x.yaml")
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_attach_accepts_arms_that_share_their_server_settings():
    spec = {"method": "ngram", "draft_tokens": 4}
    cfg = config.validate(
        {
            "engine": {"kind": "vllm", "embedded": False, "launch": "attach", "base_url": "http://127.0.0.1:8000/"},
            "arms": {"a": {"speculative": spec, "label": "first"}, "b": {"speculative": dict(spec), "label": "repeat"}},
        }
    )
    assert launch.base_url(cfg) == "http://127.0.0.1:8000"
    assert launch.server_argv(cfg, engines.get("vllm"), cfg.arms["a"], "/m", "py", name="n") == []


# -------------------------------------------------------------------------------------- provenance


def write_safetensors(path: Path, tensors: dict) -> None:
    header = json.dumps(tensors).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 64)


def test_model_fingerprint_follows_config_and_tensor_headers_not_file_times(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "config.json").write_text('{"hidden_size": 256}')
        write_safetensors(d / "model.safetensors", {"w": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 64]}})
    fa, fb = provenance.model_fingerprint(a), provenance.model_fingerprint(b)
    assert fa["sha256"] == fb["sha256"] and fa["covers"] == ["config.json", "model.safetensors (header)"]
    write_safetensors(b / "model.safetensors", {"w": {"dtype": "F8_E4M3", "shape": [4, 8], "data_offsets": [0, 32]}})
    assert provenance.model_fingerprint(b)["sha256"] != fa["sha256"]
    (a / "config.json").write_text('{"hidden_size": 512}')
    assert provenance.model_fingerprint(a)["sha256"] != fa["sha256"]
    assert provenance.model_fingerprint("Qwen/Qwen3-8B") is None  # a hub name: not on this host
    cfg = cfg_for("sglang", launch="docker", docker={"image": "i", "volumes": [f"{tmp_path}:/models:ro"]})
    assert provenance.host_model_path(cfg, "/models/b") == f"{tmp_path}/b"


@pytest.mark.parametrize(
    "kind, routes, version, key, value",
    [
        (
            "sglang",
            {"GET /server_info": (200, body("sglang-0.5.23-server_info.json"))},
            "0.5.23",
            "speculative_algorithm",
            "EAGLE3",
        ),
        (
            "sglang",
            {"GET /get_server_info": (200, body("sglang-0.5.23-server_info.json"))},
            "0.5.23",
            "mem_fraction_static",
            0.85,
        ),
        ("llamacpp", {"GET /props": (200, body("llamacpp-b9251-props.json"))}, "b9251-0a1b2c3d", "total_slots", 1),
        (
            "ollama",
            {"GET /api/version": (200, body("ollama-version.json")), "POST /api/show": (200, body("ollama-show.json"))},
            "0.32.7",
            "modelfile",
            "FROM /models/qwen3-0.6b-q8_0.gguf\nDRAFT /models/qwen3-draft.gguf\n",
        ),
        ("vllm", {"GET /version": (200, body("vllm-0.32-version.json"))}, "0.32.0", None, None),
    ],
)
def test_provenance_reads_each_engines_version_and_server_arguments(kind, routes, version, key, value):
    rec = Recorded(routes)
    cfg = cfg_for(kind, model="/nonexistent/model")
    meta = provenance.collect(
        cfg, engines.get(kind), rec.http, "http://e", "m", "/nonexistent/model", {"cache_flush": "flushed"}
    )
    assert meta["engine_version"] == version
    assert meta["version"] in (version, body("vllm-0.32-version.json").decode())  # vLLM keeps /version's raw text
    if key:
        assert meta["server_info"][key] == value
    else:
        assert meta["server_info"] is None  # /server_info needs vLLM's dev mode: the argv is the record
    assert meta["cache_flush"] == "flushed" and meta["model_fingerprint"] is None
    assert set(meta["host_info"]) == {"cpu", "cpus", "memory_gib", "kernel"}
    assert "license" not in (meta["server_info"] or {})


def test_cache_flush_outcomes_are_said_in_words():
    v = engines.get("vllm")
    assert (
        v.flush_cache(Recorded({"POST /reset_prefix_cache": (200, b'{"success": true}')}).http, "http://v", "m")
        == "flushed"
    )
    assert "success=false" in v.flush_cache(
        Recorded({"POST /reset_prefix_cache": (200, b'{"success": false}')}).http, "http://v", "m"
    )
    assert "VLLM_SERVER_DEV_MODE=1" in v.flush_cache(Recorded({}).http, "http://v", "m")
    assert (
        engines.get("sglang").flush_cache(Recorded({"POST /flush_cache": (200, b"")}).http, "http://s", "m")
        == "flushed"
    )
    rec = Recorded({"GET /slots": (200, body("llamacpp-slots.json")), "POST /slots/0": (200, b'{"id_slot":0}')})
    assert engines.get("llamacpp").flush_cache(rec.http, "http://l", "m") == "flushed (slots 0 erased)"
    assert rec.requests[-1].url.query == b"action=erase"


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "examples").glob("*.yaml")), ids=lambda p: p.stem)
def test_example_experiments_for_each_engine_validate_and_print_their_command(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = config.load(path)
    config.check_prompt_files(cfg, ROOT)
    for arm in cfg.arms:
        assert launch_command(cfg, arm, path.stem)
