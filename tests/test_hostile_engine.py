"""SIGKILL of the runner on the real embedded engine (vLLM CPU): the API server and its engine core go
with it within seconds, and the attempt's server log and provenance stay for the next attempt."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import faultkit as fk

pytestmark = pytest.mark.engine
PORT = 8033


def test_a_runner_killed_with_sigkill_takes_vllm_down_and_keeps_its_log(tmp_path, embedded_engine):
    engine, model = embedded_engine
    driver = subprocess.Popen(
        [
            sys.executable,
            str(fk.HERE / "drive_engine_block.py"),
            str(tmp_path),
            str(PORT),
            str(engine),
            str(model),
            "200",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=fk.python_env(),
    )
    paths = fk.block_paths(tmp_path)
    partial = paths["raw_path"].with_name("block-0.jsonl.partial")
    group = []
    try:
        fk.wait_for(lambda: fk.count_lines(partial) >= 1 or driver.poll() is not None, 600, "a first record")
        assert driver.poll() is None, driver.stdout.read()[-3000:]
        server = fk.listener(PORT)
        group = fk.group_members(os.getpgid(server))
        assert len(group) >= 2  # the API server and its engine core
        meta = json.loads(paths["meta_path"].with_name("block-0.meta.json.partial").read_text())
        assert meta["pid"] == server and meta.get("engine_version")  # provenance, before the first request
        driver.kill()
        t_kill = time.monotonic()
        driver.wait(timeout=10)
        fk.wait_for(lambda: fk.alive(group) == [], 30, "vLLM's processes to go")
        gone_after = time.monotonic() - t_kill
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in fk.engine_processes(PORT):
            fk.kill_group(os.getpgid(pid))
    print(f"\nSIGKILL of the runner: vLLM's {len(group)} processes gone {gone_after:.2f} s later")
    assert gone_after < 10
    assert fk.engine_processes(PORT) == [] and fk.listener(PORT) is None
    assert "Application startup complete" in paths["log_path"].read_text()
