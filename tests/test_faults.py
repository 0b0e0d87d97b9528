"""Faults at the block level, provoked for real against a stand-in server (tests/data/faults/fake_engine.py):
real processes, real sockets, real signals; only the engine is small. The same faults on the real vLLM
engine, through Snakemake, are in test_faults_engine.py.

What the user sees in each case is in the test's name.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest
from bracket import engines, records
from bracket.article.findings import texts
from bracket.cli.launch import launch_command
from bracket.measure.session import BlockFailed
from bracket.stats import analyze

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast


def test_each_bad_response_is_recorded_with_its_error_and_the_block_continues(tmp_path):
    port = fk.free_port()
    script = "ok,no_usage,malformed,http500,http429,truncated,ok"
    cfg = fk.experiment(tmp_path, port, runs=7)
    raw = fk.run(cfg, tmp_path, fk.fake_argv(port, "--script", script))
    recs = fk.lines(raw)
    errors = [r["error"] for r in recs]
    assert len(recs) == 7  # nothing dropped
    assert errors[0] is None and errors[6] is None
    assert "no usage" in errors[1]
    assert "malformed stream event" in errors[2]
    assert errors[3].startswith("HTTP 500") and "engine core died" in errors[3]
    assert errors[4].startswith("HTTP 429")
    assert "stream ended before [DONE]" in errors[5]
    meta = json.loads(fk.block_paths(tmp_path)["meta_path"].read_text())
    assert meta["status"] == "complete"
    runs = records.tidy(records.read([raw]))
    assert runs["valid"].tolist() == [True, False, False, False, False, False, True]
    assert set(runs.loc[~runs["valid"], "invalid_reason"]) == {"error"}


def test_on_error_stop_ends_the_block_at_the_first_failure_and_the_rerun_keeps_the_attempt(tmp_path):
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=4, on_error="stop")
    paths = fk.block_paths(tmp_path)
    with pytest.raises(BlockFailed) as err:
        fk.run(cfg, tmp_path, fk.fake_argv(port, "--script", "ok,http500,ok", "--child"))
    assert "request.on_error is 'stop'" in str(err.value) and "HTTP 500" in str(err.value)
    # the attempt is set aside at once, whole: records, provenance, server log
    failed = tmp_path / "raw" / "failed"
    measured = fk.lines(fk.attempt(tmp_path))
    assert [r["error"] is None for r in measured] == [True, False]  # the good run and the failed one
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert meta["status"] == "failed" and "HTTP 500" in meta["error"]
    child = int(fk.attempt(tmp_path, ext="log").read_text().split("child ")[1].split()[0])
    assert fk.alive([meta["pid"], child]) == []  # server and its child stopped
    assert not paths["raw_path"].exists()
    assert sorted(p.name for p in failed.iterdir()) == [
        "block-0.attempt-1.jsonl",
        "block-0.attempt-1.log",
        "block-0.attempt-1.meta.json",
    ]

    # The next invocation runs the block again from scratch, in a fresh server; the attempt stays.
    raw = fk.run(cfg, tmp_path, fk.fake_argv(port))
    assert len(fk.lines(raw)) == 4
    assert fk.lines(fk.attempt(tmp_path)) == measured
    assert len(list(failed.iterdir())) == 3
    assert not raw.with_name("block-0.jsonl.partial").exists()
    # and globs over raw/ (the report's) see only finished blocks
    assert sorted(p.name for p in (tmp_path / "raw").glob("block-*.jsonl")) == ["block-0.jsonl"]


def test_cache_hits_early_stops_and_short_outputs_are_flagged_counted_and_explained(tmp_path):
    """Collect and analyze as the workflow runs them (runs.csv written and read back)."""
    port = fk.free_port()
    script = "ok,cache_hit,ok,early_stop,short,ok,ok,ok"
    cfg = fk.experiment(tmp_path, port, runs=4, warmup=0, workloads=("code", "chat"))
    raw = fk.run(cfg, tmp_path, fk.fake_argv(port, "--script", script))
    runs = records.tidy(records.read([raw]))
    runs.to_csv(tmp_path / "runs.csv", index=False)
    stats = analyze(pd.read_csv(tmp_path / "runs.csv"), cfg).data()
    counts = stats["counts"]
    assert counts["total"] == 8 and counts["valid"] == 5 and counts["invalid"] == 3
    # each invalid run is counted once, under its first reason: the early stop, which also came out
    # short, is one early stop (the table below keeps both reasons)
    assert counts["invalid_by_reason"] == {"cache hit": 1, "early stop": 1, "token count": 1}
    assert sum(counts["invalid_by_reason"].values()) == counts["invalid"]
    reasons = runs.loc[~runs["valid"], "invalid_reason"].tolist()
    assert reasons == ["cache hit", "early stop (stop); token count 4 != max_tokens 8", "token count 7 != max_tokens 8"]
    # excluded from statistics: each cell's n counts only valid runs
    assert sum(c["n"] for c in stats["cells"]) == 5
    said = " ".join(texts(stats["findings"]))
    for reason in ("cache hit", "early stop", "token count"):
        assert f"invalid ({reason}" in said, said


def test_a_taken_port_is_named_with_its_process_before_any_launch(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = fk.experiment(tmp_path, port)
        with pytest.raises(BlockFailed) as err:
            fk.run(cfg, tmp_path, fk.fake_argv(port))
    msg = str(err.value)
    assert f"port {port}" in msg and f"pid {os.getpid()}" in msg and "engine.port" in msg
    assert not fk.block_paths(tmp_path)["log_path"].exists()  # no server was started


def test_a_server_that_never_gets_ready_times_out_with_how_long_and_its_log_tail(tmp_path):
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, startup_timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(BlockFailed) as err:
        fk.run(cfg, tmp_path, fk.fake_argv(port, "--never-ready"))
    assert time.monotonic() - t0 < 25
    msg = str(err.value)
    assert "did not become ready within 2 s" in msg and "serving on 127.0.0.1" in msg
    assert str(fk.block_paths(tmp_path)["log_path"]) in msg
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert meta["status"] == "failed" and fk.alive([meta["pid"]]) == []


def test_a_rejected_flag_fails_at_once_with_the_servers_message(tmp_path):
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, startup_timeout_s=300)
    t0 = time.monotonic()
    with pytest.raises(BlockFailed) as err:
        fk.run(cfg, tmp_path, fk.fake_argv(port, "--reject-flag"))
    assert time.monotonic() - t0 < 10
    assert "exited with code 2 during start-up" in str(err.value)
    assert "unrecognized arguments: --no-such-flag" in str(err.value)
    # the engine's own complaint leads, before the log tail
    assert "unrecognized arguments: --no-such-flag" in str(err.value).splitlines()[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_block_stops_the_servers_whole_group_and_ends_on_a_whole_record(tmp_path, sig):
    port = fk.free_port()
    driver = subprocess.Popen(
        [
            sys.executable,
            str(fk.HERE / "drive_block.py"),
            str(tmp_path),
            str(port),
            "50",
            "--script",
            "slow",
            "--child",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=fk.python_env(),
        preexec_fn=fk.as_from_a_terminal,
    )
    paths = fk.block_paths(tmp_path)
    partial = paths["raw_path"].with_name("block-0.jsonl.partial")
    try:
        fk.wait_for(lambda: fk.count_lines(partial) >= 2, 60, "two records")
        server = fk.listener(port)
        group = fk.group_members(server)
        assert len(group) == 2  # the server and its child
        time.sleep(0.9)  # land mid-request
        driver.send_signal(sig)
        out, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode != 0, out
    assert "records it measured, its provenance and server log are kept in" in out
    assert fk.alive(group) == [] and fk.engine_processes(port) == []
    measured = fk.lines(fk.attempt(tmp_path))
    assert 2 <= len(measured) < 50 and all(r["wall_s"] for r in measured)
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert meta["status"] == "failed"
    assert ("SystemExit" if sig == signal.SIGTERM else "KeyboardInterrupt") in meta["error"]


def test_an_api_key_from_the_environment_is_sent_and_written_nowhere(tmp_path, monkeypatch):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", fk.SECRET)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=2, api_key_env="BRACKET_TEST_API_KEY")
    # The stand-in answers 401 unless the key it was given (by environment, under vLLM's name) comes back.
    raw = fk.run(cfg, tmp_path, fk.fake_argv(port, "--api-key-env", "VLLM_API_KEY"))
    assert [r["error"] for r in fk.lines(raw)] == [None, None]
    log = fk.block_paths(tmp_path)["log_path"].read_text()
    assert log.count("auth=yes") == 2
    meta = json.loads(fk.block_paths(tmp_path)["meta_path"].read_text())
    assert meta["env"]["VLLM_API_KEY"] == "***"
    assert fk.files_containing(tmp_path, fk.SECRET) == []
    # the real engine's command: key by environment only, loopback by default
    argv = engines.get("vllm").launch_argv(cfg, cfg.arms["baseline"], "m", "python")
    assert "--api-key" not in argv and fk.SECRET not in " ".join(argv)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    # and `bracket launch --print` shows the key by name only
    printed = launch_command(cfg, "baseline")
    assert "VLLM_API_KEY=$BRACKET_TEST_API_KEY" in printed and fk.SECRET not in printed


def test_a_missing_api_key_variable_fails_before_launch(tmp_path, monkeypatch):
    monkeypatch.delenv("BRACKET_TEST_API_KEY", raising=False)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, api_key_env="BRACKET_TEST_API_KEY")
    with pytest.raises(BlockFailed, match="engine.api_key_env names 'BRACKET_TEST_API_KEY'.*export it"):
        fk.run(cfg, tmp_path, fk.fake_argv(port))
    assert not fk.block_paths(tmp_path)["log_path"].exists()
