"""A host's blocks in one SLURM allocation (`cluster.allocation: per_host`) where a later block passes the
time limit: the finished block's records survive, the user reads the state, its meaning and the rerun
command, and the rerun measures only the block that did not finish.

The one-node cluster of tests/test_slurm.py (tools/slurm_cluster.py), the shipped profile with the site's
account and partition, the reference engine at 10 tokens/s. Each block lasts about 90 s and asks for
runtime_min 1, so the group job asks for 2 minutes: block 0 ends near 95 s, and SLURM ends the job
(TIMEOUT) between 120 and 150 s (slurmctld checks time limits every 30 s), while block 1 measures.
Snakemake 9.27 then post-processes both blocks as failed; bracket.cluster.group_failure keeps block 0.
"""

import json
import os
import re
import time

import pytest
from test_executor import engine_processes, snakemake, workflow_copy
from test_slurm import NODE, PORT, cluster, site_profile  # noqa: F401  (cluster: the fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.integration]

EXP = "slurmgroup"
GROUP_PORT = PORT + 2
TIMED_OUT = """\
title: "A host's blocks in one allocation, the second past the time limit"
engine: {kind: reference, port: %d, args: ["--rate", "10"]}
arms: {baseline: {}, other: {}}
hosts: [%s]
workloads: {code: {prompts: experiments/prompts/code.jsonl}}
design: {kind: abab, rounds: 1, runs_per_block: 48, warmup_runs: 1, cooldown_s: 0, seed: 1}
request: {max_tokens: 16}
cluster: {gpus: 1, mem_mb: 3000, runtime_min: 1, allocation: per_host}
analysis: {bootstrap_resamples: 200}
hardware: {probe_bandwidth: false, bandwidth_gbps: 20}
""" % (GROUP_PORT, NODE)


def _run(root):
    saved = os.environ.pop("SLURM_CONF", None)
    try:
        return snakemake(
            root,
            "--profile",
            "workflow/profiles/slurm",
            "--slurm-init-seconds-before-status-checks",
            "3",
            f"results/{EXP}/stats.json",
            timeout=1500,
        )
    finally:
        if saved is not None:
            os.environ["SLURM_CONF"] = saved


def test_a_finished_block_survives_a_later_blocks_time_limit_in_its_allocation(cluster, tmp_path):  # noqa: F811
    if engine_processes(GROUP_PORT):
        pytest.fail(f"an engine already listens on port {GROUP_PORT}; stop it first")
    root = workflow_copy(tmp_path, {EXP: TIMED_OUT})
    site_profile(root)
    raw = root / "results" / EXP / "raw"
    t0 = time.monotonic()
    first = _run(root)
    took = time.monotonic() - t0
    out = first.stdout + first.stderr
    print(f"group job past its time limit: snakemake ended after {took:.0f} s, rc {first.returncode}")
    assert first.returncode != 0, out[-6000:]
    # what the user reads: the job, the state, what it means, the experiment and the command to run
    said = re.search(
        r"SLURM job (\d+) \(group blocks-\S+ \(block slurmgroup_0, block slurmgroup_1\)\) ended (\w+)", out
    )
    assert said and said.group(2) == "TIMEOUT", out[-6000:]
    assert "it ran past its time limit: raise cluster.runtime_min" in out
    assert f"results/{EXP}/raw/failed/" in out and "resume with `snakemake " in out
    assert f"Keeping the outputs of block {EXP}_0" in out, out[-6000:]
    meta0 = json.loads((raw / "block-0.meta.json").read_text())
    assert meta0["status"] == "complete" and (raw / "block-0.jsonl").stat().st_size > 0
    assert not (raw / "block-1.meta.json").exists()
    kept = (raw / "block-0.jsonl").stat().st_mtime_ns
    # the rerun, with the time limit raised as the message says: block 1 alone is measured
    path = root / "experiments" / f"{EXP}.yaml"
    path.write_text(path.read_text().replace("runtime_min: 1,", "runtime_min: 5,"))
    again = _run(root)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-6000:]
    assert (raw / "block-0.jsonl").stat().st_mtime_ns == kept
    assert json.loads((raw / "block-0.meta.json").read_text())["started_at"] == meta0["started_at"]
    assert json.loads((raw / "block-1.meta.json").read_text())["status"] == "complete"
    assert not list((raw / "failed").glob("block-0.attempt-*"))  # the finished block was never set aside
    assert engine_processes(GROUP_PORT) == []


CANCEL_EXP = "slurmcancelshipped"
CANCEL = (
    TIMED_OUT.replace(
        "cluster: {gpus: 1, mem_mb: 3000, runtime_min: 1, allocation: per_host}",
        "cluster: {gpus: 1, mem_mb: 3000, runtime_min: 15}",
    )
    .replace("the second past the time limit", "cancelled under the shipped profile")
    .replace(str(GROUP_PORT), str(GROUP_PORT + 1))
)


def test_a_cancel_ends_the_run_within_40_s_with_the_profile_as_shipped(cluster, tmp_path):  # noqa: F811
    """No --slurm-init-seconds-before-status-checks: the profile's 15 s, then at most 30 s between checks
    (bracket.cluster.slurm_status); a block cancelled a minute into its run is reported within 40 s (snakemake
    then exits when its other running jobs end: 61-72 s later here, the ceiling job's)."""
    import subprocess
    import sys
    from pathlib import Path

    from test_executor import SNAKEMAKE

    root = workflow_copy(tmp_path, {CANCEL_EXP: CANCEL})
    site_profile(root)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SNAKEMAKE_PROFILE")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    argv = [SNAKEMAKE, "--profile", "workflow/profiles/slurm", f"results/{CANCEL_EXP}/stats.json"]
    log = root / "cancel.out"
    with open(log, "w") as out:
        run = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            begun = root / "results" / CANCEL_EXP / "raw" / "block-0.meta.json.partial"
            until = time.monotonic() + 600
            while not begun.exists() and time.monotonic() < until and run.poll() is None:
                time.sleep(1)
            assert begun.exists(), log.read_text()[-4000:]
            time.sleep(60)  # the plugin's interval has grown past its first value by now
            q = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i|%k", check=False).stdout
            (jobid,) = [i for i, c in (line.split("|", 1) for line in q.splitlines()) if f"{CANCEL_EXP}_0" in c]
            cancelled = time.monotonic()
            cluster.run("scancel", jobid)
            seen = None  # when snakemake reported the cancelled block
            while seen is None and run.poll() is None and time.monotonic() - cancelled < 300:
                if "ended CANCELLED" in log.read_text():
                    seen = time.monotonic() - cancelled
                time.sleep(0.5)
            rc = run.wait(timeout=300)
            took = time.monotonic() - cancelled
            seen = took if seen is None else seen
        finally:
            if run.poll() is None:
                run.kill()
    text = log.read_text()
    # Snakemake exits once its other running jobs (here the ceiling's sbatch job) end too: that wait is theirs
    print(
        f"shipped profile: the cancel reported {seen:.0f} s after the scancel, snakemake ended at {took:.0f} s, rc {rc}"
    )
    assert rc != 0 and f"(rule block {CANCEL_EXP}_0) ended CANCELLED" in text, text[-4000:]
    assert f"results/{CANCEL_EXP}/raw/failed/" in text
    assert seen < 40, text[-3000:]
