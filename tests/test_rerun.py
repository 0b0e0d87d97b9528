"""What a snakemake killed outright leaves is cleared only when it is stale (bracket.rerun), on real files, flocks
and processes: a dead run's locks go, a living run's stay, a run another host may hold is named with the command,
and a block that finished before the kill keeps its records (Snakemake's marks on it go)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

from bracket import rerun

from tests.support import python_env


def marker(state: Path, sub: str, key: str) -> Path:
    """Snakemake's record of `key` under .snakemake/`sub` (snakemake/persistence/file.py, _record_path)."""
    path = state / sub / base64.urlsafe_b64encode(key.encode()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    return path


def dead_run(root: Path) -> Path:
    """The .snakemake/ of a run killed outright: its lock files, the marks of the job it ran."""
    state = root / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.input.lock").write_text("results/x/runs.csv\n")
    (state / "locks" / "0.output.lock").write_text("report/x/article.html\n")
    marker(state, "incomplete", "report/x/article.html")
    return state


def holder(root: Path) -> subprocess.Popen:
    """A second process that reads the workflow in `root` and lives on (a running snakemake, as the flock sees it)."""
    code = (
        f"import sys, time; from bracket import rerun; "
        f"rerun.recover({str(root)!r}); print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held", proc.stderr.read()
    return proc


def recover_in_a_new_process(root: Path) -> list[str]:
    code = (
        f"import json, sys; from bracket import rerun; "
        f"print(json.dumps(rerun.recover({str(root)!r}, say=lambda t: None)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(out.stdout)


def test_a_dead_runs_locks_are_removed_and_said(tmp_path):
    state = dead_run(tmp_path)
    [said] = recover_in_a_new_process(tmp_path)
    assert "killed outright" in said and "snakemake --unlock" in said
    assert list((state / "locks").glob("*.lock")) == []
    assert (state / "incomplete").is_dir() and any((state / "incomplete").iterdir())  # the profile reruns that job


def test_a_living_runs_locks_stay(tmp_path):
    state = dead_run(tmp_path)
    (state / "locks").rename(state / "locks-later")
    live = holder(tmp_path)  # a run that lives, then takes its locks
    try:
        (state / "locks-later").rename(state / "locks")
        [said] = recover_in_a_new_process(tmp_path)
        assert said.startswith("another process of this folder still runs")
        assert len(list((state / "locks").glob("*.lock"))) == 2
    finally:
        live.kill()
        live.wait()
    time.sleep(0.1)
    assert "killed outright" in recover_in_a_new_process(tmp_path)[0]  # once it is gone, they are stale
    assert list((state / "locks").glob("*.lock")) == []


def test_locks_a_run_on_another_host_may_hold_are_named_not_removed(tmp_path):
    state = dead_run(tmp_path)
    (state / "bracket.alive.d").mkdir()
    (state / "bracket.alive.d" / "node-17.cluster.4242").touch()
    (state / "bracket.alive.d" / f"{rerun.socket.gethostname()}.999999").touch()  # this host's, dead: dropped
    [said] = recover_in_a_new_process(tmp_path)
    assert "node-17.cluster (pid 4242)" in said and "snakemake --unlock" in said
    assert len(list((state / "locks").glob("*.lock"))) == 2
    assert [p.name for p in (state / "bracket.alive.d").iterdir()] == ["node-17.cluster.4242"]


def block_files(root: Path, k: int, status: str) -> str:
    raw = root / "results" / "x" / "raw" / f"block-{k}.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text('{"block": %d}\n' % k)
    raw.with_name(f"block-{k}.meta.json").write_text(json.dumps({"status": status}))
    return f"results/x/raw/block-{k}.jsonl"


def test_a_block_that_finished_before_the_kill_keeps_its_records(tmp_path):
    state = dead_run(tmp_path)
    done = block_files(tmp_path, 0, "complete")
    half = block_files(tmp_path, 1, "failed")  # a meta that does not say complete: Snakemake's to rerun
    marks = {key: marker(state, "incomplete", key) for key in (done, done.replace(".jsonl", ".meta.json"), half)}
    old = marker(state, "metadata", done)  # the record of an earlier run of the block (its params)
    said = recover_in_a_new_process(tmp_path)
    assert said[-1] == f"{done} finished before Snakemake was killed, and are kept as they are (not run again)."
    assert not marks[done].exists() and not marks[done.replace(".jsonl", ".meta.json")].exists() and not old.exists()
    assert marks[half].exists() and marker(state, "incomplete", "report/x/article.html").exists()
    assert (tmp_path / done).read_text() == '{"block": 0}\n'


def test_long_paths_split_into_at_folders_are_read(tmp_path):
    key = "results/" + "e" * 300 + "/raw/block-3.jsonl"
    b64 = base64.urlsafe_b64encode(key.encode()).decode()
    folder = tmp_path / "incomplete"
    path = folder / ("@" + b64[:254]) / b64[254:]
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    assert rerun._marked(folder) == {key: path}


def test_a_block_whose_snakemake_was_killed_alone_keeps_its_runs_locks(tmp_path):
    """The block's own process holds the flock (rerun.hold, from run_block.py): with its snakemake killed and
    the block still measuring, the next run leaves the locks and says why, instead of starting that block again."""
    state = dead_run(tmp_path)
    code = (
        f"import sys, time; from bracket import rerun; "
        f"import os; os.chdir({str(tmp_path)!r}); rerun.hold(); print('held', flush=True); time.sleep(60)"
    )
    block = subprocess.Popen(
        [sys.executable, "-c", code], env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert block.stdout.readline().strip() == "held", block.stderr.read()
        [said] = recover_in_a_new_process(tmp_path)
        assert "a block whose snakemake was killed alone" in said
        assert len(list((state / "locks").glob("*.lock"))) == 2
    finally:
        block.kill()
        block.wait()
    time.sleep(0.1)
    assert "killed outright" in recover_in_a_new_process(tmp_path)[0]  # the block ended: the locks are stale
    assert list((state / "locks").glob("*.lock")) == []
