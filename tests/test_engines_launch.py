"""Docker and attach launch, end to end through run_block, with real processes and sockets.

Real docker is not exercised: this machine has the docker client but no engine. A stand-in
`docker` (tests/data/engines/fake_docker.py) on PATH records its argv and runs a "container" whose
payload is bracket/engines/reference_server.py (a calibrated vLLM-like server: 4 tokens per stream event,
so acceptance length 4) or a process that rejects a flag. Attach mode runs against the reference
server started by the test, as a user's own server would be.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from bracket.block import runner
from bracket.engines.reference_server import ReferenceServer  # noqa: E402
from bracket.experiment import config, design
from bracket.measure.session import BlockFailed
from conftest import ROOT

from tests.support import python_env

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

FAKE = ROOT / "tests" / "data" / "engines" / "fake_docker.py"
SECRET = "hf_bracket_test_5d2e8c"


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    (bin_dir / "docker").chmod(0o755)
    state = tmp_path / "docker-state"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    yield state
    for f in state.glob("*.json"):  # nothing may outlive the test, whatever happened
        pid = json.loads(f.read_text())["pid"]
        try:
            os.killpg(pid, 9)
        except ProcessLookupError:
            pass


def calls(state: Path) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in (state / "calls.jsonl").read_text().splitlines()]


def experiment(tmp_path, port, arms, **engine) -> dict:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"one two {i}"}) + "\n" for i in range(3)))
    return config.validate(
        {
            "engine": {
                "kind": "vllm",
                "embedded": False,
                "model": "/models/tiny",
                "port": port,
                "startup_timeout_s": 30,
                **engine,
            },
            "arms": arms,
            "workloads": {"code": {"prompts": str(prompts)}},
            "design": {"rounds": 1, "runs_per_block": 3, "warmup_runs": 0, "cooldown_s": 0},
            "request": {"max_tokens": 8, "timeout_s": 10},
            "controls": {"neutrality": False, "neutrality_off": "these tests count a block's requests"},
        },
        source="launch test",
    )


def run(cfg, tmp_path, k=0):
    blocks = design.from_config(cfg)
    return runner.run_block(
        cfg,
        "launchtest",
        blocks[k],
        len(blocks),
        model="/models/tiny",
        python="python3",
        root="/",
        raw_path=tmp_path / "raw" / f"block-{k}.jsonl",
        meta_path=tmp_path / "raw" / f"block-{k}.meta.json",
        log_path=tmp_path / "logs" / f"block-{k}.log",
        lock_dir=tmp_path / "locks",
    )


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def listening(port: int) -> bool:
    return any(
        c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in psutil.net_connections(kind="inet")
    )


def test_a_docker_block_runs_in_a_container_reads_acceptance_and_removes_it(tmp_path, fake_docker, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    port = 8058  # a port no other test file uses: pytest-xdist may run files side by side
    cfg = experiment(
        tmp_path,
        port,
        {"ngram_3": {"speculative": {"method": "ngram", "draft_tokens": 3}}},
        launch="docker",
        secret_env=["HF_TOKEN"],
        env={"VLLM_LOGGING_LEVEL": "DEBUG"},
        docker={"image": "bracket/reference:test", "volumes": [f"{tmp_path}:/models:ro"]},
    )
    raw = run(cfg, tmp_path)
    recs = lines(raw)
    assert len(recs) == 3 and all(r["error"] is None for r in recs)
    # 8 tokens in events of 4: 2 verify steps, 3 drafts proposed and 3 accepted per step
    assert [(r["verify_steps"], r["accepted_tokens"], r["acceptance_length"]) for r in recs] == [(2, 6, 4.0)] * 3
    meta = json.loads((tmp_path / "raw" / "block-0.meta.json").read_text())
    assert meta["launch"] == "docker" and meta["status"] == "complete"
    assert meta["argv"][:4] == ["docker", "run", "-d", "--name"]
    assert meta["argv"][4] == "bracket-launchtest-ngram_3-b0"
    assert meta["argv"][meta["argv"].index("-p") + 1] == f"127.0.0.1:{port}:{port}"
    assert meta["container"]["image"] == "bracket/reference:test"
    assert meta["container"]["image_digests"][0].startswith("bracket/reference@sha256:")
    assert meta["container"]["image_id"].startswith("sha256:")
    assert meta["env"]["HF_TOKEN"] == "***" and meta["env"]["VLLM_LOGGING_LEVEL"] == "DEBUG"
    # the docker client got the values by environment and the container by name only
    run_call = json.loads((fake_docker / "calls.jsonl").read_text().splitlines()[1])
    assert run_call["env_present"] == {"HF_TOKEN": True, "VLLM_LOGGING_LEVEL": True}
    assert SECRET not in (fake_docker / "calls.jsonl").read_text()
    assert not any(
        SECRET in p.read_text(errors="ignore")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl", ".log")
    )
    # teardown: stopped, log taken, removed; the engine's port is free again
    verbs = [c[0] for c in calls(fake_docker)]
    assert verbs[0] == "rm" and verbs[1] == "run" and verbs[-1] == "rm"
    assert verbs.index("stop") < len(verbs) - 1
    assert list(fake_docker.glob("*.json")) == [] and not listening(port)


def test_a_client_killed_outright_leaves_no_container_behind(tmp_path, fake_docker):
    """SIGKILL of the process that ran `docker run -d` runs no teardown; the container is the docker
    daemon's, so the watchdog stops and removes it."""
    import signal
    import subprocess

    port = 8057
    name = "bracket-killtest-b0"
    client = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from bracket.engines.launch import DockerServer
        s = DockerServer(argv=["docker", "run", "-d", "--name", {name!r}, "-p", "127.0.0.1:{port}:{port}",
                               "--entrypoint", "vllm", "bracket/reference:test", "serve", "/models/tiny"],
                         env={{}}, log_path=Path({str(tmp_path / "server.log")!r}),
                         base_url="http://127.0.0.1:{port}")
        s.start()
        s.wait_ready(30)
        print("ready", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", client], env=python_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        state = json.loads((fake_docker / f"{name}.json").read_text())
        assert listening(port)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        t0 = time.monotonic()
        while (fake_docker / f"{name}.json").exists() and time.monotonic() - t0 < 20:
            time.sleep(0.2)
        gone = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (fake_docker / f"{name}.json").exists(), "the container outlived its client"
    assert not psutil.pid_exists(state["pid"]) or psutil.Process(state["pid"]).status() == psutil.STATUS_ZOMBIE
    assert not listening(port)
    calls = [json.loads(x)["argv"][0] for x in (fake_docker / "calls.jsonl").read_text().splitlines()]
    # the client's `docker logs -f` follower ends (and is recorded) when the container stops: not a teardown step
    assert [c for c in calls if c != "logs"][-2:] == ["stop", "rm"]
    print(f"\ncontainer stopped and removed {gone:.1f} s after its client was killed")


def test_a_container_that_rejects_a_flag_fails_at_once_with_the_engines_message(tmp_path, fake_docker):
    cfg = experiment(
        tmp_path, 8055, {"a": {}}, launch="docker", startup_timeout_s=300, docker={"image": "bracket/crash:test"}
    )
    t0 = time.monotonic()
    with pytest.raises(BlockFailed) as err:
        run(cfg, tmp_path)
    assert time.monotonic() - t0 < 30
    msg = str(err.value)
    assert "exited with code 2 during start-up" in msg and "unrecognized arguments: --bogus-flag" in msg
    assert "unrecognized arguments" in (tmp_path / "logs" / "block-0.log").read_text()  # from docker logs
    assert calls(fake_docker)[-1][0] == "rm" and list(fake_docker.glob("*.json")) == []


def test_an_image_docker_cannot_find_is_reported_with_dockers_words(tmp_path, fake_docker):
    cfg = experiment(tmp_path, 8055, {"a": {}}, launch="docker", docker={"image": "bracket/missing:1"})
    with pytest.raises(BlockFailed, match="code 125.*(pull access denied|Unable to find image)"):
        run(cfg, tmp_path)


def test_attach_runs_every_block_on_the_users_server_without_launching_or_stopping_it(tmp_path):
    with ReferenceServer(rate=4000, ttft=0.005, tokens_per_event=4, port=8054) as srv:
        cfg = experiment(
            tmp_path,
            8054,
            {
                "first": {"speculative": {"method": "ngram", "draft_tokens": 3}},
                "again": {"speculative": {"method": "ngram", "draft_tokens": 3}},
            },
            kind="openai",
            launch="attach",
            base_url=srv.url + "/",
        )
        pids_before = {p.pid for p in psutil.Process().children(recursive=True)}
        for k in (0, 1):
            recs = lines(run(cfg, tmp_path, k))
            assert [r["acceptance_length"] for r in recs] == [4.0] * 3 and all(r["error"] is None for r in recs)
        assert {p.pid for p in psutil.Process().children(recursive=True)} == pids_before  # nothing launched
        metas = [json.loads((tmp_path / "raw" / f"block-{k}.meta.json").read_text()) for k in (0, 1)]
        for m in metas:
            assert m["launch"] == "attach" and m["argv"] == [] and m["pid"] is None
            assert m["served_model"] == "reference-model"  # found on /v1/models
            assert m["engine_version"] == "bracket-reference-server 1"  # from /version
            assert m["cache_flush"] == "no cache flush is known for this engine"
            assert not m.get("warnings")  # unique prefixes in the whole experiment: an unflushed cache is harmless
            assert m["engine_identified"]["kind"] == "vllm"  # the reference server answers as vLLM does
            assert m["engine"] == "openai"  # engine.kind openai: the generic adapter, whatever answers
            assert m["base_url"] == srv.url
        assert len(srv.log) == 6  # the same server answered both blocks
        assert listening(8054)  # and still runs: bracket does not stop what it did not start


def test_attach_to_nothing_fails_with_where_it_looked(tmp_path):
    cfg = experiment(tmp_path, 8056, {"a": {}}, kind="openai", launch="attach", startup_timeout_s=1)
    with pytest.raises(
        BlockFailed,
        match="nothing listens at http://127.0.0.1:8056|no openai server is ready at "
        "http://127.0.0.1:8056.*engine.base_url",
    ):
        run(cfg, tmp_path)
