"""bracket.cluster.group_failure: a finished block keeps its records when a later block of its group job fails.

The live check runs real Snakemake through the cluster-generic executor (the shipped stand-in
scheduler, workflow/profiles/cluster-generic), which submits a group as one job as SLURM's plugin does:
block 0 finishes, block 1 of the same group fails, and Snakemake post-processes both as failed. Without
the wrapper it deletes block 0's records ("Removing output files of failed job block"); with it they stay,
and the rerun runs block 1 alone. The SLURM test (tests/test_slurm.py) does the same with a time limit.
"""

import json
import os
import shutil
import subprocess

import pytest
from bracket.cluster import group_failure

from tests.support.paths import ROOT, WORKFLOW
from tests.support.workflow import SNAKEMAKE, snakemake_env


def _block(folder, k, status="complete", records=True):
    raw, meta = folder / f"block-{k}.jsonl", folder / f"block-{k}.meta.json"
    if records:
        raw.write_text('{"request": 1}\n')
    if status is not None:
        meta.write_text(json.dumps({"status": status}))
    return [str(raw), str(meta)]


def test_only_a_block_whose_meta_says_complete_is_finished(tmp_path):
    assert group_failure.finished_block(_block(tmp_path, 0))
    assert not group_failure.finished_block(_block(tmp_path, 1, status="failed"))
    assert not group_failure.finished_block(_block(tmp_path, 2, status=None))  # no meta: never finished
    assert not group_failure.finished_block(_block(tmp_path, 3, records=False))  # meta without its records
    bad = _block(tmp_path, 4)
    (tmp_path / "block-4.meta.json").write_text("{not json")
    assert not group_failure.finished_block(bad)
    (tmp_path / "block-5.meta.json").write_text('["complete"]')
    assert not group_failure.finished_block([str(tmp_path / "block-5.meta.json")])
    assert not group_failure.finished_block([])


SNAKEFILE = """\
import json, sys
sys.path.insert(0, {workflow!r})
{install}

rule all:
    input: "raw/block-0.meta.json", "raw/block-1.meta.json"

def after(wildcards):  # block k after block k-1, as the schedule's priorities order a host's blocks
    k = int(wildcards.k)
    return [f"raw/block-{{k - 1}}.meta.json"] if k else []

rule block:
    input: after
    output: raw="raw/block-{{k}}.jsonl", meta="raw/block-{{k}}.meta.json"
    group: "blocks"
    run:
        if int(wildcards.k) == 1 and not __import__("os").path.exists("pass"):
            open(output.raw, "w").write("half\\n")
            raise ValueError("block 1 failed")
        open(output.raw, "w").write('{{"request": 1}}\\n')
        open(output.meta, "w").write(json.dumps({{"status": "complete", "block": int(wildcards.k)}}))
"""
INSTALL = "from bracket.cluster import group_failure; group_failure.install()"


def _run(root):
    argv = [
        SNAKEMAKE,
        "--executor",
        "cluster-generic",
        "--cluster-generic-submit-cmd",
        "bash submit.sh {rule} '' 0",
        "--cluster-generic-status-cmd",
        "bash status.sh",
        "--jobs",
        "1",
        "--group-components",
        "blocks=2",
        "--latency-wait",
        "5",
    ]
    return subprocess.run(argv, cwd=root, env=snakemake_env(), capture_output=True, text=True, timeout=150)


def _workflow(root, install):
    root.mkdir()
    (root / "Snakefile").write_text(SNAKEFILE.format(workflow=str(WORKFLOW), install=install))
    for name in ("submit.sh", "status.sh"):
        shutil.copy(ROOT / "workflow" / "profiles" / "cluster-generic" / name, root / name)
    return root


@pytest.mark.integration
def test_a_finished_block_survives_its_group_jobs_failure_and_is_not_run_again(tmp_path):
    # the bug, as Snakemake does it without the wrapper: block 0 finished and is deleted with the group
    bare = _workflow(tmp_path / "bare", "")
    first = _run(bare)
    out = first.stdout + first.stderr
    assert first.returncode != 0, out[-3000:]
    assert "Removing output files of failed job block" in out and "raw/block-0.meta.json" in out, out[-3000:]
    assert not (bare / "raw" / "block-0.meta.json").exists()

    root = _workflow(tmp_path / "kept", INSTALL)
    first = _run(root)
    out = first.stdout + first.stderr
    assert first.returncode != 0, out[-3000:]
    assert "Keeping the outputs of block 0" in out, out[-4000:]
    meta = json.loads((root / "raw" / "block-0.meta.json").read_text())
    assert meta == {"status": "complete", "block": 0}
    assert not (root / "raw" / "block-1.meta.json").exists()  # the failed block's outputs still go
    made = os.stat(root / "raw" / "block-0.jsonl").st_mtime_ns
    (root / "pass").write_text("")
    again = _run(root)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "block-0" not in " ".join(line for line in out.splitlines() if "output:" in line), out[-3000:]
    assert os.stat(root / "raw" / "block-0.jsonl").st_mtime_ns == made  # block 0 was not run again
    assert json.loads((root / "raw" / "block-1.meta.json").read_text())["status"] == "complete"
