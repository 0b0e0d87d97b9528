"""A server program without its execute bit is reported as that, with `chmod +x`, never as a disk that refused a
write (issue 40): before any block by the preflight, and by the block itself where a program is given past it.

The programs are real files on this host (a copy of a shell script, mode 0644); the block starts a real
process (`bracket.wire.server.Server.start`), and the workflow case runs real Snakemake in a copy of the
workflow on the reference engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bracket.experiment import config, preflight
from bracket.measure.session import BlockFailed
from bracket.wire import server

from tests.support import faultkit as fk


def no_execute_bit(path: Path) -> Path:
    path.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    path.chmod(0o644)
    return path


def test_a_python_without_its_execute_bit_is_named_by_the_preflight(tmp_path):
    python = no_execute_bit(tmp_path / "python3")
    exp = config.validate(
        {"engine": {"kind": "reference", "python": str(python), "port": fk.free_port()}, "arms": {"a": {}}},
        source="execute bit",
    )
    [why] = preflight.binary_problems(exp)
    assert f"engine.python is '{python}', a file without its execute bit (mode 0644)" in why
    assert f"chmod +x {python}" in why and "free space" not in why
    python.chmod(0o755)  # the fix as the message gives it
    assert preflight.binary_problems(exp) == []


def test_a_server_executable_without_its_execute_bit_is_named_by_the_preflight(tmp_path):
    exe = no_execute_bit(tmp_path / "llama-server")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    exp = config.validate(
        {
            "engine": {"kind": "llamacpp", "embedded": False, "executable": str(exe), "model": str(model)},
            "arms": {"a": {}},
        },
        source="execute bit",
    )
    [why] = preflight.binary_problems(exp)
    assert "engine.executable" in why and "execute bit" in why and f"chmod +x {exe}" in why


def test_a_bare_name_on_path_without_its_execute_bit_is_found_as_exec_finds_it(tmp_path, monkeypatch):
    no_execute_bit(tmp_path / "ollama")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    exp = config.validate({"engine": {"kind": "ollama", "embedded": False, "model": "m"}, "arms": {"a": {}}})
    [why] = preflight.binary_problems(exp)
    assert "engine.kind ollama's program is 'ollama'" in why and f"chmod +x {tmp_path / 'ollama'}" in why


def test_exec_errors_are_worded_by_their_cause(tmp_path):
    exe = no_execute_bit(tmp_path / "srv")
    with pytest.raises(PermissionError) as err:
        subprocess.Popen([str(exe)])
    assert "no execute bit (mode 0644)" in server.program_problem(str(exe), err.value)
    with pytest.raises(FileNotFoundError) as err:
        subprocess.Popen([str(tmp_path / "missing")])
    assert "was not found" in server.program_problem(str(tmp_path / "missing"), err.value)
    script = tmp_path / "noshebang"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    with pytest.raises(OSError) as err:
        subprocess.Popen([str(script)])
    assert "without a #! line" in server.program_problem(str(script), err.value)


@pytest.mark.integration
def test_a_block_whose_program_lacks_its_execute_bit_says_so_not_free_space(tmp_path):
    exe = no_execute_bit(tmp_path / "engine")
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port)
    t0 = time.monotonic()
    with pytest.raises(BlockFailed) as err:
        fk.run(cfg, tmp_path, [str(exe), "--port", str(port)])
    msg = str(err.value)
    assert time.monotonic() - t0 < 10
    assert msg.startswith("block 1/1 (block-0) was not started: the server program")
    assert "no execute bit (mode 0644)" in msg and f"chmod +x {exe}" in msg
    assert "free space" not in msg and "cannot write" not in msg
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())  # the attempt is kept, with its reason
    assert meta["status"] == "failed" and "execute bit" in meta["error"]
    assert "execute bit" in fk.attempt(tmp_path, ext="log").read_text()  # and the server log says it too


@pytest.mark.integration
def test_the_workflow_stops_before_any_job_naming_the_execute_bit(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    python = no_execute_bit(tmp_path / "python3")
    (repo / "experiments" / "nox.yaml").write_text(
        f"engine: {{kind: reference, python: {python}, port: {fk.free_port()}}}\n"
        "arms: {baseline: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {rounds: 1, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0}\n"
        "hardware: {probe_bandwidth: false, bandwidth_gbps: 20}\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        fk.snakemake_argv("nox"), cwd=repo, env=fk.snakemake_env(), capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and time.monotonic() - t0 < 60
    assert "without its execute bit" in out and f"chmod +x {python}" in out, out[-3000:]
    assert "free space" not in out and not (repo / "results" / "nox" / "raw").exists()  # no block started
