"""Installs the way users install: a plain `pip install .` into a fresh virtual environment carries the
schema, the workflow and the article notebook; `bracket --version`, the CLI and a workflow written out
by `bracket workflow DIR` work from it, with no clone in sight."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    # A copy of the tracked files, so the build leaves nothing in the clone and sees no local state.
    src = tmp / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        rel = Path(os.fsdecode(f))
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(src)], capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return venv, tmp


def run(venv, *args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_version_and_the_schema_from_a_plain_install(installed):
    venv, tmp = installed
    from bracket import __version__

    proc = run(venv, "bracket", "--version", cwd=tmp)
    assert proc.returncode == 0 and proc.stdout.strip() == f"bracket {__version__}"
    # The package is the installed one, not the clone's, and it finds its schema under share/bracket.
    code = "import bracket.config as c, bracket.share as s; print(c.__file__); print(s.schema_path())"
    out = run(venv, "python", "-c", code, cwd=tmp).stdout.splitlines()
    assert str(venv) in out[0] and out[1] == str(venv / "share" / "bracket" / "workflow" / "schemas" /
                                                 "experiment.schema.yaml")


def test_a_written_workflow_validates_dry_runs_and_lints(installed):
    venv, tmp = installed
    wf = tmp / "wf"
    proc = run(venv, "bracket", "workflow", str(wf), "--json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["written"] > 30
    for rel in ("Snakefile", "workflow/schemas/experiment.schema.yaml", "notebooks/article.ipynb",
                "experiments/smoke.yaml", "experiments/prompts/code.jsonl", "workflow/scripts/run_block.py"):
        assert (wf / rel).is_file(), rel
    proc = run(venv, "bracket", "launch", "experiments/examples/llamacpp_draft.yaml", "draft_4", cwd=wf)
    assert proc.returncode == 0 and "llama-server -m /data/gguf/Qwen3-8B-Q8_0.gguf" in proc.stdout, proc.stderr
    proc = run(venv, "snakemake", "-n", "smoke", cwd=wf)
    assert proc.returncode == 0 and "report" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert run(venv, "snakemake", "--lint", cwd=wf).returncode == 0


def test_the_cli_on_numbers_from_anywhere(installed):
    venv, tmp = installed
    raw = ROOT / "tests" / "data" / "stats" / "seed000_round3.csv"
    proc = run(venv, "bracket", "compare", str(raw), "--baseline", "no_speculation", "--candidate",
               "dflash2_draft12", "--json", "--resamples", "300", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    [c] = json.loads(proc.stdout)
    # seed 000's round three ran each arm in one block: the ratio, but no verdict (tests/test_stats_units.py)
    assert c["verdict"] == "undetermined" and round(c["ratio"], 2) == 5.28
