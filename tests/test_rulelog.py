"""A rule's script writes its log, and its error lands there (the file Snakemake names when a job
fails), not only on the terminal."""

from __future__ import annotations

import subprocess
import sys

from tests.support import python_env


def run(tmp_path, body: str):
    script = tmp_path / "script.py"
    script.write_text("import logging, sys\nfrom bracket.rulelog import rule_log\n" + body)
    return subprocess.run([sys.executable, str(script)], env=python_env(), capture_output=True, text=True, timeout=60)


def test_the_traceback_of_a_failing_script_is_in_its_log(tmp_path):
    log = tmp_path / "logs" / "weights.log"
    proc = run(
        tmp_path,
        f"with rule_log({str(log)!r}) as log:\n"
        "    log.info('reading headers')\n"
        "    print('a line on stdout')\n"
        "    raise FileNotFoundError('model path embedded does not exist')\n",
    )
    assert proc.returncode == 1
    text = log.read_text()
    assert "reading headers" in text and "a line on stdout" in text
    assert "Traceback" in text and "FileNotFoundError: model path embedded does not exist" in text
    assert "FileNotFoundError" in proc.stderr  # and still on the terminal


def test_a_clean_exit_code_and_output_reach_the_log(tmp_path):
    log = tmp_path / "block.log"
    proc = run(
        tmp_path,
        f"with rule_log({str(log)!r}):\n"
        "    print('block 3 of smoke failed: port in use', file=sys.stderr)\n"
        "    sys.exit(1)\n",
    )
    assert proc.returncode == 1
    assert "block 3 of smoke failed: port in use" in log.read_text() and "exited with status 1" in log.read_text()
    assert "port in use" in proc.stderr
