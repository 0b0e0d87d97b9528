"""A fault on the real embedded engine (vLLM CPU), provoked for real: a flag vLLM rejects fails the block seconds
after the process exits, with vLLM's own message and the log path (seed 000 lost eight minutes to this).

The workflow's fault scenario (a server killed mid-block, Ctrl-C, the resume, the API key) runs on the reference
engine: tests/test_faults_workflow.py.
"""

import json
import os
import time

import pytest
from bracket.block import runner
from bracket.experiment import design

from tests.support import faultkit as fk

pytestmark = pytest.mark.engine

ENGINE, MODEL = fk.EMBEDDED_ENGINE, fk.EMBEDDED_MODEL
BAD_FLAG_PORT = 8032


@pytest.fixture(scope="session")
def embedded(embedded_engine):
    return embedded_engine


@pytest.fixture(autouse=True)
def no_engine_left_behind():
    yield
    for pid in fk.engine_processes(BAD_FLAG_PORT):  # only ours: this port is this test's
        fk.kill_group(os.getpgid(pid))


def test_a_flag_vllm_rejects_fails_the_block_at_once_with_vllms_message(tmp_path, embedded):
    engine, model = embedded
    cfg = fk.experiment(tmp_path, BAD_FLAG_PORT, args=["--no-such-flag"], startup_timeout_s=300)
    blocks = design.from_config(cfg)
    paths = fk.block_paths(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(runner.BlockFailed) as err:
        runner.run_block(
            cfg, "bad_flag", blocks[0], 1, model=str(model), python=str(engine / "bin" / "python"), root="/", **paths
        )
    t_error = time.time()
    total = time.monotonic() - t0
    msg = str(err.value)
    assert "exited with code 2 during start-up" in msg, msg
    assert "unrecognized arguments: --no-such-flag" in msg, msg
    # the engine's own complaint leads, before the log tail
    assert "unrecognized arguments: --no-such-flag" in str(err.value).splitlines()[0]
    assert str(paths["log_path"]) in msg
    # the last thing the process did was write its error; the block failed within seconds of that
    after_exit = t_error - paths["log_path"].stat().st_mtime
    print(f"\nbad flag: block failed {after_exit:.2f} s after vLLM's last log line, {total:.1f} s after launch")
    assert after_exit < 10
    assert total < 120  # vs startup_timeout_s 300
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert meta["status"] == "failed" and "--no-such-flag" in meta["argv"]
