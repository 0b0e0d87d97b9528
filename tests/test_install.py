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

from tests.support import free_port

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
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(src)], capture_output=True, text=True, timeout=1500
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return venv, tmp


def run(venv, *args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def shell(venv, command: str, *, cwd):
    """A command line as a user types it, in a shell whose PATH starts with the environment's bin/."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_version_and_the_schema_from_a_plain_install(installed):
    venv, tmp = installed
    from bracket import __version__

    proc = run(venv, "bracket", "--version", cwd=tmp)
    # built from a copy of the tracked files, without git: the build recorded that it cannot name the commit
    assert proc.returncode == 0 and proc.stdout.strip().startswith(
        f"bracket {__version__}, commit unknown (built from {tmp / 'src'}, a tree without git"
    ), proc.stdout
    # The package is the installed one, not the clone's, and it finds its schema under share/bracket.
    code = "import bracket.experiment.config as c, bracket.share as s; print(c.__file__); print(s.schema_path())"
    out = run(venv, "python", "-c", code, cwd=tmp).stdout.splitlines()
    assert str(venv) in out[0] and out[1] == str(
        venv / "share" / "bracket" / "workflow" / "schemas" / "experiment.schema.yaml"
    )


def test_a_written_workflow_validates_dry_runs_and_lints(installed):
    venv, tmp = installed
    wf = tmp / "wf"
    proc = run(venv, "bracket", "workflow", str(wf), "--json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["written"] > 30
    for rel in (
        "Snakefile",
        "profiles/default/config.yaml",
        "workflow/schemas/experiment.schema.yaml",
        "notebooks/article.ipynb",
        "experiments/smoke.yaml",
        "experiments/prompts/code.jsonl",
        "workflow/scripts/run_block.py",
    ):
        assert (wf / rel).is_file(), rel
    proc = run(venv, "bracket", "launch", "experiments/examples/llamacpp_draft.yaml", "draft_4", cwd=wf)
    assert proc.returncode == 0 and "llama-server -m /data/gguf/Qwen3-8B-Q8_0.gguf" in proc.stdout, proc.stderr
    proc = run(venv, "snakemake", "-n", "smoke", cwd=wf)
    assert proc.returncode == 0 and "report" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    # the workflow profile came with it, and Snakemake reads it (run: jobs in a thread, profiles/default)
    assert "Using workflow specific profile profiles/default" in proc.stdout + proc.stderr
    assert run(venv, "snakemake", "--lint", cwd=wf).returncode == 0


def test_the_cli_on_numbers_from_anywhere(installed):
    venv, tmp = installed
    raw = ROOT / "tests" / "data" / "stats" / "seed000_round3.csv"
    proc = run(
        venv,
        "bracket",
        "compare",
        str(raw),
        "--baseline",
        "no_speculation",
        "--candidate",
        "dflash2_draft12",
        "--json",
        "--resamples",
        "300",
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr
    [c] = json.loads(proc.stdout)
    # seed 000's round three ran each arm in one block: the ratio, but no verdict (tests/test_stats_units.py)
    assert c["verdict"] == "undetermined" and round(c["ratio"], 2) == 5.28


@pytest.fixture(scope="module")
def workflow_copy(installed):
    venv, tmp = installed
    wf = tmp / "wf-readme"
    proc = run(venv, "bracket", "workflow", str(wf), cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return wf


def readme_command(start: str) -> str:
    """The README's command that begins with `start`, its continuation lines joined, as a user would paste it."""
    lines = (ROOT / "README.md").read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    cmd = lines[i].strip()
    while cmd.endswith("\\"):
        i += 1
        cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
    return cmd.split("  #")[0].strip()


def test_the_readmes_design_notebook_command_runs_in_a_written_workflow(installed, workflow_copy):
    """README, "Design before you measure": the design notebook from an installed workflow, on a pilot (the
    article's fixture, copied where a pilot's results would be), writes the designed experiment."""
    venv, _ = installed
    wf = workflow_copy
    probe = wf / "tests" / "data" / "report" / "probe"
    (wf / "results" / "probe").mkdir(parents=True)
    shutil.copy2(probe / "runs.csv", wf / "results" / "probe" / "runs.csv")
    shutil.copytree(probe / "raw", wf / "results" / "probe" / "raw")
    shutil.copy2(probe / "probe.yaml", wf / "experiments" / "probe.yaml")
    cmd = readme_command("papermill notebooks/design.ipynb").replace("NAME", "probe")
    assert cmd.startswith("papermill notebooks/design.ipynb /tmp/design.ipynb -p runs_csv results/probe/runs.csv")
    # as the README says, plus fewer simulated experiments (a later -p wins) and an output of the test's own
    cmd = (
        cmd.replace("/tmp/design.ipynb", "design-out.ipynb")
        + " -p reps 10 -y '{rounds_options: [2], runs_options: [3]}'"
    )
    proc = shell(venv, cmd, cwd=wf)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    designed = (wf / "experiments" / "probe_designed.yaml").read_text()
    assert "design:" in designed and "ngram_8" in designed


def test_the_readmes_article_command_runs_on_the_installed_fixture(installed, workflow_copy):
    """README, "Open the article as a notebook": notebooks/article.ipynb as it ships opens on the committed
    fixture, which the install carries, and writes the article into report/fixture/."""
    venv, _ = installed
    wf = workflow_copy
    cmd = readme_command("papermill --cwd notebooks notebooks/article.ipynb")
    assert cmd == "papermill --cwd notebooks notebooks/article.ipynb /tmp/article.ipynb"
    proc = shell(venv, cmd.replace("/tmp/article.ipynb", "article-out.ipynb"), cwd=wf)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert (wf / "article-out.ipynb").is_file()
    assert any((wf / "report" / "fixture").rglob("*.csv")), "the article wrote no tables into report/fixture/"


def planned(proc) -> dict:
    """The jobs a dry run plans, from its "Job stats" table: {rule: count}; {} when nothing is to be done."""
    text = proc.stdout + proc.stderr
    if "Job stats:" not in text:
        assert "Nothing to be done" in text, text[-3000:]
        return {}
    out = {}
    for line in text.split("Job stats:", 1)[1].splitlines()[3:]:
        bits = line.split()
        if len(bits) != 2 or not bits[1].isdigit():
            break
        out[bits[0]] = int(bits[1])
    out.pop("total", None)
    return out


@pytest.mark.engine
def test_a_reinstall_measures_nothing_again(installed, engine_venv, trainer_venv):
    """A finished experiment in a written workflow (its model built by the workflow's own rule), then
    `pip install .` again, which rewrites every file of the package with a new timestamp, and `bracket
    workflow --overwrite`: a dry run plans nothing. Then the model builder's content changes: the model and
    the block it served are planned again."""

    venv, tmp = installed
    wf = tmp / "wf-run"
    assert run(venv, "bracket", "workflow", str(wf), cwd=tmp).returncode == 0
    (wf / "resources" / "engines").mkdir(parents=True)
    (wf / "resources" / "engines" / engine_venv.name).symlink_to(engine_venv)
    (wf / "resources" / "engines" / trainer_venv.name).symlink_to(trainer_venv)  # the model is trained here
    port = free_port()
    # the smallest run: an untrained model (train_steps 0, about 20 s to build), one block of two requests
    (wf / "experiments" / "once.yaml").write_text(
        f"engine: {{kind: vllm, embedded: true, port: {port}, embedded_model: {{train_steps: 0}}, "
        "startup_timeout_s: 1200}\n"
        "arms: {baseline: {}}\nreference: baseline\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}\n"
        "request: {max_tokens: 16}\nanalysis: {bootstrap_resamples: 200}\n"
        "hardware: {probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}\n"
    )
    plan = run(venv, "snakemake", "-n", "once", cwd=wf)
    assert plan.returncode == 0 and planned(plan).get("embedded_model") == 1 and planned(plan).get("block") == 1, (
        plan.stdout[-3000:] + plan.stderr[-3000:]
    )
    assert "engine_venv" not in planned(plan) and "trainer_venv" not in planned(plan)
    proc = run(venv, "snakemake", "--cores", "1", "once", cwd=wf)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    block = wf / "results" / "once" / "raw" / "block-0.jsonl"
    measured = block.read_bytes()
    model = next((wf / "resources" / "models").glob("tiny-qwen3-*-t0/build.json"))

    builder = next((venv / "lib").glob("python3*/site-packages/bracket/embedded/build_model.py"))
    proc = run(venv, "pip", "install", "-q", "--force-reinstall", "--no-deps", str(tmp / "src"), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The reinstall renewed the builder's timestamp past the model's: as an input, it would retrain the model.
    assert builder.stat().st_mtime > model.stat().st_mtime
    proc = run(venv, "bracket", "workflow", str(wf), "--overwrite", "--json", cwd=tmp)
    assert proc.returncode == 0 and json.loads(proc.stdout)["written"] == 0, proc.stdout + proc.stderr
    plan = run(venv, "snakemake", "-n", "once", cwd=wf)
    assert plan.returncode == 0 and planned(plan) == {}, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert block.read_bytes() == measured

    # A builder whose content changed makes another model: it and every block it served are planned again.
    builder.write_text(builder.read_text() + "\n# changed\n")
    plan = run(venv, "snakemake", "-n", "once", cwd=wf)
    jobs = planned(plan)
    assert plan.returncode == 0 and jobs.get("embedded_model") == 1 and jobs.get("block") == 1, plan.stdout[-3000:]
