"""The fast tier stays engine-free: a test that asks for an engine fixture without the `engine` mark stops
the whole run at collection, under any marker expression; and a run whose tests wrote into the checkout
fails, naming the files (tests/conftest.py). Each probe runs pytest on a copy of conftest.py in tmp_path,
which is then the checkout it guards."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FAST = "not engine and not integration and not slow and not slurm"  # the Makefile's test-fast


def pytest_on(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "prebuild.py"):  # conftest.py and the module it imports beside it
        shutil.copy2(HERE / name, tests / name)
    # and the package it imports from the root, which pyproject's pythonpath puts on the path as in the checkout
    shutil.copytree(HERE / "support", tests / "support", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (tests / "test_probe.py").write_text("import pytest\n\nfrom conftest import ROOT\n\n" + body)
    # Without the hypothesis and anyio plugins, which the probes do not use: hypothesis's costs 1.4 s of CPU.
    plugins = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, "-m", FAST, *args, str(tests)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def collect(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    return pytest_on(tmp_path, body, "--collect-only")


def test_an_unmarked_test_that_asks_for_the_engine_stops_the_fast_tier(tmp_path):
    proc = collect(tmp_path, "def test_reads_the_model(embedded_engine):\n    pass\n")
    assert proc.returncode != 0
    assert (
        "1 test(s) use an engine fixture (embedded_engine, engine_venv, trainer_venv, llama_server) without @pytest.mark.engine"
        in proc.stderr
        and "test_probe.py::test_reads_the_model" in proc.stderr
    ), proc.stdout + proc.stderr


def test_a_marked_one_is_left_out_of_the_fast_tier(tmp_path):
    proc = collect(
        tmp_path,
        "@pytest.mark.engine\ndef test_reads_the_model(embedded_engine):\n    pass\n\ndef test_plain():\n    pass\n",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1/2 tests collected (1 deselected)" in proc.stdout


def test_a_test_that_writes_into_the_checkout_fails_the_run_and_names_the_files(tmp_path):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "smoke.yaml").write_text("arms: {a: {}}\n")
    proc = pytest_on(
        tmp_path,
        "def test_rewrites_an_experiment():\n"
        "    (ROOT / 'experiments' / 'smoke.yaml').write_text('arms: {b: {}}\\n')\n\n"
        "def test_leaves_results():\n"
        "    (ROOT / 'results' / 'smoke').mkdir(parents=True)\n"
        "    (ROOT / 'results' / 'smoke' / 'runs.csv').write_text('arm\\n')\n",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 passed" in out and "The tests wrote into the checkout" in out, out
    assert "changed experiments/smoke.yaml" in out and "added results/smoke/runs.csv" in out, out


def test_writes_under_tmp_path_and_the_caches_leave_the_run_green(tmp_path):
    proc = pytest_on(
        tmp_path,
        "def test_writes_its_own_folder(tmp_path):\n"
        "    (tmp_path / 'runs.csv').write_text('arm\\n')\n\n"
        "def test_fills_the_build_folder():\n"
        "    (ROOT / 'resources' / 'models').mkdir(parents=True)\n",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The tests wrote into the checkout" not in proc.stdout + proc.stderr


# `make test` and `make test-fast` run on pytest-xdist's workers (-n); the guards hold there too. A probe with
# two workers starts three Pythons (about 6 s of CPU): integration, out of the fast tier.
@pytest.mark.integration
def test_on_xdist_workers_an_unmarked_test_that_asks_for_the_engine_still_stops_the_run(tmp_path):
    proc = pytest_on(tmp_path, "def test_reads_the_model(embedded_engine):\n    pass\n", "-n", "2")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "passed" not in out, out
    assert (
        "use an engine fixture (embedded_engine, engine_venv, trainer_venv, llama_server) without @pytest.mark.engine"
        in out
    ), out


def test_a_fast_test_that_starts_the_workflow_fails_naming_the_mark_and_other_programs_run(tmp_path):
    proc = pytest_on(
        tmp_path,
        "import subprocess, sys\n\n"
        "def test_runs_the_workflow():\n"
        "    subprocess.run(['snakemake', '--version'])\n\n"
        "def test_runs_python():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out
    assert "a test of the fast tier started snakemake" in out and "@pytest.mark.integration" in out, out


def test_the_programs_a_fast_test_may_not_start_are_told_by_name_or_module():
    from conftest import started_program

    assert started_program(["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]) == "vllm"
    assert started_program(["/opt/llama.cpp/build/bin/llama-server", "-m", "x.gguf"]) == "llama-server"
    assert started_program(["/venv/bin/snakemake", "--cores", "1"]) == "snakemake"
    assert started_program([sys.executable, "-m", "papermill", "in.ipynb", "out.ipynb"]) == "papermill"
    assert started_program("snakemake -n") == "snakemake"
    assert started_program([sys.executable, "tests/data/faults/fake_engine.py", "--port", "8000"]) is None
    assert started_program(["git", "status"]) is None


def test_a_serial_test_in_the_fast_tier_is_refused(tmp_path):
    proc = collect(tmp_path, "@pytest.mark.serial\ndef test_timed():\n    pass\n")
    assert proc.returncode != 0
    assert "1 test(s) marked serial are in the fast tier" in proc.stderr and "test_probe.py::test_timed" in proc.stderr


@pytest.mark.integration
def test_on_xdist_workers_a_build_in_the_checkout_is_exempt_and_any_other_write_is_named(tmp_path):
    """A worker that ran the workflow's build rules in the checkout (an engine fixture) tells the controller,
    which guards the checkout: the build's records pass, a stray file in the same run is still named."""
    proc = pytest_on(
        tmp_path,
        "from conftest import BUILT_IN_CHECKOUT\n\n"
        "def test_builds_the_engine():\n"
        "    BUILT_IN_CHECKOUT.update(('.snakemake', 'logs/engine'))\n"
        "    (ROOT / '.snakemake' / 'log').mkdir(parents=True)\n"
        "    (ROOT / '.snakemake' / 'log' / 'build.log').write_text('built\\n')\n\n"
        "def test_leaves_results():\n"
        "    (ROOT / 'results').mkdir()\n"
        "    (ROOT / 'results' / 'runs.csv').write_text('arm\\n')\n",
        "-n",
        "2",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "2 passed" in out, out
    assert "added results/runs.csv" in out and ".snakemake" not in out.split("The tests wrote into the checkout")[1], (
        out
    )


def test_the_longest_modules_go_first_in_the_listed_order_the_llamacpp_ones_last_and_the_rest_keep_theirs():
    from conftest import LLAMACPP_LAST, LONGEST_FIRST, longest_first

    class Item:
        def __init__(self, name: str, test: str):
            self.path = HERE / name
            self.nodeid = f"tests/{name}::{test}"

    first, second = LONGEST_FIRST[0][0], LONGEST_FIRST[1][0]
    late, later = LLAMACPP_LAST[0], LLAMACPP_LAST[1]
    items = [
        Item(later, "t1"),
        Item("test_a.py", "t1"),
        Item(late, "t1"),
        Item(second, "t1"),
        Item("test_b.py", "t1"),
        Item(first, "t1"),
        Item(second, "t2"),
        Item("test_a.py", "t2"),
    ]
    assert [i.nodeid for i in longest_first(items)] == [
        f"tests/{first}::t1",
        f"tests/{second}::t1",
        f"tests/{second}::t2",
        "tests/test_a.py::t1",
        "tests/test_b.py::t1",
        "tests/test_a.py::t2",
        f"tests/{late}::t1",
        f"tests/{later}::t1",
    ]
    # every module named is one of the suite's, named once
    names = [name for name, _ in LONGEST_FIRST] + list(LLAMACPP_LAST)
    assert len(set(names)) == len(names) and all((HERE / name).is_file() for name in names)
