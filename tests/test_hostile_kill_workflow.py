"""kill -9 of the block runner through real Snakemake (issue 33): Snakemake deletes a killed job's declared
log before it reruns the job, so the attempt's server log reaches failed/ only by its second name under raw/
(bracket.block.runner.log_link). A copy of the workflow launches the stand-in server natively, as an engine program
bracket starts itself (a wrapper in the place of engine.python that runs tests/data/faults/fake_engine.py on
the port bracket gives it); the runner is killed mid-block, the same target is run again."""

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration


def stand_in_engine(path, log_lines: int):
    """An engine program for engine.kind vllm: answers the preflight's import check, and otherwise serves the
    stand-in (every request slow) on the --port of bracket's vLLM command, after `log_lines` lines of start-up."""
    path.write_text(f"""#!/bin/sh
[ "$1" = "-c" ] && exit 0
port=""
while [ $# -gt 0 ]; do [ "$1" = "--port" ] && port="$2"; shift; done
i=1; while [ $i -le {log_lines} ]; do echo "start-up line $i"; i=$((i + 1)); done
exec {sys.executable} {fk.FAKE_ENGINE} --port "$port" --script slow
""")
    path.chmod(0o755)
    return path


def test_the_server_log_of_a_runner_killed_by_sigkill_reaches_failed_after_snakemake_reruns_the_block(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    model = tiny_model(tmp_path / "model")
    engine = stand_in_engine(tmp_path / "engine", 150)
    port = fk.free_port()
    (repo / "experiments" / "killed.yaml").write_text(
        f"engine: {{kind: vllm, embedded: false, python: {engine}, model: {model}, port: {port}, "
        "startup_timeout_s: 30}\n"
        "arms: {baseline: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {kind: sequential, rounds: 1, runs_per_block: 12, warmup_runs: 0, cooldown_s: 0}\n"
        "request: {max_tokens: 4}\nanalysis: {bootstrap_resamples: 200}\n"
        "hardware: {probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}\n"
        "controls: {neutrality: false, neutrality_off: the stand-in answers by request count}\n"
    )
    raw = repo / "results" / "killed" / "raw"
    target = "results/killed/raw/block-0.jsonl"
    declared = repo / "logs" / "killed" / "server" / "block-0.log"
    first = subprocess.Popen(
        fk.snakemake_argv(target),
        cwd=repo,
        env=fk.snakemake_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        fk.wait_for(lambda: fk.count_lines(raw / "block-0.jsonl.partial") >= 3, 300, "three records of block 0")
        server = psutil.Process(fk.wait_for(lambda: fk.listener(port), 10, "the stand-in server"))
        runner = server.parent()  # bracket's block runner started the server (session.serve)
        assert any("run_block" in part for part in runner.cmdline()), runner.cmdline()
        os.kill(runner.pid, signal.SIGKILL)
        out, _ = first.communicate(timeout=120)
        fk.wait_for(lambda: fk.listener(port) is None, 30, "the watchdog to stop the orphaned server")
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        pid = fk.listener(port)
        if pid:
            fk.kill_group(os.getpgid(pid))
    assert first.returncode != 0, out[-3000:]
    assert not (raw / "failed").exists()  # a runner killed outright set nothing aside itself

    again = subprocess.run(
        fk.snakemake_argv(target), cwd=repo, env=fk.snakemake_env(), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    kept = (raw / "failed" / "block-0.attempt-1.log").read_text()
    assert kept.count("start-up line") == 150 and "serving on" in kept and "request 2 slow" in kept
    records = fk.lines(raw / "failed" / "block-0.attempt-1.jsonl")
    assert len(records) >= 3 and all(r["block"] == 0 for r in records)
    meta = json.loads((raw / "failed" / "block-0.attempt-1.meta.json").read_text())
    assert meta["status"] == "started" and meta["block"] == 0  # what ran; it never got to say how it ended
    # the rerun measured the whole block in a fresh server, whose own log is the declared one
    assert len(fk.lines(raw / "block-0.jsonl")) == 12
    assert "request 2 slow" in declared.read_text() and "request 11 slow" in declared.read_text()
    assert not (raw / "block-0.log.partial").exists()
