"""Blocks through Snakemake's executors: jobs that need nothing but their declared files.

The dry runs check what each block asks of a cluster (SLURM profile) and that blocks chain on
their own host only. The run tests a tiny two-host experiment on the reference engine (engine.kind
reference: bracket's calibrated server, started per block like any engine, in a second) through the
cluster-generic executor, whose stand-in scheduler (workflow/profiles/cluster-generic)
starts every job as its own detached process, in a new session, with a scrubbed environment and
an empty home: the run passing, and leaving only declared files, shows that no job relies on
another's memory, environment or undeclared files.

Each test works in a copy of the workflow in a temporary folder, with resources/ linked to the
project's, so the engine and model are not rebuilt (the reference engine needs neither).
"""

import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import psutil
import pytest
from bracket.experiment import design
from conftest import ROOT

from tests import support

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
PORT = 8061
EXP = "hostpair"

# Two arms, two rounds, two hosts: eight blocks, four per host (dry runs only).
SWEEP = (
    """\
title: "Two hosts, two arms"
engine: {kind: vllm, embedded: true, port: %d}
arms: {baseline: {}, ngram_4: {speculative: {method: ngram, draft_tokens: 4}}}
hosts: [node-a, node-b]
workloads: {code: {prompts: experiments/prompts/code.jsonl}}
design: {kind: abab, rounds: 2, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}
request: {max_tokens: 32}
cluster: {gpus: 2, mem_mb: 8000, runtime_min: 20}
analysis: {bootstrap_resamples: 200}
hardware: {probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}
"""
    % PORT
)

# The same server on two hosts, one block each: two server starts (the real run).
PAIR = (
    """\
title: "Same build, two hosts"
question: "Is one host slower than the other?"
engine: {kind: reference, port: %d, args: ["--rate", "800", "--ttft", "0.01"]}
arms: {baseline: {}}
hosts: [node-a, node-b]
workloads: {code: {prompts: experiments/prompts/code.jsonl}}
design: {kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}
request: {max_tokens: 32}
analysis: {bootstrap_resamples: 200}
hardware: {probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}
"""
    % PORT
)


def workflow_copy(root: Path, experiments: dict[str, str], engine: tuple[Path, Path] | None = None) -> Path:
    """Snakefile, workflow/, experiments/ and notebooks/ copied (mtimes kept), resources/ linked; with
    `engine` (the embedded_engine fixture's engine and model, which may live outside this checkout) the
    engine is linked and the model copied there instead, as faultkit.repo_copy does."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copy2(ROOT / "Snakefile", root / "Snakefile")
    for d in ("profiles", "workflow", "experiments", "notebooks"):
        shutil.copytree(ROOT / d, root / d, ignore=ignore)
    if engine is None:
        (root / "resources").symlink_to(ROOT / "resources")
    else:
        (root / "resources" / "engines").mkdir(parents=True)
        (root / "resources" / "engines" / Path(engine[0]).name).symlink_to(Path(engine[0]).resolve())
        model = root / "resources" / "models" / Path(engine[1]).name
        shutil.copytree(Path(engine[1]).resolve(), model)
        for f in sorted(model.iterdir(), key=lambda f: f.name != "build.json"):
            f.touch()  # build.json first: every file at least as new as the engine it was built with
    for name, text in experiments.items():
        (root / "experiments" / f"{name}.yaml").write_text(text)
    return root


def snakemake(cwd: Path, *args, timeout=900):
    """tests.support's runner with the cores (or profile) the call names and no SNAKEMAKE_PROFILE. The mtime
    trigger is off so that the copy's fresh workflow files never ask to rebuild the shared engine or model; every
    job of the experiment itself is missing and runs anyway."""
    env = support.snakemake_env()
    env.pop("SNAKEMAKE_PROFILE", None)
    triggers = ("--rerun-triggers", "params", "input", "software-env", "code")
    return support.snakemake(cwd, *triggers, *args, env=env, timeout=timeout, cores=None)


def dry_jobs(out: str) -> list[dict]:
    """Jobs of a `snakemake -n` listing: rule, wildcards, input and resources of each."""
    jobs = []
    for chunk in re.split(r"\n(?=rule \w+:|localrule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", chunk)
        if not m:
            continue
        job = {"rule": m.group(1)}
        for key in ("input", "wildcards", "resources", "priority"):
            line = re.search(rf"^\s+{key}: (.*)$", chunk, re.M)
            job[key] = line.group(1) if line else ""
        jobs.append(job)
    return jobs


def resources_of(job: dict) -> dict:
    # "a=1, b=x y, c=" -> {"a": "1", "b": "x y", "c": ""}
    return dict(re.findall(r"(\w+)=(.*?)(?=, \w+=|$)", job["resources"]))


@pytest.fixture(scope="module")
def sweep_copy(tmp_path_factory):
    return workflow_copy(tmp_path_factory.mktemp("sweep"), {EXP: SWEEP})


def test_slurm_profile_dry_run_shows_what_each_block_asks_for(sweep_copy):
    proc = snakemake(sweep_copy, "-n", "--profile", "workflow/profiles/slurm", f"results/{EXP}/stats.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # the site profile, and the workflow profile beside the Snakefile under it (run: jobs in a thread)
    assert "Using profiles workflow/profiles/slurm and workflow specific profile profiles/default" in out
    blocks = [j for j in dry_jobs(out) if j["rule"] == "block"]
    assert len(blocks) == 8, out[-4000:]
    schedule = design.draw_hosts(["baseline", "ngram_4"], "baseline", "abab", 2, 1, ["node-a", "node-b"])
    for job in blocks:
        k = int(re.search(r"k=(\d+)", job["wildcards"]).group(1))
        res = resources_of(job)
        host = schedule[k].host
        assert res["host"] == host
        # cluster: {gpus: 2, mem_mb: 8000, runtime_min: 20}; exclusive by default; pinned by nodelist
        assert (res["gpu"], res["mem_mb"], res["runtime"], res["exclusive_host"]) == ("2", "8000", "20", "1")
        # no CPU count (cluster.cpus 0): the plugins then pass no -c, and the step runs on the whole node; no
        # --nice: one block per host is submitted at a time, so it would order nothing
        assert res["cpus_per_task"] == "-1"
        assert res["slurm_extra"] == f"--exclusive --nodelist={host}"
    others = [j for j in dry_jobs(out) if j["rule"] != "block"]
    assert others and all(resources_of(j).get("runtime") == "30" for j in others)  # profile defaults


def test_per_host_allocation_puts_each_hosts_blocks_into_one_group_job(sweep_copy):
    """cluster.allocation: per_host: one group job per host holds that host's four blocks (the profile's
    group-components joins them), so SLURM gets one submission per host, not one per block."""
    path = sweep_copy / "experiments" / "hostgroup.yaml"
    path.write_text(SWEEP.replace("runtime_min: 20}", "runtime_min: 20, allocation: per_host}"))
    proc = snakemake(sweep_copy, "-n", "--profile", "workflow/profiles/slurm", "results/hostgroup/stats.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    schedule = design.draw_hosts(["baseline", "ngram_4"], "baseline", "abab", 2, 1, ["node-a", "node-b"])
    for host in ("node-a", "node-b"):
        assert out.count(f"Group job blocks-hostgroup-{host} ") == 1, out[-4000:]
        chunk = out.split(f"Group job blocks-hostgroup-{host} ")[1].split("Group job")[0]
        ks = sorted(int(k) for k in re.findall(r"wildcards: exp=hostgroup, k=(\d+)", chunk))
        assert ks == [b.position for b in schedule if b.host == host], chunk[-3000:]


def test_blocks_are_ordered_by_priority_not_chained(sweep_copy):
    """Schedule order comes from job priorities; no block takes another's output as input, so the
    rerun checks of every block run (a chain would let Snakemake skip them)."""
    proc = snakemake(sweep_copy, "-n", "--cores", "1", f"results/{EXP}/stats.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    prio = {}
    for job in dry_jobs(out):
        if job["rule"] == "block":
            k = int(re.search(r"k=(\d+)", job["wildcards"]).group(1))
            assert "raw/block-" not in job["input"]
            prio[k] = int(job["priority"])
    assert sorted(prio, key=prio.get, reverse=True) == list(range(8))


def test_local_profile_keeps_one_block_at_a_time(sweep_copy):
    proc = snakemake(sweep_copy, "-n", "--profile", "workflow/profiles/local", f"results/{EXP}/stats.json")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert all(
        resources_of(j)["exclusive_host"] == "1" for j in dry_jobs(proc.stdout + proc.stderr) if j["rule"] == "block"
    )


def engine_processes(port: int) -> list[int]:
    return [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "cmdline"])
        if "bracket.engines.reference_server" in " ".join(p.info["cmdline"] or [])
        and f"--port {port}" in " ".join(p.info["cmdline"] or [])
    ]


@pytest.fixture(scope="module")
def executor_run(tmp_path_factory):
    if engine_processes(PORT):
        pytest.fail(f"an engine already listens on port {PORT}; stop it first")
    root = workflow_copy(tmp_path_factory.mktemp("executor"), {EXP: PAIR})
    proc = snakemake(root, "--profile", "workflow/profiles/cluster-generic", f"results/{EXP}/stats.json", timeout=1200)
    return root, proc


def test_every_job_ran_as_its_own_detached_submission(executor_run):
    root, proc = executor_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    submits = sorted((root / "logs" / "cluster").glob("*.submit"))
    fields = [dict(kv.split("=", 1) for kv in f.read_text().split()) for f in submits]
    assert len(re.findall(r"Submitted job \d+ with external jobid", out)) == len(submits)
    # nothing ran inside snakemake's own process: every rule of the run went through submit.sh
    assert {f["rule"] for f in fields} >= {"plan", "block", "collect", "analyze"}
    blocks = sorted((f["host"], f["exclusive"]) for f in fields if f["rule"] == "block")
    assert blocks == [("node-a", "1"), ("node-b", "1")]  # placement reached the submit command
    assert all(f["exclusive"] == "0" and f["host"] == "" for f in fields if f["rule"] != "block")
    pids = {(root / "logs" / "cluster" / f.name.replace(".submit", ".pid")).read_text() for f in submits}
    assert len(pids) == len(submits)
    assert all(
        (root / "logs" / "cluster" / f.name.replace(".submit", ".rc")).read_text().strip() == "0" for f in submits
    )
    assert engine_processes(PORT) == []  # every job stopped its server


def test_blocks_record_their_host_and_hosts_are_compared(executor_run):
    root, proc = executor_run
    assert proc.returncode == 0
    res = root / "results" / EXP
    assert design.read(res / "schedule.csv") == design.draw_hosts(
        ["baseline"], "baseline", "abab", 1, 1, ["node-a", "node-b"]
    )
    metas = [json.loads((res / "raw" / f"block-{k}.meta.json").read_text()) for k in (0, 1)]
    assert [m["status"] for m in metas] == ["complete", "complete"]
    assert metas[0]["pid"] != metas[1]["pid"]
    runs = pd.read_csv(res / "runs.csv")
    assert len(runs) == 2 * 3 and set(runs["host"]) == {"node-a", "node-b"}
    assert runs.loc[~runs["warmup"], "valid"].all()
    assert (runs.groupby("block")["host"].nunique() == 1).all()
    stats = json.loads((res / "stats.json").read_text())
    hosts = stats["hosts"]
    assert hosts["names"] == ["node-a", "node-b"] and hosts["baseline"] == "node-a"
    (c,) = hosts["comparisons"]
    a = runs[(runs["host"] == "node-a") & runs["valid"]]["decode_tok_s"].median()
    b = runs[(runs["host"] == "node-b") & runs["valid"]]["decode_tok_s"].median()
    # one block per host: no block-level interval (ci_* empty, issue 29), the request-level one is raw_ci_*
    assert c["ratio"] == pytest.approx(b / a) and c["ci_low"] is None and c["ci_high"] is None
    assert c["raw_ci_low"] <= c["raw_ratio"] <= c["raw_ci_high"] and c["verdict"] == "undetermined"
    assert set(hosts["drift"]) == {"node-a", "node-b"}


def test_jobs_leave_only_declared_files(executor_run):
    root, proc = executor_run
    assert proc.returncode == 0
    summary = snakemake(root, "--summary", "--cores", "1", f"results/{EXP}/stats.json")
    assert summary.returncode == 0, summary.stderr[-3000:]
    declared = {line.split("\t")[0] for line in summary.stdout.splitlines()[1:] if line.strip()}
    written = {str(p.relative_to(root)) for p in (root / "results" / EXP).rglob("*") if p.is_file()}
    # and the experiment as the DAG resolved it: written when the DAG is built, no job's output, every rule's input
    resolved = f"results/{EXP}/experiment.resolved.json"
    assert resolved in written and resolved not in declared
    assert written - {resolved} <= declared, sorted(written - declared)
    # the one file beside them is the port lock, named by the host that took it
    locks = [str(p.relative_to(root / "results" / ".locks")) for p in (root / "results" / ".locks").rglob("*.lock")]
    assert locks and all(re.fullmatch(rf"[^/]+/port-{PORT}\.lock", p) for p in locks)
