"""The fast tier stays engine-free: a test that asks for an engine fixture without the `engine` mark stops
the whole run at collection, under any marker expression (tests/conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAST = "not engine and not integration and not slow and not slurm"  # the Makefile's test-fast


def collect(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy2(HERE / "conftest.py", tests / "conftest.py")
    (tests / "test_probe.py").write_text("import pytest\n\n" + body)
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", FAST, str(tests)], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_an_unmarked_test_that_asks_for_the_engine_stops_the_fast_tier(tmp_path):
    proc = collect(tmp_path, "def test_reads_the_model(embedded_engine):\n    pass\n")
    assert proc.returncode != 0
    assert ("1 test(s) use an engine fixture (embedded_engine, engine_venv) without @pytest.mark.engine" in proc.stderr
            and "test_probe.py::test_reads_the_model" in proc.stderr), proc.stdout + proc.stderr


def test_a_marked_one_is_left_out_of_the_fast_tier(tmp_path):
    proc = collect(tmp_path, "@pytest.mark.engine\ndef test_reads_the_model(embedded_engine):\n    pass\n\n"
                             "def test_plain():\n    pass\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1/2 tests collected (1 deselected)" in proc.stdout
