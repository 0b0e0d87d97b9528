"""`bracket workflow DIR` (bracket.share.write_workflow) never replaces what the user changed: an edited
experiment is kept with the shipped version beside it, a corrections ledger is never touched, and bracket's own
earlier copy of a file that a new release changed is replaced (the manifest says nobody changed it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bracket import share

ROOT = Path(__file__).resolve().parents[1]
LEDGER = "experiments/llamacpp_sweep.corrections.yaml"


def bracket(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bracket.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.integration
def test_an_edited_experiment_and_a_ledger_survive_overwrite(tmp_path):
    """The issue's steps through the command: write, edit smoke.yaml, append to a ledger, then --overwrite."""
    wf = tmp_path / "wf"
    first = bracket("workflow", str(wf), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["written"] > 30 and (wf / share.MANIFEST).is_file()
    smoke, ledger = wf / "experiments" / "smoke.yaml", wf / LEDGER
    edited = smoke.read_text().replace("rounds: 2", "rounds: 3")
    assert edited != smoke.read_text()
    smoke.write_text(edited)
    appended = ledger.read_text() + "# a correction of mine, appended as the README says\n"
    ledger.write_text(appended)

    proc = bracket("workflow", str(wf), "--overwrite", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert smoke.read_text() == edited and ledger.read_text() == appended
    # the shipped experiment is beside the user's, named in the output; nothing is written beside the ledger
    assert (wf / "experiments" / "smoke.yaml.shipped").read_bytes() == (
        ROOT / "experiments" / "smoke.yaml"
    ).read_bytes()
    assert not (wf / (LEDGER + ".shipped")).exists()
    assert "wrote 0 files" in proc.stdout
    assert "  experiments/smoke.yaml  (shipped: experiments/smoke.yaml.shipped)" in proc.stdout
    assert (
        f"left 1 corrections ledger(s) as they are (append-only: bracket workflow never writes over one): {LEDGER}"
        in (proc.stdout)
    )

    again = bracket("workflow", str(wf), "--overwrite", "--json", cwd=tmp_path)
    out = json.loads(again.stdout)
    assert out["written"] == 0 and out["kept"] == ["experiments/smoke.yaml"] and out["ledgers_kept"] == [LEDGER]
    assert smoke.read_text() == edited and ledger.read_text() == appended
    # without --overwrite the changed file is named too, and nothing is written beside it
    (wf / "experiments" / "smoke.yaml.shipped").unlink()
    plain = bracket("workflow", str(wf), cwd=tmp_path)
    assert (
        "kept 1 file(s) that differ from the shipped ones" in plain.stdout
        and "  experiments/smoke.yaml" in plain.stdout
    )
    assert not (wf / "experiments" / "smoke.yaml.shipped").exists()


@pytest.fixture
def release(tmp_path, monkeypatch) -> Path:
    """A copy of the shipped files that the test can change, as the next release would: share.root() points at it."""
    src = tmp_path / "release"
    for rel in share.WORKFLOW_FILES:
        s = share.root() / rel
        if s.is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, src / rel)
        elif s.is_dir():
            shutil.copytree(s, src / rel, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(share, "root", lambda: src)
    return src


def test_a_new_release_replaces_bracket_own_copies_and_keeps_the_user_changes(release, tmp_path):
    wf = tmp_path / "wf"
    first = share.write_workflow(wf)
    assert not first.kept and not first.ledgers and len(first.written) > 30
    rules, script = Path("workflow/rules/run.smk"), Path("workflow/scripts/run_block.py")
    user = (wf / script).read_text() + "# my change\n"
    (wf / script).write_text(user)
    # the next release changes both files and a ledger
    for rel in (rules, script, Path(LEDGER)):
        (release / rel).write_text((release / rel).read_text() + "# next release\n")
    ledger_before = (wf / LEDGER).read_bytes()

    plain = share.write_workflow(wf)  # without --overwrite: both kept, named
    assert sorted(plain.kept) == [rules, script] and plain.ledgers == [Path(LEDGER)] and not plain.written

    done = share.write_workflow(wf, overwrite=True)
    assert done.written == [rules] and (wf / rules).read_bytes() == (release / rules).read_bytes()
    assert done.kept == [script] and (wf / script).read_text() == user
    assert done.beside == {script: Path("workflow/scripts/run_block.py.shipped")}
    assert (wf / done.beside[script]).read_bytes() == (release / script).read_bytes()
    assert done.ledgers == [Path(LEDGER)] and (wf / LEDGER).read_bytes() == ledger_before
    # the replaced file is bracket's again: the release after replaces it too, without a word
    (release / rules).write_text((release / rules).read_text() + "# and the next\n")
    later = share.write_workflow(wf, overwrite=True)
    assert later.written == [rules] and later.kept == [script]


def test_a_copy_written_before_the_manifest_keeps_every_file_that_differs(release, tmp_path):
    """No record of what bracket wrote: a differing file cannot be told from the user's, so it is kept."""
    wf = tmp_path / "wf"
    share.write_workflow(wf)
    (wf / share.MANIFEST).unlink()
    rules = Path("workflow/rules/run.smk")
    (release / rules).write_text((release / rules).read_text() + "# next release\n")
    done = share.write_workflow(wf, overwrite=True)
    assert done.kept == [rules] and not done.written and (wf / (str(rules) + ".shipped")).is_file()


def test_what_counts_as_a_ledger():
    assert share.is_ledger("experiments/smoke.corrections.yaml")
    assert not share.is_ledger("experiments/smoke.yaml")
    assert not share.is_ledger("experiments/examples/x.corrections.yaml")


def test_a_job_imports_the_bracket_the_snakefile_runs_and_nothing_beside_it(tmp_path):
    """share.job_pythonpath: a clone's workflow/; for an installed package, a folder holding one link to it, so a
    conda job (--sdm conda) imports this bracket without the installing environment's other packages."""
    assert share.job_pythonpath(tmp_path) == ROOT / "workflow" and not (tmp_path / ".snakemake").exists()
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "workflow" / "bracket", site / "bracket", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "not_bracket.py").write_text("")
    work = tmp_path / "work"
    code = "import sys; from bracket import share; print(share.job_pythonpath(sys.argv[1]))"
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    for _ in range(2):  # the second time the link is there already
        proc = subprocess.run([sys.executable, "-c", code, str(work)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        folder = Path(proc.stdout.strip())
        assert folder == work / ".snakemake" / "bracket-package"
        assert [p.name for p in folder.iterdir()] == ["bracket"]
    check = "import bracket, importlib.util as u; print(bracket.__file__); print(u.find_spec('not_bracket'))"
    proc = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, env={**env, "PYTHONPATH": str(folder)}
    )
    file, other = proc.stdout.splitlines()
    assert Path(file).resolve() == (site / "bracket" / "__init__.py").resolve() and other == "None"
