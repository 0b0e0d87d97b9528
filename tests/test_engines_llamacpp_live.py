"""The llama.cpp adapter against a real llama-server: the CPU build the workflow makes.

The build comes from workflow/scripts/build_llamacpp.sh (the llama-cpp-python sdist's vendored
llama.cpp), cached under ~/.cache/bracket/llama.cpp by version and options: the first run on a
machine builds it (about 11 minutes on 2 idle cores), later runs and clones reuse it. The model is
a tiny Qwen3-shaped GGUF with random weights (workflow/bracket/embedded/synthetic.py --shape tiny, as rule synthetic_gguf writes it) for launch,
readiness, provenance and the cache and length guards, and the embedded trained model converted to
GGUF (as the workflow does) for per-request acceptance against the /metrics deltas. GPU parts are not exercised here: the CPU build is
forced, so a machine without a GPU runs every test and a machine with one runs the same ones.
"""

from __future__ import annotations

import json
import re
import warnings

import httpx
import pytest
from bracket import embedded, engines
from bracket.engines import launch, provenance
from bracket.experiment import config
from bracket.typed.experiment import Experiment
from bracket.wire.client import get_text

from tests.support import free_port as _free_port

pytestmark = pytest.mark.engine
PORT = 8053


def _cfg(server: dict, arms: dict, max_tokens: int = 32) -> Experiment:
    return config.validate(
        {
            "engine": {
                "kind": "llamacpp",
                "embedded": False,
                "model": "unused",
                "port": PORT,
                "executable": server["llama_server"],
                "startup_timeout_s": 120,
                "args": ["--ctx-size", "1024", "--threads", "2", "--slots"],
            },
            "arms": arms,
            "request": {"max_tokens": max_tokens, "timeout_s": 120},
        }
    )


def _engine(cfg: Experiment, **update) -> Experiment:
    """The experiment with engine settings changed (args, port)."""
    return cfg.model_copy(update={"engine": cfg.engine.model_copy(update=update)})


def _serve(cfg, arm_name, model, tmp_path):
    adapter = engines.get("llamacpp")
    arm = cfg.arms[arm_name]
    argv = launch.server_argv(cfg, adapter, arm, model, "unused", name="unused")
    server = launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=tmp_path / "server.log",
        base_url=launch.base_url(cfg),
        secret_names=[],
    )
    return adapter, arm, argv, server


PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "import os\nimport sys\nimport json\nimport",
]


def test_launch_readiness_provenance_and_the_guards(llama_server, tiny_gguf, tmp_path):
    cfg = _cfg(llama_server, {"plain": {}, "cached": {"server": {"prefix_caching": True}}})
    adapter, arm, argv, server = _serve(cfg, "plain", tiny_gguf, tmp_path)
    assert argv[0] == llama_server["llama_server"] and "--spec-type" not in argv
    base = launch.base_url(cfg)
    with server, httpx.Client(timeout=30) as http:
        assert server.wait_ready(60) < 60
        meta = provenance.collect(cfg, adapter, http, base, "bracket-model", tiny_gguf)
        assert meta["engine_version"] == f"llama.cpp from llama-cpp-python {embedded.LLAMACPP_VERSION} sdist (cpu)"
        assert meta["engine_build"]["cmake_options"][:2] == ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_OPENSSL=OFF"]
        assert meta["engine_build"]["sdist_sha256"] and len(meta["engine_build"]["sdist_sha256"]) == 64
        assert meta["server_info"]["build_info"]  # what the server itself says (b0-unknown: no git in the sdist)
        # Cache guard: each prompt shares its first tokens with the one before; the slot would reuse them.
        for i, prompt in enumerate(PROMPTS):
            m = adapter.measure(http, base, "bracket-model", f"[run {i}] {prompt}", cfg.request, 1234, arm).measurement
            # Length guard: ignore_eos pins the output length.
            assert (m.error, m.completion_tokens, m.finish_reason, m.cached_tokens) == (None, 32, "length", 0)
        # Asked for, the cache is used, and the record says so (the collect step then rejects the run).
        same = "[run 9] " + PROMPTS[0]
        adapter.measure(http, base, "bracket-model", same, cfg.request, 1234, cfg.arms["cached"])
        again = adapter.measure(http, base, "bracket-model", same, cfg.request, 1234, cfg.arms["cached"])
        assert again.measurement.cached_tokens > 0
        assert "--slot-save-path" in adapter.flush_cache(http, base, "bracket-model")
    assert not server.alive()
    # With a save path, the slot is erased (attach mode flushes this way between blocks).
    cfg = _engine(cfg, args=(*cfg.engine.args, "--slot-save-path", str(tmp_path)))
    adapter, arm, argv, server = _serve(cfg, "plain", tiny_gguf, tmp_path)
    with server, httpx.Client(timeout=30) as http:
        server.wait_ready(60)
        assert adapter.flush_cache(http, base, "bracket-model") == "flushed (slots 0 erased)"


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "ngram", "engine_method": "ngram-mod", "draft_tokens": 8},
        {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 2},
        {"method": "draft_model", "draft_tokens": 4, "model": "SELF"},
    ],
    ids=["ngram-mod", "ngram-simple", "draft-model"],
)
def test_acceptance_from_timings_matches_the_metrics_deltas(llama_server, trained_gguf, tmp_path, spec):
    spec = {**spec, "model": trained_gguf} if spec.get("model") == "SELF" else spec
    cfg = _cfg(llama_server, {"spec": {"speculative": spec}}, max_tokens=96)
    adapter, arm, argv, server = _serve(cfg, "spec", trained_gguf, tmp_path)
    base = launch.base_url(cfg)
    drafted = 0
    with server, httpx.Client(timeout=30) as http, warnings.catch_warnings():
        warnings.simplefilter("error")  # a disagreement between timings and /metrics is a warning: fail on it
        server.wait_ready(60)
        slots = http.get(base + "/slots").json()
        assert slots[0]["speculative"] is True
        for i, prompt in enumerate(PROMPTS):
            before = adapter.spec_counters(get_text(http, base + "/metrics"))
            out = adapter.measure(http, base, "bracket-model", f"[{i}] {prompt}", cfg.request, 1234, arm)
            after = adapter.spec_counters(get_text(http, base + "/metrics"))
            m, s = out.measurement, out.spec
            assert (m.error, m.completion_tokens, m.cached_tokens) == (None, 96, 0)
            if after.draft_tokens == before.draft_tokens:
                assert s.draft_tokens in (None, 0)  # timings omit draft_n when nothing was drafted
                continue
            drafted += s.draft_tokens
            assert s.source.endswith("/metrics deltas agree")
            assert s.draft_tokens == after.draft_tokens - before.draft_tokens
            assert s.accepted_tokens == after.accepted - before.accepted
            # Each target step yields one token plus the drafts it accepted; the prefill yields the first.
            assert s.verify_steps + s.accepted_tokens == m.completion_tokens - 1
            assert 1.0 <= s.acceptance_length <= 1 + spec["draft_tokens"]
    assert drafted > 0, "no request drafted anything: the arm's flags did not turn speculation on"


def _completion(http: httpx.Client, url: str, body: dict) -> tuple[str, str]:
    """(text, finish_reason) of one streamed completion, read straight off the stream.

    llama-server sometimes closes an idle kept-alive connection just as the next request goes out
    ("Server disconnected without sending a response", seen once in a full suite): nothing was
    processed, so the request is sent once more on a fresh connection, as bracket's client does."""
    try:
        return _completion_once(http, url, body)
    except httpx.RemoteProtocolError:
        return _completion_once(http, url, body)


def _completion_once(http: httpx.Client, url: str, body: dict) -> tuple[str, str]:
    text, finish = [], None
    with http.stream("POST", url, json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()[:300]
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices") or []:
                    text.append(choice.get("text") or "")
                    finish = choice.get("finish_reason") or finish
    return "".join(text), finish


@pytest.mark.parametrize("which", ["tiny_gguf", "trained_gguf"])
def test_brackets_body_yields_the_tokens_a_plain_client_gets(llama_server, which, request, tmp_path):
    """bracket's greedy body (repeat_penalty 1, ignore_eos, cache_prompt false, ...) against the plainest one a bare
    OpenAI client sends, on the same server: the same tokens. The plain body stops at end-of-text where
    bracket's ignores it, so the plain output must then be where bracket's begins."""
    model = request.getfixturevalue(which)  # the full 151,936-token vocabulary, and the trained model
    cfg = _cfg(llama_server, {"plain": {}}, max_tokens=64)
    cfg = _engine(cfg, port=_free_port())
    adapter, arm, argv, server = _serve(cfg, "plain", model, tmp_path)
    base = launch.base_url(cfg)
    with server, httpx.Client(timeout=30) as http:
        server.wait_ready(60)
        for i, prompt in enumerate(PROMPTS):
            # A leading token of its own: the plain body (cache_prompt on by default) reuses nothing.
            prompt = f"{i}{i} {prompt}"
            plain = {"model": "bracket-model", "prompt": prompt, "max_tokens": 64, "temperature": 0, "stream": True}
            ours = adapter.request_body("bracket-model", prompt, cfg.request, seed=1234, arm=arm)
            assert "top_k" not in ours and "seed" not in ours
            plain_text, plain_finish = _completion(http, base + "/v1/completions", plain)
            our_text, our_finish = _completion(http, base + "/v1/completions", ours)
            assert our_finish == "length" and our_text
            if plain_finish == "length":
                assert our_text == plain_text
            else:
                assert plain_finish == "stop" and our_text.startswith(plain_text)


def _two_requests(cfg, arm_name, model, tmp_path):
    """A request following another on one fresh server (bracket's own requests), and the server's log."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    adapter, arm, argv, server = _serve(cfg, arm_name, model, tmp_path)
    base = launch.base_url(cfg)
    with server, httpx.Client(timeout=30) as http:
        server.wait_ready(60)
        for i, prompt in enumerate(PROMPTS[:2]):
            m = adapter.measure(http, base, "bracket-model", f"[run {i}] {prompt}", cfg.request, 1234, arm)
            assert (m.measurement.error, m.measurement.cached_tokens) == (None, 0)
    return argv, adapter.server_state(argv, {}, arm), (tmp_path / "server.log").read_text(errors="replace")


def test_bracket_launches_llama_server_with_no_prompt_cache_saved_between_requests(llama_server, tiny_gguf, tmp_path):
    """Before each new task llama-server saves the previous prompt's state into its RAM prompt cache
    (--cache-ram, on by default; cache_prompt false in the request does not stop it): on an H200 that
    save was 0.36-0.45 s of TTFT. bracket's default launch turns it off. The server's trace log
    (-lv 4) says what it did; the same requests on a server started with the RAM cache on show the
    save, so the check can fail."""
    cfg = _cfg(llama_server, {"plain": {}, "ram_cache": {"args": ["--cache-ram", "8192"]}})
    # the prompt cache's lines are trace level; others' servers may hold the module's fixed port
    cfg = _engine(cfg, args=(*cfg.engine.args, "-lv", "4"), port=_free_port())
    argv, state, log = _two_requests(cfg, "plain", tiny_gguf, tmp_path / "plain")
    assert argv[argv.index("--cache-ram") + 1] == "0" and "--no-cache-prompt" in argv
    assert state["prefix_cache"] == "off"
    assert "prompt cache is disabled" in log
    assert "updating prompt cache" not in log and "saving prompt with length" not in log
    # Control: the llama.cpp default (an arm's own --cache-ram comes last and wins), same requests.
    argv, state, log = _two_requests(cfg, "ram_cache", tiny_gguf, tmp_path / "ram_cache")
    assert state == {
        "prefix_cache": "partly",
        "graphs": None,
        "how": ["cache_prompt false in each request", "--cache-ram 8192"],
    }
    assert "prompt cache is enabled, size limit: 8192 MiB" in log
    assert "updating prompt cache" in log and "saving prompt with length" in log
    took = re.findall(r"prompt cache update took ([0-9.]+) ms", log)
    print(f"llama-server's prompt cache updates with the RAM cache on: {', '.join(took)} ms")  # -s shows it
