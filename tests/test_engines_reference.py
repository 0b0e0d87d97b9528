"""engine.kind reference: bracket's calibrated server as an engine the workflow launches (engines/reference.py).

The unit tests check the adapter's command, environment and refusals, and the server's API key, in-process.
The integration tests launch it as a block does (runner.run_block, its own process group) and read the
records against the schedule's truth (reference_server.truth): a block on it proves the plumbing a vLLM
block would, in a second."""

from __future__ import annotations

import json
import os
import sys

import httpx
import pytest
from bracket import engines
from bracket.block import runner
from bracket.engines import identify, reference, reference_server
from bracket.engines.reference_server import ReferenceServer, truth
from bracket.experiment import config, design, preflight
from bracket.typed.experiment import Experiment

from tests.support import faultkit as fk


def experiment(**engine) -> Experiment:
    return config.validate(
        {
            "engine": {"kind": "reference", "port": 8123, **engine},
            "arms": {
                "plain": {"args": ["--rate", "400"]},
                "spec": {"speculative": {"method": "ngram", "draft_tokens": 3}, "server": {"context_length": 512}},
            },
        }
    )


def test_an_arm_becomes_the_servers_flags_and_the_last_flag_wins():
    cfg = experiment(args=["--rate", "1000", "--ttft", "0.01"])
    adapter = engines.get("reference")
    plain = adapter.launch_argv(cfg, cfg.arms["plain"], "embedded", "python3")
    assert plain == [
        sys.executable,  # not the `python3` on PATH: the server needs the package, which bracket's Python has
        "-m",
        "bracket.engines.reference_server",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--rate",
        "1000",
        "--ttft",
        "0.01",
        "--rate",
        "400",  # the arm's, after the engine's: argparse keeps the last, so the arm runs at 400 tok/s
    ]
    spec = adapter.launch_argv(cfg, cfg.arms["spec"], "embedded", "python3")
    # three drafts per verify step, all accepted: 4 tokens per event after the prefill's one
    assert spec[7:14] == ["--max-model-len", "512", "--tokens-per-event", "4", "--draft-budget", "3", "--prefill-token"]
    own = experiment(python="/opt/py/bin/python")
    assert adapter.launch_argv(own, own.arms["plain"], "", "")[0] == "/opt/py/bin/python"
    env = adapter.launch_env(cfg, cfg.arms["plain"])
    assert env["PYTHONPATH"].split(os.pathsep)[0] == reference.PACKAGE_PARENT
    assert os.path.isfile(os.path.join(reference.PACKAGE_PARENT, "bracket", "engines", "reference_server.py"))


def test_a_reference_experiment_needs_no_model_and_no_engine_build():
    cfg = experiment()
    assert cfg.engine.embedded is False  # defaulted for this kind: nothing to build
    assert preflight.problems(cfg, "/nonexistent") == []  # no model, no program on PATH, no docker


@pytest.mark.parametrize(
    "engine, arms, says",
    [
        ({"launch": "docker", "docker": {"image": "x:1"}}, {"a": {}}, "set engine.launch: native"),
        ({"embedded": True}, {"a": {}}, "engine.embedded is true"),
        ({}, {"a": {"speculative": {"method": "ngram", "draft_tokens": 8}}}, "verifies 1 to 7 drafts per step"),
        ({}, {"a": {"server": {"prefix_caching": True}}}, "arms.a.server.prefix_caching has no reference switch"),
    ],
)
def test_what_the_reference_server_cannot_do_is_refused_before_anything_runs(engine, arms, says):
    with pytest.raises(config.ExperimentError, match=says):
        config.validate({"engine": {"kind": "reference", **engine}, "arms": arms})


def test_the_adapter_names_the_key_variable_the_server_reads():
    assert reference.API_KEY_ENV == reference_server.API_KEY_ENV


def test_the_api_key_guards_the_v1_routes_and_leaves_health_and_metrics_open():
    key = "sk-reference-test-0123456789"
    with ReferenceServer(api_key=key) as srv, httpx.Client(timeout=5) as http:
        assert http.get(srv.url + "/v1/models").status_code == 401
        assert http.post(srv.url + "/v1/completions", json={"max_tokens": 2}).status_code == 401
        assert http.post(srv.url + "/tokenize", json={"prompt": "a b"}).status_code == 401
        auth = {"Authorization": f"Bearer {key}"}
        assert http.get(srv.url + "/v1/models", headers=auth).status_code == 200
        body = {"model": reference_server.MODEL, "prompt": "x", "max_tokens": 2}
        assert http.post(srv.url + "/v1/completions", json=body, headers=auth).json()["usage"]["completion_tokens"] == 2
        assert [http.get(srv.url + p).status_code for p in ("/health", "/metrics", "/version")] == [200, 200, 200]


def test_a_served_model_name_is_the_one_every_route_gives_and_a_generic_server_asks_for():
    name = 'Qwen/Qwen3-8B "q8"'  # a hub-style name, with a quote that a Prometheus label must escape
    with ReferenceServer(served_model_name=name, tokens_per_event=2) as srv, httpx.Client(timeout=5) as http:
        assert [m["id"] for m in http.get(srv.url + "/v1/models").json()["data"]] == [name]
        body = {"model": name, "prompt": "x", "max_tokens": 4}
        assert http.post(srv.url + "/v1/completions", json=body).json()["model"] == name
        streamed = http.post(srv.url + "/v1/completions", json={**body, "stream": True}).text
        first = json.loads(streamed.split("data: ", 2)[1])
        assert first["model"] == name
        metrics = http.get(srv.url + "/metrics").text
        assert 'model_name="Qwen/Qwen3-8B \\"q8\\""' in metrics and "reference-model" not in metrics
    with ReferenceServer(served_model_name=name, generic=True) as srv, httpx.Client(timeout=5) as http:
        other = {"model": reference_server.MODEL, "prompt": "x", "max_tokens": 2}
        assert http.post(srv.url + "/v1/completions", json=other).status_code == 404
        assert http.post(srv.url + "/v1/completions", json={**other, "model": name}).status_code == 200
    with pytest.raises(ValueError, match="served_model_name must name the model"):
        ReferenceServer(served_model_name=" ")


def test_an_attached_reference_server_is_one_for_engine_kind_reference_and_a_real_vllm_is_not():
    with ReferenceServer() as srv, httpx.Client(timeout=5) as http:
        found = identify.identify(http, srv.url)
    assert (found.kind, found.version) == ("vllm", reference_server.VERSION)  # it answers as vLLM does
    assert identify.contradiction("reference", found, srv.url) is None
    vllm = identify.Identity("vllm", "0.32.0", "GET /version answered with a version and vllm: metrics")
    why = identify.contradiction("reference", vllm, "http://h:1")
    assert "engine.kind is reference, but the server at http://h:1 is vLLM 0.32.0" in why


# ---- launched as a block launches it ---------------------------------------------------------------------------


def block_experiment(tmp_path, port, arms, **engine):
    return fk.experiment(
        tmp_path, port, runs=3, warmup=1, arms=arms, request={"max_tokens": 33}, kind="reference", **engine
    )


@pytest.mark.integration
@pytest.mark.serial  # timed against the schedule's truth with 50 ms of slack
def test_a_block_on_the_reference_engine_records_the_schedules_truth(tmp_path):
    """33 tokens at 400 tok/s after a 20 ms ttft, 4 per event after the prefill's one (3 drafts, all accepted):
    E = 1 + ceil(32 / 4) = 9 events, wall = 0.02 + 8 * 4 / 400 = 0.1 s, acceptance 33 / 9; the client adds its
    own latency (about a millisecond here), never takes any away."""
    port = fk.free_port()
    arms = {"spec": {"speculative": {"method": "ngram", "draft_tokens": 3}}}
    cfg = block_experiment(tmp_path, port, arms, args=["--rate", "400", "--ttft", "0.02"])
    block = design.from_config(cfg)[0]
    paths = fk.block_paths(tmp_path)
    runner.run_block(cfg, "ref", block, 1, model="embedded", python="python3", root="/", **paths)
    t = truth(33, 400, 4, 0.02, prefill_token=True)
    assert (t.events, t.wall_s) == (9, pytest.approx(0.1))
    recs = [r for r in fk.lines(paths["raw_path"]) if not r.get("control") and not r["warmup"]]
    assert len(recs) == 3 and all(r["error"] is None for r in recs)
    for r in recs:
        assert r["completion_tokens"] == 33 and r["finish_reason"] == "length" and r["cached_tokens"] == 0
        assert t.wall_s <= r["wall_s"] < t.wall_s + 0.05
        assert t.ttft_s <= r["ttft_s"] < t.ttft_s + 0.05
        # vLLM's counters, read around each request: 9 verify steps, 3 drafts each, 33 - 9 accepted
        assert (r["verify_steps"], r["draft_tokens"], r["accepted_tokens"]) == (9, 27, 24)
        assert r["acceptance_length"] == pytest.approx(33 / 9)
    meta = json.loads(paths["meta_path"].read_text())
    assert meta["status"] == "complete" and meta["engine_version"] == reference_server.VERSION
    assert meta["argv"][1:3] == ["-m", "bracket.engines.reference_server"]
    assert meta["server_info"]["schedule"]["tokens_per_event"] == 4 and meta["server_info"]["schedule"]["rate"] == 400
    assert meta["server_state"]["prefix_cache"] == "off"
    assert fk.engine_processes(port) == []  # torn down


@pytest.mark.integration
@pytest.mark.serial  # timed against the schedule's truth with 50 ms of slack
def test_the_server_times_each_request_as_vllm_would_and_the_neutrality_control_finds_a_known_cost(tmp_path):
    """--body-cost 0.25: bracket's body (vLLM's, with repetition_penalty) is served at rate / 1.25, the plain
    body at rate; vLLM's decode histogram gives per token (E - 1) k / rate / (n - 1) = 1 / rate (k = 1)."""
    port = fk.free_port()
    cfg = block_experiment(
        tmp_path, port, {"plain": {}}, args=["--rate", "500", "--ttft", "0.005", "--body-cost", "0.25"]
    )
    cfg = cfg.model_copy(
        update={"controls": cfg.controls.model_copy(update={"neutrality": True, "neutrality_pairs": 2})}
    )
    runner.run_block(
        cfg,
        "ref",
        design.from_config(cfg)[0],
        1,
        model="embedded",
        python="python3",
        root="/",
        **fk.block_paths(tmp_path),
    )
    ctl = [r for r in fk.lines(fk.block_paths(tmp_path)["raw_path"]) if r.get("control") == "neutrality"]
    assert len(ctl) == 4 and sorted(r["body"] for r in ctl) == ["bracket", "bracket", "plain", "plain"]
    for r in ctl:
        assert r["server_tokens"] == 32
        rate = 500 / 1.25 if r["body"] == "bracket" else 500
        assert r["server_decode_s"] / r["server_tokens"] == pytest.approx(1 / rate, rel=1e-6)
