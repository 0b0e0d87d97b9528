"""The embedded sweep through a real SLURM cluster: `snakemake --profile workflow/profiles/slurm`.

The fixture brings up a one-node cluster on this machine with tools/slurm_cluster.py: a private
munged, MariaDB and slurmdbd (so `sacct` has records), slurmctld and slurmd, a `debug` partition,
an account `bracket`, and one GPU that exists only on paper (GRES, so `--gpus` is scheduled and
accounted). A short two-arm, one-round experiment then runs through the shipped profile, with
the site settings a user would add (account, partition) written into the copy's profile, and
every job is a real sbatch submission. The checks read the controller's own records: one job per
block with the requested memory, GPU, time limit, node and whole node, blocks one at a time and
in schedule order, the logs where the profile's README says they are, results of the same shape
as a local run, and the article. Stopping the cluster must leave no daemon or job behind.

Needs root and Debian's slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server
(.ci/run installs them); without them every test here is skipped with the command to install.
Run alone: `pytest -m slurm`: 3.5 to 6.5 minutes on a shared 2-core machine before the cancel test (two runs: 213 s and
393 s, of which the sweep's 12 jobs took 204 s and 372 s; the cluster starts in about 15 s); with it, 1356 s
on a machine loaded by a parallel CI run (sweep 885 s; snakemake ended 35 s after the scancel). With the cancel and the
one-allocation runs on the reference engine: 588 s at a 1-minute load near 2 (sweep 278 s, cancel and rerun 191 s,
one allocation 110 s).
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from bracket.embedded import ENGINE_VENV
from bracket.experiment import design
from conftest import ROOT, SMOKE_MODEL
from test_executor import SNAKEMAKE, engine_processes, snakemake, workflow_copy

from tests.support.processes import alive as _alive
from tools import slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.engine]  # the sweep runs the embedded vLLM engine in each job

EXP = "slurmsweep"
PORT = 8063
NODE = "node1"
SWEEP = """\
title: "Two arms through SLURM"
engine: {kind: vllm, embedded: true, port: %d}
arms: {baseline: {}, ngram_4: {speculative: {method: ngram, draft_tokens: 4}}}
hosts: [%s]
workloads: {code: {prompts: experiments/prompts/code.jsonl}}
design: {kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}
request: {max_tokens: 16}
cluster: {gpus: 1, mem_mb: 3000, runtime_min: 15}
analysis: {bootstrap_resamples: 200}
hardware: {probe_bandwidth: false, bandwidth_gbps: 20}
""" % (PORT, NODE)
BLOCKS = 2
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "slurmstepd")
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "Comment",
    "State",
    "ExitCode",
    "Account",
    "Partition",
    "NodeList",
    "AllocCPUS",
    "ReqMem",
    "AllocTRES",
    "Timelimit",
    "Start",
    "End",
)


def _missing_tools() -> str:
    if os.geteuid() != 0:
        return "the SLURM daemons must run as root"
    try:
        for name in ("slurmctld", "slurmd", "sbatch", "munged"):
            slurm_cluster._which(name, slurm_cluster.PACKAGES)
        for name in ("slurmdbd", "mariadbd"):
            slurm_cluster._which(name, slurm_cluster.ACCOUNTING_PACKAGES)
    except slurm_cluster.ClusterError as e:
        return str(e)
    return ""


def _slurm_processes(root: Path) -> list[str]:
    """SLURM daemons and job steps that work in this cluster's folder, and any engine of the sweep."""
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "cwd"]):
        text = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
        if p.info["name"] in DAEMONS and str(root) in text and p.info["pid"] in _alive([p.info["pid"]]):
            found.append(f"{p.info['pid']} {p.info['name']}")
    return found + [f"{pid} engine" for pid in engine_processes(PORT)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = _missing_tools()
    if why and os.environ.get("BRACKET_REQUIRE_SLURM"):  # CI (.ci/run) installed SLURM: a skip would hide it
        pytest.fail(f"BRACKET_REQUIRE_SLURM is set but SLURM cannot run here: {why}")
    if why:
        pytest.skip(
            f"no SLURM here ({why}); install it as root: apt-get install "
            f"{slurm_cluster.PACKAGES} {slurm_cluster.ACCOUNTING_PACKAGES}"
        )
    # not under pytest's folders: munged wants every folder above its socket open to all
    root = Path(tempfile.mkdtemp(prefix="bracket-slurm-"))
    # Steps confined to their CPUs as on real sites, so a block that gets too few shows it: a cpuset
    # cgroup where slurmd can write one (cgroup v1 here), else CPU affinity.
    task = "cgroup" if os.access("/sys/fs/cgroup/cpuset", os.W_OK) else "affinity"
    c = slurm_cluster.Cluster(root, node=NODE, gpus=1, accounting=True, task=task)
    try:
        c.start()
        pids = dict(c.pids)
        assert set(pids) == {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"}
        yield c
        c.stop()
        assert _alive(pids.values()) == [] and _slurm_processes(c.dir) == []
        assert not slurm_cluster.DEFAULT_CONF.is_symlink()
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def prebuilt_resources(root: Path, engine: Path, model: Path):
    """resources/ of the copy: the engine and model the embedded_engine fixture found, linked (the sweep
    must never build them, least of all as SLURM jobs writing into a shared folder)."""
    (root / "resources").unlink()
    for target, link in ((engine, ENGINE_VENV), (model, SMOKE_MODEL)):
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(Path(target).resolve())


DEFAULTS = "?site(runtime=30, mem_mb=4000)"  # the profile's default-resources (a YTE expression)


def site_profile(root: Path):
    """What a user adds to workflow/profiles/slurm for their site: account and partition."""
    path = root / "workflow" / "profiles" / "slurm" / "config.yaml"
    text = path.read_text()
    assert text.count(DEFAULTS) == 1 and yaml.safe_load(text)["default-resources"] == DEFAULTS
    path.write_text(
        text.replace(
            DEFAULTS,
            f"{DEFAULTS[:-1]}, slurm_account={slurm_cluster.ACCOUNT!r}, slurm_partition={slurm_cluster.PARTITION!r})",
        )
    )


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory, embedded_engine):
    if engine_processes(PORT):
        pytest.fail(f"an engine already listens on port {PORT}; stop it first")
    root = workflow_copy(tmp_path_factory.mktemp("slurmrun"), {EXP: SWEEP})
    prebuilt_resources(root, *embedded_engine)
    site_profile(root)
    # No SLURM_CONF: like most sites, the cluster is found at /etc/slurm/slurm.conf.
    saved = os.environ.pop("SLURM_CONF", None)
    try:
        t0 = time.monotonic()
        # Status every few seconds instead of the profile's 40 s (a test waits for every step).
        proc = snakemake(
            root,
            "--profile",
            "workflow/profiles/slurm",
            "--slurm-init-seconds-before-status-checks",
            "3",
            f"report/{EXP}/article.html",
            timeout=2400,
        )
        took = time.monotonic() - t0
    finally:
        if saved is not None:
            os.environ["SLURM_CONF"] = saved
    out = cluster.run(
        "sacct",
        "-a",
        "-X",
        "-P",
        "--noheader",
        "-S",
        "now-1days",
        "-o",
        ",".join(f"{f}%200" if f in ("Comment", "JobName") else f for f in SACCT_FIELDS),
    ).stdout
    jobs = list(csv.DictReader(io.StringIO(out), fieldnames=SACCT_FIELDS, delimiter="|"))
    print(f"sweep through SLURM: {took:.0f} s, {len(jobs)} jobs")
    return root, proc, jobs


def _blocks(jobs: list[dict]) -> dict[int, list[dict]]:
    by_k: dict[int, list[dict]] = {}
    for j in jobs:
        m = re.fullmatch(rf"rule_block_wildcards_{EXP}_(\d+)", j["Comment"])
        if m:
            by_k.setdefault(int(m.group(1)), []).append(j)
    return by_k


def _t(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_sweep_reaches_its_article_through_sbatch(slurm_run):
    root, proc, jobs = slurm_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert (root / "report" / EXP / "article.html").stat().st_size > 0
    submitted = re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+)", out)
    assert submitted and sorted(submitted, key=int) == sorted((j["JobID"] for j in jobs), key=int)
    assert all(j["State"] == "COMPLETED" and j["ExitCode"] == "0:0" for j in jobs), jobs
    # every rule of the run, not only the blocks, went through sbatch: nothing ran in snakemake
    rules = {re.match(r"rule_(\w+?)(_wildcards_|$)", j["Comment"]).group(1) for j in jobs}
    assert {"plan", "block", "collect", "analyze", "report"} <= rules, rules
    assert all(j["Account"] == slurm_cluster.ACCOUNT and j["Partition"] == slurm_cluster.PARTITION for j in jobs)
    assert engine_processes(PORT) == []  # every block stopped its server


def test_every_block_is_its_own_job_with_the_resources_it_asked_for(slurm_run, cluster):
    root, proc, jobs = slurm_run
    assert proc.returncode == 0
    blocks = _blocks(jobs)
    assert sorted(blocks) == list(range(BLOCKS)) and all(len(v) == 1 for v in blocks.values()), blocks
    cpus = slurm_cluster.machine()["CPUs"]
    for (job,) in blocks.values():
        # cluster: {gpus: 1, mem_mb: 3000, runtime_min: 15}; hosts: [node1]; exclusive by default
        assert job["NodeList"] == NODE
        assert job["ReqMem"] == "3000M"
        assert "gres/gpu=1" in job["AllocTRES"].split(","), job["AllocTRES"]
        assert job["Timelimit"] == "00:15:00"
        assert int(job["AllocCPUS"]) == cpus  # --exclusive: the whole node, not the one CPU asked for
    # ... and the block's job step runs on every CPU of it, read from inside the block (os.sched_getaffinity,
    # which is /proc/self/status's Cpus_allowed_list); with `srun -c 1` it ran on core 0 alone
    for k in blocks:
        meta = json.loads((root / "results" / EXP / "raw" / f"block-{k}.meta.json").read_text())
        assert meta["cpus_allowed"] == list(range(cpus)), (k, meta["cpus_allowed"])
    assert cluster.task in ("cgroup", "affinity")
    assert f"TaskPlugin={slurm_cluster.TASK_PLUGINS[cluster.task][1]}" in cluster.conf.read_text()
    # the controller's view of one block, while it still remembers it (MinJobAge)
    show = cluster.run("scontrol", "show", "job", blocks[0][0]["JobID"]).stdout
    assert "OverSubscribe=NO" in show and f"ReqNodeList={NODE}" in show and "TresPerJob=gres:gpu:1" in show
    others = [j for j in jobs if not j["Comment"].startswith("rule_block_")]
    assert others and all(j["ReqMem"] == "4000M" and j["Timelimit"] == "00:30:00" for j in others)
    # job names say the experiment and the block (bracket.cluster.slurm_names), one run id for the whole run
    runid = {j["JobName"].rsplit(".", 1)[-1] for j in jobs}
    assert len(runid) == 1, runid
    assert all(job["JobName"] == f"{EXP}.block{k}.{next(iter(runid))}" for k, (job,) in blocks.items())
    assert {j["JobName"].split(".")[1] for j in others} >= {"plan", "collect", "analyze", "report"}


def test_blocks_ran_one_at_a_time_in_schedule_order(slurm_run):
    root, proc, jobs = slurm_run
    assert proc.returncode == 0
    blocks = _blocks(jobs)
    spans = [(_t(blocks[k][0]["Start"]), _t(blocks[k][0]["End"])) for k in range(BLOCKS)]
    for (_s0, e0), (s1, _e1) in zip(spans, spans[1:]):
        assert e0 <= s1, spans  # no overlap, and block k before block k+1
    metas = [json.loads((root / "results" / EXP / "raw" / f"block-{k}.meta.json").read_text()) for k in range(BLOCKS)]
    assert all(m["status"] == "complete" for m in metas)
    assert all(b["started_at"] > a["ended_at"] for a, b in zip(metas, metas[1:]))
    assert len({m["pid"] for m in metas}) == BLOCKS  # a fresh server per block
    # stats.json records the gaps, one per pair of consecutive blocks, as the metas give them
    gaps = json.loads((root / "results" / EXP / "stats.json").read_text())["gaps"]
    assert gaps["n"] == BLOCKS - 1 and gaps["cooldown_s"] == 0
    assert [g["gap_s"] for g in gaps["gaps"]] == [
        round(b["started_at"] - a["ended_at"], 3) for a, b in zip(metas, metas[1:])
    ]
    print(f"gaps between blocks, one job per block: {[g['gap_s'] for g in gaps['gaps']]} s")


def test_logs_are_where_the_profile_readme_says(slurm_run):
    root, proc, jobs = slurm_run
    assert proc.returncode == 0
    readme = (ROOT / "workflow" / "profiles" / "slurm" / "README.md").read_text()
    assert "logs/slurm/rule_block/EXPERIMENT_K/JOBID.log" in readme
    for k, (job,) in _blocks(jobs).items():
        log = root / "logs" / "slurm" / "rule_block" / f"{EXP}_{k}" / f"{job['JobID']}.log"
        assert log.exists(), sorted(str(p.relative_to(root)) for p in (root / "logs").rglob("*.log"))
        assert "Finished job" in log.read_text() or "1 of 1 steps (100%) done" in log.read_text()
        assert (root / "logs" / EXP / "server" / f"block-{k}.log").stat().st_size > 0


def test_results_have_the_shape_of_a_local_run(slurm_run):
    root, proc, jobs = slurm_run
    assert proc.returncode == 0
    res = root / "results" / EXP
    assert design.read(res / "schedule.csv") == design.draw_hosts(
        ["baseline", "ngram_4"], "baseline", "abab", 1, 1, [NODE]
    )
    runs = pd.read_csv(res / "runs.csv")
    assert len(runs) == BLOCKS * (1 + 2) and runs.loc[~runs["warmup"], "valid"].all()
    assert set(runs["host"]) == {NODE}
    assert (runs.loc[~runs["warmup"], "completion_tokens"] == 16).all()
    # every file the workflow declares for the article exists, and no other under results/
    summary = snakemake(root, "--summary", "--cores", "1", f"report/{EXP}/article.html")
    assert summary.returncode == 0, summary.stderr[-3000:]
    rows = [line.split("\t") for line in summary.stdout.splitlines()[1:] if line.strip()]
    declared = {r[0] for r in rows}
    assert not [r for r in rows if r[0].startswith(("results/", "report/")) and "missing" in r]
    written = {str(p.relative_to(root)) for p in res.rglob("*") if p.is_file()}
    # and the experiment as the DAG resolved it: written when the DAG is built, no job's output, every rule's input
    resolved = f"results/{EXP}/experiment.resolved.json"
    assert resolved in written and resolved not in declared
    assert written - {resolved} <= declared, sorted(written - declared)
    stats = json.loads((res / "stats.json").read_text())
    assert {"baseline", "ngram_4"} <= set(json.dumps(stats).split('"'))


# The sweep above runs the embedded vLLM engine in its jobs; what the two tests below check is SLURM's and the
# workflow's (a cancelled job, one allocation for a host's blocks), which the reference engine shows as well,
# without five more vLLM starts on the longest file of the suite. At 10 tokens/s a block of 7 requests of 16
# tokens and the neutrality pairs lasts about 15 s, so the cancel lands while it measures.
ON_REFERENCE = (
    "engine: {kind: vllm, embedded: true, port: %d}" % PORT,
    'engine: {kind: reference, port: %d, args: ["--rate", "10"]}' % PORT,
)
CANCEL_EXP = "slurmcancel"
CANCEL = (
    SWEEP.replace("rounds: 1, runs_per_block: 2", "rounds: 1, runs_per_block: 6")
    .replace("Two arms through SLURM", "A block cancelled under it")
    .replace(*ON_REFERENCE)
)
STATUS_FIRST_S = 3


def test_a_cancelled_block_ends_the_run_and_a_rerun_finishes_it(slurm_run, cluster):
    """scancel of a running block (what an administrator or pre-emption does) ends snakemake at its next
    status check with the job, its state and the command to resume; that command then finishes the sweep."""
    root, proc, jobs = slurm_run
    (root / "experiments" / f"{CANCEL_EXP}.yaml").write_text(CANCEL)
    argv = [
        "--profile",
        "workflow/profiles/slurm",
        "--slurm-init-seconds-before-status-checks",
        str(STATUS_FIRST_S),
        f"results/{CANCEL_EXP}/stats.json",
    ]
    # as test_executor.snakemake runs it, without SLURM_CONF (the cluster is found at /etc/slurm/slurm.conf)
    full = ["--rerun-triggers", "params", "input", "software-env", "code", *argv]
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SNAKEMAKE_PROFILE")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    log = root / "cancel.out"
    with open(log, "w") as out:
        run = subprocess.Popen([SNAKEMAKE, *full], cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            jobid = None
            deadline = time.monotonic() + 600
            while jobid is None and time.monotonic() < deadline and run.poll() is None:
                q = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i|%k", check=False).stdout
                jobid = next(
                    (
                        i
                        for i, c in (line.split("|", 1) for line in q.splitlines())
                        if c.startswith(f"rule_block_wildcards_{CANCEL_EXP}_0")
                    ),
                    None,
                )
                time.sleep(1)
            assert jobid, log.read_text()[-4000:]
            # Cancel once the block has begun (its provenance is written before its server starts), so
            # there is an attempt to keep: a fixed wait could fall before the job's Python had started.
            begun = root / "results" / CANCEL_EXP / "raw" / "block-0.meta.json.partial"
            until = time.monotonic() + 300
            while not begun.exists() and time.monotonic() < until and run.poll() is None:
                time.sleep(1)
            time.sleep(3)  # the block's server is starting or measuring
            cancelled = time.monotonic()
            cluster.run("scancel", jobid)
            rc = run.wait(timeout=300)
            took = time.monotonic() - cancelled
        finally:
            if run.poll() is None:
                run.kill()
    text = log.read_text()
    state = cluster.run("sacct", "-X", "-n", "-P", "-j", jobid, "-o", "State").stdout.strip()
    print(f"cancelled job {jobid} ({state}); snakemake ended {took:.0f} s later, rc {rc}")
    assert state.startswith("CANCELLED"), state
    assert rc != 0
    # the plugin's status interval starts at STATUS_FIRST_S and grows by 10 s per check: 3, 13, 23, 33 ...
    assert took < 90, text[-4000:]
    assert f"SLURM job {jobid} (rule block {CANCEL_EXP}_0) ended {state}" in text, text[-4000:]
    assert f"resume with `snakemake {' '.join(full)}`" in text
    # The cancelled block's server goes with its job: SLURM signals the step's processes and kills what is
    # left after KillWait (2 s on the test cluster); snakemake may see the state before that ends.
    gone_by = time.monotonic() + 60
    while engine_processes(PORT) and time.monotonic() < gone_by:
        time.sleep(1)
    assert engine_processes(PORT) == [], "the cancelled block's server outlived its job by 60 s"
    saved = os.environ.pop("SLURM_CONF", None)
    try:
        again = snakemake(root, *argv, timeout=1800)
    finally:
        if saved is not None:
            os.environ["SLURM_CONF"] = saved
    assert again.returncode == 0, (again.stdout + again.stderr)[-6000:]
    raw = root / "results" / CANCEL_EXP / "raw"
    assert json.loads((raw / "block-0.meta.json").read_text())["status"] == "complete"
    assert list((raw / "failed").glob("block-0.attempt-*"))  # the cancelled attempt, kept


HOST_EXP = "slurmhost"
PER_HOST = (
    SWEEP.replace(*ON_REFERENCE)
    .replace("runtime_min: 15}", "runtime_min: 15, allocation: per_host}")
    .replace("Two arms through SLURM", "A host's blocks in one allocation")
    .replace(str(PORT), str(PORT + 1))
)


def test_a_hosts_blocks_share_one_allocation_with_site_settings_from_the_command_line(slurm_run, cluster):
    """cluster.allocation: per_host runs the host's blocks in one sbatch job, one after the other, so the gaps
    between them are the cooldown's (0 s here) plus the next block's start, well under a minute; the
    site's account and partition come from $BRACKET_SLURM in an unedited profile and join its defaults."""
    root, _, _ = slurm_run
    (root / "experiments" / f"{HOST_EXP}.yaml").write_text(PER_HOST)
    path = root / "workflow" / "profiles" / "slurm" / "config.yaml"
    edited = path.read_text()
    path.write_text((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())  # as shipped
    saved = {k: os.environ.pop(k, None) for k in ("SLURM_CONF", "BRACKET_SLURM")}
    os.environ["BRACKET_SLURM"] = f"slurm_account={slurm_cluster.ACCOUNT} slurm_partition={slurm_cluster.PARTITION}"
    try:
        proc = snakemake(
            root,
            "--profile",
            "workflow/profiles/slurm",
            "--slurm-init-seconds-before-status-checks",
            "3",
            f"results/{HOST_EXP}/stats.json",
            timeout=1800,
        )
    finally:
        path.write_text(edited)
        os.environ.pop("BRACKET_SLURM")
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]
    out = cluster.run(
        "sacct",
        "-a",
        "-X",
        "-P",
        "--noheader",
        "-S",
        "now-1days",
        "-o",
        ",".join(f"{f}%200" if f in ("Comment", "JobName") else f for f in SACCT_FIELDS),
    ).stdout
    jobs = [
        j
        for j in csv.DictReader(io.StringIO(out), fieldnames=SACCT_FIELDS, delimiter="|")
        if j["JobName"].startswith(f"{HOST_EXP}.")
    ]
    (group,) = [j for j in jobs if j["JobName"].startswith(f"{HOST_EXP}.blocks0-1.")]
    assert not [j for j in jobs if j["Comment"].startswith("rule_block_")]  # no block of its own
    assert group["State"] == "COMPLETED" and group["NodeList"] == NODE and group["ReqMem"] == "3000M"
    assert group["Timelimit"] == "00:30:00"  # the two blocks' runtime_min, one after the other
    # the command line's account and partition, and the profile's memory and time, on every job
    assert all(j["Account"] == slurm_cluster.ACCOUNT and j["Partition"] == slurm_cluster.PARTITION for j in jobs)
    others = [j for j in jobs if j is not group]
    assert others and all(j["ReqMem"] == "4000M" and j["Timelimit"] == "00:30:00" for j in others), others
    res = root / "results" / HOST_EXP
    metas = [json.loads((res / "raw" / f"block-{k}.meta.json").read_text()) for k in (0, 1)]
    cpus = slurm_cluster.machine()["CPUs"]
    assert all(m["status"] == "complete" and m["cpus_allowed"] == list(range(cpus)) for m in metas)
    gaps = json.loads((res / "stats.json").read_text())["gaps"]
    assert gaps["n"] == 1 and gaps["gaps"][0]["gap_s"] == round(metas[1]["started_at"] - metas[0]["ended_at"], 3)
    print(f"gap between blocks in one allocation: {gaps['gaps'][0]['gap_s']} s")
    assert gaps["over"] == 0 and gaps["max_s"] < 60, gaps
