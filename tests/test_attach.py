"""An attached server: which engine it is, what the cache guard can see, and what stops a run before a block.

Identification is checked on the calibrated reference server (as vLLM answers, and as a generic
OpenAI server) and on recorded responses of SGLang, Ollama and llama.cpp (tests/data/engines, from
their sources' shapes), each served over real HTTP; the live engines are in test_attach_engines.py.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pandas as pd
import pytest
from bracket import engines, records
from bracket.engines import identify, vllm
from bracket.engines.reference_server import MODEL, ReferenceServer, free_port
from bracket.experiment import config, preflight, probe

from tests.support import ROOT

DATA = ROOT / "tests" / "data" / "engines"


class Replay:
    """A server that answers GET routes with recorded bodies and 404 elsewhere (real HTTP, no engine)."""

    def __init__(self, routes: dict[str, bytes]):
        routes = dict(routes)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = routes.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                body = body if body is not None else b'{"detail":"Not Found"}'
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def ident(url: str) -> identify.Identity:
    with httpx.Client() as http:
        return identify.identify(http, url)


def read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_the_reference_server_answers_as_vllm_and_as_a_generic_server():
    with ReferenceServer(rate=20000, ttft=0.0) as srv:
        found = ident(srv.url)
        assert (found.kind, found.version) == ("vllm", "bracket-reference-server 1")  # /version + vllm: metrics
    with ReferenceServer(rate=20000, ttft=0.0, generic=True) as srv:
        found = ident(srv.url)
        assert (found.kind, found.version) == ("openai", None)
        assert isinstance(engines.for_server("auto", found), engines.OpenAI)


@pytest.mark.parametrize(
    "routes, kind, version",
    [
        ({"/server_info": "sglang-0.5.23-server_info.json"}, "sglang", "0.5.23"),
        ({"/get_server_info": "sglang-0.5.23-server_info.json"}, "sglang", "0.5.23"),  # releases before /server_info
        ({"/api/version": "ollama-version.json", "/v1/models": None}, "ollama", "0.32.7"),
        ({"/props": "llamacpp-0.3.36-props.json"}, "llamacpp", "b0-unknown"),
        ({"/props": "llamacpp-b9251-props.json"}, "llamacpp", None),
        ({"/version": "vllm-0.32-version.json"}, "openai", "0.32.0"),  # /version alone: no vllm: metrics, generic
    ],
)
def test_recorded_engine_responses_are_identified(routes, kind, version):
    served = {path: (read(f) if f else b'{"object":"list","data":[]}') for path, f in routes.items()}
    with Replay(served) as srv:
        found = ident(srv.url)
    assert found.kind == kind
    if version is not None:
        assert found.version == version
    assert isinstance(engines.for_server("auto", found), type(engines.get(kind)))


def test_vllm_is_told_by_its_version_and_metric_names():
    metrics = read("vllm-0.32-metrics-after.txt")
    with Replay({"/version": read("vllm-0.32-version.json"), "/metrics": metrics}) as srv:
        assert ident(srv.url).kind == "vllm"


def test_a_kind_the_server_contradicts_names_both_and_the_fix():
    found = identify.Identity("llamacpp", "b9251", "GET /props answered")
    why = identify.contradiction("vllm", found, "http://h:1")
    assert "engine.kind is vllm" in why and "llama.cpp" in why and "engine.kind: llamacpp" in why
    assert identify.contradiction("auto", found, "http://h:1") is None
    assert identify.contradiction("openai", found, "http://h:1") is None
    generic = identify.Identity("openai", None, "none answered")
    assert "does not answer as vLLM" in identify.contradiction("vllm", generic, "http://h:1")


def test_vllms_prefix_cache_hits_are_read_from_its_counters():
    # The names vLLM 0.32 exposes (v1/metrics/loggers.py: vllm:prefix_cache_hits, counted in tokens).
    text = (
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 128.0\n'
        'vllm:prefix_cache_hits_created{engine="0",model_name="m"} 1.7e9\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 32.0\n'
    )
    assert vllm.VLLM().cache_hits(text) == 160.0
    assert vllm.VLLM().cache_hits("vllm:num_requests_running 0\n") is None


def attach_cfg(tmp_path, url, **over):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"one two three {i}"}) + "\n" for i in range(2)))
    request = {"max_tokens": 32, "timeout_s": 10, **over.pop("request", {})}
    return config.validate(
        {
            "engine": {"launch": "attach", "embedded": False, "base_url": url, **over},
            "arms": {"a": {}, "b": {}},
            "workloads": {"w": {"prompts": str(prompts)}},
            "design": {"rounds": 1, "runs_per_block": 2, "warmup_runs": 0, "cooldown_s": 0},
            "request": request,
        },
        source="attach test",
    )


def test_attach_defaults_to_auto_and_a_launch_to_vllm(tmp_path):
    assert attach_cfg(tmp_path, "http://127.0.0.1:1").engine.kind == "auto"
    cfg = config.validate({"arms": {"a": {}}, "engine": {"port": 9000}})
    assert cfg.engine.kind == "vllm"
    assert config.validate({"arms": {"a": {}}, "engine": {"kind": "auto"}}).engine.kind == "vllm"


def test_a_generic_server_that_pins_the_length_passes_and_rests_on_unique_prefixes(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0, generic=True, eos_after=3) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url), tmp_path)
        assert rep.problems == [] and rep.identity.kind == "openai" and rep.model == MODEL
        assert rep.cache_check is None and rep.cache_repeat is None  # it reports nothing, hit or not
        assert len(srv.log) == 2  # the request and its repeat


def test_a_vllm_like_server_reports_cached_tokens(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url), tmp_path)
    assert rep.problems == [] and rep.identity.kind == "vllm" and rep.cache_check == "reported"


def test_a_served_model_the_server_does_not_list_is_named_with_the_ones_it_does(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0, generic=True) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url, served_model="Qwen/Qwen3-0.6B"), tmp_path)
        assert len(srv.log) == 0  # stopped before any request
    [why] = rep.problems
    assert "'Qwen/Qwen3-0.6B'" in why and f"serves '{MODEL}'" in why and "set engine.served_model" in why


def test_a_server_that_ignores_ignore_eos_is_stopped_with_the_cause(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0, generic=True, eos_after=3, ignores_ignore_eos=True) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url), tmp_path)
    [why] = rep.problems
    assert "returned 3 of the 16 tokens" in why and "'stop'" in why and "ignore_eos" in why


def test_the_strict_guard_on_a_server_that_reports_nothing_says_which_flag_or_key(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0, generic=True) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url, request={"cache_guard": "strict"}), tmp_path)
    [why] = rep.problems
    assert "cache_guard is strict" in why and "request.cache_guard: auto" in why


@pytest.mark.integration
@pytest.mark.serial
def test_an_unreachable_url_fails_in_seconds_and_bracket_check_says_so(tmp_path):
    port = free_port()
    cfg = attach_cfg(tmp_path, f"http://127.0.0.1:{port}")
    t0 = time.monotonic()
    found = preflight.problems(cfg, tmp_path)
    assert time.monotonic() - t0 < 20  # the limit: before, a block waited 5 min 23 s
    assert any(f"nothing answers at http://127.0.0.1:{port}" in p and "engine.base_url" in p for p in found)


def test_docker_without_a_daemon_is_a_problem(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at "
        "unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"
    )
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    [why] = preflight.docker_daemon_problems()
    assert "no docker daemon answers" in why and "Is the docker daemon running?" in why


def test_a_run_the_engine_reported_nothing_for_is_valid_by_its_unique_prefix_unless_strict():
    rec = {"cached_tokens": None, "finish_reason": "length", "completion_tokens": 8, "max_tokens": 8, "wall_s": 1.0}
    assert records.reasons({**rec, "cache_check": "unique prefix"}) == []
    assert records.reasons({**rec, "cache_check": None})[0][0] == "cached_tokens unknown"
    assert records.reasons({**rec, "cached_tokens": 4, "cache_check": "metrics"})[0][0] == "cache hit"
    auto = config.validate({"arms": {"a": {}}, "request": {"unique_prefix": True, "cache_guard": "auto"}}).request
    assert records.cache_check(None, auto) == "unique prefix"
    assert records.cache_check("metrics", auto) == "metrics"
    assert records.cache_check(None, auto.model_copy(update={"cache_guard": "strict"})) is None
    assert records.cache_check(None, auto.model_copy(update={"unique_prefix": False})) is None


def test_guards_count_how_each_timed_run_was_checked():
    rows = [{"warmup": True, "cached_tokens": None, "cache_check": "unique prefix"}]
    rows += [{"warmup": False, "cached_tokens": 0, "cache_check": "metrics"}] * 3
    rows += [{"warmup": False, "cached_tokens": None, "cache_check": "unique prefix"}] * 2
    rows += [{"warmup": False, "cached_tokens": 5, "cache_check": "reported"}]
    g = records.guards(pd.DataFrame([{**r, "completion_tokens": 8, "finish_reason": "length"} for r in rows]))
    assert g["cache_checks"] == {"metrics": 3, "unique prefix": 2, "reported": 1}
    assert (g["cached_unknown"], g["cache_unreported_unique"], g["cache_hits"]) == (0, 2, 1)


def test_the_method_section_says_how_the_cache_was_checked():
    from types import SimpleNamespace

    from bracket.article import method
    from bracket.stats.results import Guards, Provenance, Served, Stats

    def said(checks: dict, served: dict | None):  # stats.json's guards and provenance.served, worded
        guards = Guards.model_construct(cache_checks=checks, cache_hits=0)
        prov = Provenance.model_construct(served=Served.model_validate(served) if served else None)
        return method.cache_sentence(SimpleNamespace(results=Stats.model_construct(guards=guards, provenance=prov)))

    assert said({"metrics": 4}, {"identified": {"kind": "vllm", "version": "0.32.0"}}) == (
        "Cache check: 4 timed runs by vLLM 0.32.0's prefix-cache hit counters on "
        "/metrics (vllm:prefix_cache_hits), read just before and after each "
        "single-stream request."
    )
    assert "1 timed run not directly: the server reported no cached tokens (cache not reported)" in said(
        {"unique prefix": 1}, None
    )
