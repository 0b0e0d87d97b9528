"""The console of a rule shows bracket's progress, not one line per HTTP request.

httpx logs every request at INFO ("HTTP Request: POST http://... 200 OK"); inside a rule's log
(bracket.rulelog, where the workflow's scripts configure logging) the root logger is at INFO, so an
attach run's console was a third request lines (193 of 596). A real block against the stand-in engine
runs inside rule_log, as workflow/scripts/run_block.py runs it, and its stderr and log are counted.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import free_port, python_env

SCRIPT = """\
import logging, sys
from pathlib import Path
from bracket.rulelog import rule_log
from tests.support import faultkit

tmp, port, loud = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "loud"
with rule_log(tmp / "block.log") as log:
    if loud:  # what the console was before: httpx at the root's INFO
        logging.getLogger("httpx").setLevel(logging.INFO)
    log.info("block 0 of faults: starting")
    faultkit.run(faultkit.experiment(tmp, port, runs=4), tmp, faultkit.fake_argv(port))
    log.info("block 0 of faults: done")
"""


def _block(tmp_path, loud: bool):
    folder = tmp_path / ("loud" if loud else "quiet")
    folder.mkdir()
    script = folder / "block.py"
    script.write_text(SCRIPT)
    port = free_port()
    proc = subprocess.run(
        [sys.executable, str(script), str(folder), str(port), "loud" if loud else "quiet"],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = sum(p.read_text().count("\n") for p in folder.rglob("block-0.jsonl"))
    return proc.stderr, (folder / "block.log").read_text(), records


@pytest.mark.integration
def test_a_blocks_console_and_log_hold_no_http_request_lines(tmp_path):
    stderr, log, records = _block(tmp_path, loud=False)
    assert records >= 4  # the block made its requests through httpx
    assert stderr.count("HTTP Request:") == 0 and log.count("HTTP Request:") == 0, stderr[-2000:]
    assert "block 0 of faults: done" in stderr and "block 0 of faults: done" in log  # bracket's progress stays
    # the same block with httpx at INFO: the lines the quieting removes (so the count above can fail)
    loud_stderr, _, _ = _block(tmp_path, loud=True)
    assert loud_stderr.count("HTTP Request:") >= records, loud_stderr[-2000:]
