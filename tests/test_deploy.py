"""bracket deployed the Snakemake ecosystem's way (issue 45): a plain `snakemake` prints the targets and measures
nothing; the catalog's `.test` config runs its experiment to an article (`snakemake --directory .test`, as CI
does); a deployment written by `snakedeploy deploy-workflow` from a local clone (a `module` directive naming the
clone's workflow/Snakefile) runs an experiment of its own folder on the reference engine,
writes nothing into the clone, and its article says which bracket measured: the clone's commit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from tests.support import repo_copy
from tests.support import snakemake as run_snakemake

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
# .test/experiments/ci.yaml's reference server listens here: this file owns the port
PORT = 8091


snakemake = partial(run_snakemake, timeout=900)


def workflow_copy(dest: Path) -> Path:
    """The workflow as a clone holds it: faultkit's copy, with config/ and .test/."""
    root = repo_copy(dest)
    for folder in ("config", ".test"):
        shutil.copytree(
            ROOT / folder, root / folder, ignore=shutil.ignore_patterns("results", "report", "logs", ".snakemake")
        )
    return root


def test_ci_experiment_uses_this_files_port():
    assert f"port: {PORT}" in (ROOT / ".test" / "experiments" / "ci.yaml").read_text()


def test_a_plain_snakemake_prints_the_targets_and_measures_nothing(tmp_path):
    root = workflow_copy(tmp_path / "wf")
    proc = snakemake(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "bracket measures nothing without a target. The targets, one per experiment file in experiments/:" in out
    for p in (ROOT / "experiments").glob("*.yaml"):
        if not p.name.endswith(".corrections.yaml"):
            assert f"  {p.stem} " in out, p.stem
    assert "snakemake --cores 1 NAME" in out and "1 of 1 steps (100%) done" in out
    assert not (root / "results").exists() and not (root / "resources").exists()
    # the catalog's entry is the same workflow
    same = snakemake(root, "-s", "workflow/Snakefile", "-n", "smoke")
    assert same.returncode == 0 and "rule block:" in same.stdout, same.stdout[-2000:] + same.stderr[-2000:]
    # a configured name without its file stops the DAG, naming the key and the fix
    bad = snakemake(root, "--config", "experiments=[nope]")
    assert (
        bad.returncode != 0 and "config `experiments` names nope" in bad.stderr and "config/config.yaml" in bad.stderr
    )


def test_the_catalog_test_config_runs_its_experiment_to_an_article(tmp_path):
    root = workflow_copy(tmp_path / "wf")
    proc = snakemake(root, "--directory", ".test")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    test = root / ".test"
    assert (test / "report" / "ci" / "article.html").is_file() and (test / "report" / "ci" / "article.md").is_file()
    stats = json.loads((test / "results" / "ci" / "stats.json").read_text())
    # ngram_4 streams at 800 tok/s against 400 (5 tokens an event): about 1.7 times as fast, less the client's latency
    [c] = stats["comparisons"]
    assert 1.2 < c["ratio"] < 2.0 and c["verdict"] != "slower", c
    assert not (root / "results").exists()  # the working directory is .test's


def deploy(src: Path, dep: Path) -> Path:
    """`snakedeploy deploy-workflow SRC DEP`, as the catalog deploys a workflow (config/ and profiles/ copied, a
    workflow/Snakefile of one module directive), with the one change a local clone needs (config/README.md)."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "snakedeploy"), "deploy-workflow", str(src), str(dep), "--branch", "main"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (dep / "config" / "config.yaml").is_file() and (dep / "profiles" / "default" / "config.yaml").is_file()
    snakefile = dep / "workflow" / "Snakefile"
    text = snakefile.read_text()
    # snakedeploy 0.17.1 names a local source's Snakefile relative to the deployment's workflow/, where it is not
    # (DEP/workflow/workflow/Snakefile): the module names the clone's by its absolute path instead
    written = '        "workflow/Snakefile"\n'
    assert written in text and "use rule * from clone" in text, text
    snakefile.write_text(text.replace(written, f'        "{src / "workflow" / "Snakefile"}"\n'))
    return dep


def test_a_module_deployment_runs_an_experiment_from_a_local_clone(tmp_path):
    src = workflow_copy(tmp_path / "clone")
    (src / ".gitignore").write_text("__pycache__/\n*.egg-info/\n.snakemake/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "clone"]):
        subprocess.run(git + args, cwd=src, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, check=True
    ).stdout.strip()

    dep = deploy(src, tmp_path / "deployment")
    # the deployment's own experiment, its prompts beside it
    shutil.copytree(src / ".test" / "experiments", dep / "experiments")

    listed = snakemake(dep)
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    assert "  ci  CI: the whole loop on the reference engine" in listed.stdout
    proc = snakemake(dep, "ci")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert (dep / "report" / "ci" / "article.html").is_file()
    # the clone is the instrument, untouched: the results are the deployment's
    status = subprocess.run(["git", "status", "--porcelain"], cwd=src, capture_output=True, text=True).stdout
    assert status == "" and not (src / "results").exists()

    # which bracket measured: the clone's commit, clean, in every block's meta, in stats.json and in the article
    record = {"version": "0.1.0", "commit": head, "dirty": False, "source": "git"}
    metas = [json.loads(p.read_text()) for p in sorted((dep / "results" / "ci" / "raw").glob("block-*.meta.json"))]
    assert len(metas) == 6 and all(m["bracket"] == record for m in metas)
    prov = json.loads((dep / "results" / "ci" / "stats.json").read_text())["provenance"]["bracket"]
    assert prov == {
        "measured": [{"record": record, "blocks": [0, 1, 2, 3, 4, 5]}],
        "unrecorded": [],
        "analysed": record,
    }
    md = (dep / "report" / "ci" / "article.md").read_text()
    assert f"Measured and analysed by bracket 0.1.0, commit {head[:12]}." in md
