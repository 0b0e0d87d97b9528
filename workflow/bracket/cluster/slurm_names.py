"""SLURM job names that say the experiment and the block: `smoke.block3.RUNID` rather than a bare UUID.

snakemake-executor-plugin-slurm 2.8.0 names every job of a run after the run's UUID (`--job-name
RUNID`) because its status query finds its jobs by name (`sacct --name RUNID`, `squeue --name
RUNID`), and it refuses `--job-name` in `slurm_extra`; `--slurm-jobname-prefix` puts one word before
the UUID, the same for every job. So `install` wraps, upstream-style, the three places the plugin
uses the name: the submission (each job is named `LABEL.RUNID`), and the status and efficiency
queries, which then ask for every name this run gave (`--name` takes a comma-separated list). The
job's comment (`rule_block_wildcards_EXP_K`, the plugin's) is left as it is.

    squeue -o "%.10i %.40j %.8T %.10M %N"      # JOBID NAME STATE TIME NODE: smoke.block3.6f1c...
"""

from __future__ import annotations

import shlex
import threading

_LOCK = threading.Lock()


def label(jobs: list[tuple[str, dict]]) -> str:
    """What a submission holds, for its name: `EXP.blockK`, `EXP.blocksA-B` (a host's blocks in one
    allocation: the first and last position), `EXP.RULE`, or the rule alone without an experiment.

    `jobs` is (rule name, wildcards) for each job the submission runs."""
    exps = sorted({str(w["exp"]) for _, w in jobs if w.get("exp")})
    rules = sorted({rule for rule, _ in jobs})
    blocks = sorted(int(w["k"]) for rule, w in jobs if rule == "block" and "k" in w)
    what = (
        f"block{blocks[0]}"
        if len(blocks) == 1 and len(jobs) == 1
        else f"blocks{blocks[0]}-{blocks[-1]}"
        if blocks and len(blocks) == len(jobs)
        else "+".join(rules)
    )
    return ".".join([*exps[:1], what]) if exps else what


def job_parts(job) -> list[tuple[str, dict]]:
    """(rule, wildcards) of a Snakemake job, or of every job of a group job."""
    members = list(job.jobs) if job.is_group() else [job]
    return [(j.rule.name, dict(j.wildcards.items()) if getattr(j, "wildcards", None) else {}) for j in members]


def with_names(command: str, names: list[str]) -> str:
    """A status query `command` (sacct or squeue, as the plugin writes it) asking for every name in `names`."""
    argv = shlex.split(command)
    if "--name" not in argv:
        return command
    i = argv.index("--name") + 1
    argv[i] = ",".join(names)
    return shlex.join(argv)


def install() -> bool:
    """Wrap the SLURM executor plugin's job naming and name queries; False where it is not installed.

    Safe to call more than once (the Snakefile is read again inside every job)."""
    try:
        import snakemake_executor_plugin_slurm as plugin
        from snakemake_executor_plugin_slurm import efficiency_report
        from snakemake_executor_plugin_slurm.submit_string import safe_quote
    except ImportError:
        return False
    if getattr(plugin.get_submit_command, "_bracket", False):
        return True
    given: dict[str, set[str]] = {}  # run id -> the names its jobs were given
    submit, sacct, squeue = plugin.get_submit_command, plugin.query_job_status_sacct, plugin.query_job_status_squeue
    sacct_data = efficiency_report.get_sacct_data

    def names(runid: str) -> list[str]:
        with _LOCK:
            return sorted(given.get(runid, set()) | {runid})

    def get_submit_command(job, params, *args, **kwargs):
        call = submit(job, params, *args, **kwargs)
        runid = params["run_uuid"]
        plain = f"--job-name {safe_quote(runid)} "
        if plain not in call:  # a plugin that names jobs otherwise: leave its name, and its queries, alone
            return call
        name = f"{label(job_parts(job))}.{runid}"
        with _LOCK:
            given.setdefault(runid, set()).add(name)
        return call.replace(plain, f"--job-name {safe_quote(name)} ", 1)

    get_submit_command._bracket = True
    plugin.get_submit_command = get_submit_command
    plugin.query_job_status_sacct = lambda runid: with_names(sacct(runid), names(runid))
    plugin.query_job_status_squeue = lambda runid: with_names(squeue(runid), names(runid))
    efficiency_report.get_sacct_data = lambda runid, logger: sacct_data(",".join(names(runid)), logger)
    return True
