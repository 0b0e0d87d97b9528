"""kill -9 of the whole snakemake (its process group: what a lost terminal or an OOM killer does), then the
README's plain command, again and again: each rerun runs, and no measured record is lost (issue 40).

Real Snakemake in a copy of the workflow, on the reference engine. Snakemake is killed three times, each
where it leaves its locks and the marks of a job behind: in the half second after a block's records reached
their final name (the block finished, Snakemake had not yet cleared its marks: rerun-incomplete alone would
delete the records and measure the block again), in the middle of a block (its records so far are set aside
into raw/failed/), and while the report rule writes the article (which stopped the next run at
IncompleteFilesException; the locks left would stop it at LockException). The fourth plain run completes.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration

NAME = "killed_runs"


def experiment(port: int) -> str:
    return f"""\
title: "Killed and rerun"
question: "Does the plain command resume after kill -9?"
engine: {{kind: reference, port: {port}, args: ["--ttft", "0.02"]}}
arms:
  baseline: {{args: ["--rate", "400"]}}
  fast: {{args: ["--rate", "800"]}}
reference: baseline
workloads:
  code: {{prompts: experiments/prompts/code.jsonl}}
design: {{kind: abab, rounds: 1, runs_per_block: 6, warmup_runs: 0, cooldown_s: 0, seed: 1}}
request: {{max_tokens: 32}}
analysis: {{bootstrap_resamples: 200}}
hardware: {{probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}}
"""


def marked(repo: Path, path: str) -> bool:
    """Snakemake holds `path` incomplete (snakemake/persistence/file.py: a file named by its urlsafe base64)."""
    return (repo / ".snakemake" / "incomplete" / base64.urlsafe_b64encode(path.encode()).decode()).exists()


def start(repo: Path, log: Path) -> subprocess.Popen:
    """The README's command, in a session of its own so that the kill reaches its whole group."""
    with open(log, "w") as out:
        return subprocess.Popen(
            fk.snakemake_argv(NAME),
            cwd=repo,
            env=fk.snakemake_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def kill_when(repo: Path, port: int, log: Path, predicate, what: str):
    """Start the plain command, kill -9 its process group once `predicate()` holds, and wait until the block's
    server is gone too (its watchdog stops it); returns what the predicate returned."""
    proc = start(repo, log)
    try:
        found = fk.wait_for(predicate, 300, f"{what} ({log.read_text()[-2000:]})", poll_s=0.001)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            fk.kill_group(proc.pid)
            proc.wait()
    fk.wait_for(lambda: fk.listener(port) is None, 30, "the orphaned server to stop")
    assert list((repo / ".snakemake" / "locks").glob("*.lock")), "the premise: a killed snakemake leaves its locks"
    return found


def test_the_plain_command_resumes_after_every_kill_and_loses_no_record(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    port = fk.free_port()
    (repo / "experiments" / f"{NAME}.yaml").write_text(experiment(port))
    raw = repo / "results" / NAME / "raw"

    def finished_but_marked():
        for k in (0, 1):
            key = f"results/{NAME}/raw/block-{k}.jsonl"
            if (repo / key).exists() and marked(repo, key):
                return k, (repo / key).read_bytes()
        return None

    # 1. In the half second after a block finished: its records are whole, Snakemake had not cleared its marks.
    k, records = kill_when(repo, port, tmp_path / "run1.log", finished_but_marked, "a finished block still marked")
    assert marked(repo, f"results/{NAME}/raw/block-{k}.jsonl") and len(records.splitlines()) >= 6
    server_id = json.loads((raw / f"block-{k}.meta.json").read_text())["server_id"]

    # 2. In the middle of the other block: its records so far are in its .partial file.
    other = 1 - k
    partial = raw / f"block-{other}.jsonl.partial"
    measured = kill_when(
        repo, port, tmp_path / "run2.log", lambda: fk.count_lines(partial) >= 2 and fk.lines(partial), "two records"
    )
    said = (tmp_path / "run2.log").read_text()
    assert "killed outright" in said and f"block-{k}.jsonl finished before Snakemake was killed" in said

    # 3. While the report rule writes the article: a file of its output exists, and is marked incomplete.
    article = f"report/{NAME}/article.ipynb"
    kill_when(
        repo, port, tmp_path / "run3.log", lambda: (repo / article).exists() and marked(repo, article), "the report"
    )

    # 4. The plain command, once more, completes.
    t0 = time.monotonic()
    proc = subprocess.run(
        fk.snakemake_argv(NAME), cwd=repo, env=fk.snakemake_env(), capture_output=True, text=True, timeout=900
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "IncompleteFilesException" not in out and "LockException" not in out and "killed outright" in out
    assert (repo / "report" / NAME / "article.html").is_file()

    # Nothing measured is lost: the block that had finished is the one that was measured (not run again) ...
    assert (raw / f"block-{k}.jsonl").read_bytes() == records
    assert json.loads((raw / f"block-{k}.meta.json").read_text())["server_id"] == server_id
    # ... the records of the block killed midway are kept in failed/, and the block ran whole again ...
    kept = fk.lines(fk.attempt(raw, 1, other))
    assert kept[: len(measured)] == measured and all(r["block"] == other for r in kept)
    assert not list(raw.glob(f"block-{k}.attempt-*")) and not (raw / "failed" / f"block-{k}.attempt-1.jsonl").exists()
    runs = [r for r in fk.lines(raw / f"block-{other}.jsonl") if r.get("control") is None]
    assert len(runs) == 6 and all(r["error"] is None for r in runs)
    assert not list(raw.glob("*.partial"))
    print(f"fourth plain run: {time.monotonic() - t0:.1f} s")
