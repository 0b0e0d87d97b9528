"""Every way a SLURM job can end, understood: so a cancelled block ends the workflow's wait.

snakemake-executor-plugin-slurm 2.8.0 (the newest on PyPI) reads each job's state from
`sacct -X --parsable2 --format=JobIdRaw,State` and compares it with whole words: `CANCELLED`,
`TIMEOUT`, `NODE_FAIL`, ... But sacct writes a cancelled job's state as `CANCELLED by 0` (the
uid that cancelled it), and squeue may append `+`; such a job matches nothing, and Snakemake
waits for it for ever, silently. A pre-empted job (`PREEMPTED`, final where the site cancels
pre-empted jobs rather than requeueing them) is waited for by design.

`install` wraps the plugin's status query, upstream-style (the fix belongs in the plugin's
`query_job_status`: take the state's first word): each state is reduced to the word the plugin
knows, and the error the plugin then reports for the job gets the state as SLURM wrote it, what
it means, the experiment and the command that resumes the run (printed by bracket for a group job,
whose message Snakemake 9.27 drops); and the wait between two status checks stops growing at
STATUS_EVERY_MAX_S. Nothing else of the plugin changes.
"""

from __future__ import annotations

import functools
import shlex
import sys

from bracket.cluster import group_failure, slurm_partitions

# Terminal states that are not success, and what each asks of the user. Keys are sacct's words.
FAILED = {
    "BOOT_FAIL": "its node failed to boot",
    "CANCELLED": "it was cancelled (scancel by its user or an administrator, or pre-emption)",
    "DEADLINE": "it reached its deadline (--deadline) before it could finish",
    "FAILED": "it exited with an error: its log says why",
    "NODE_FAIL": "its node failed while it ran",
    "OUT_OF_MEMORY": "it ran out of memory: raise cluster.mem_mb (blocks) or mem_mb (other jobs)",
    "PREEMPTED": "a job of higher priority pre-empted it, and the site does not requeue pre-empted jobs",
    "REVOKED": "a sibling cluster of the federation took it",
    "TIMEOUT": "it ran past its time limit: raise cluster.runtime_min (blocks) or runtime (other jobs)",
}
# The longest wait between two status checks: the plugin's interval starts at the profile's
# slurm-init-seconds-before-status-checks and grows by 10 s per check in which no job ended, up to 180 s,
# so a block cancelled 20 minutes into a run was seen minutes later. One sacct per 20 s is less often than
# Snakemake's own default (10 s).
STATUS_EVERY_MAX_S = 20
# The plugin's own list (snakemake_executor_plugin_slurm.Executor.check_active_jobs, fail_stati):
# a state outside it is reported to the plugin as CANCELLED, so the plugin ends the job's wait.
PLUGIN_FAILED = ("BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT")


def base_state(state: str) -> str:
    """The state's first word without squeue's `+`: `CANCELLED by 0` -> `CANCELLED`."""
    words = state.strip().split()
    return words[0].rstrip("+").upper() if words else ""


def plugin_state(state: str, requeue: bool = False) -> str:
    """The word the plugin acts on for `state`: a failure it does not know is reported as CANCELLED.

    With the plugin's `requeue` on, PREEMPTED and NODE_FAIL are left to SLURM, as the plugin intends:
    the job comes back as PENDING."""
    base = base_state(state)
    if requeue and base in ("PREEMPTED", "NODE_FAIL"):
        return base
    if base in FAILED and base not in PLUGIN_FAILED:
        return "CANCELLED"
    return base


def failure_message(jobid: str, state: str, job: str, rerun: str, experiments: list[str] | None = None) -> str:
    """What the user reads when job `jobid` ended in `state`: the job, the state, why, and what to run.

    `experiments` are the experiments the job's blocks belong to: where an unfinished block's records
    are kept is named for each."""
    meaning = FAILED.get(base_state(state), "it ended without completing")
    kept = ", ".join(f"results/{e}/raw/failed/" for e in experiments or []) or "results/EXPERIMENT/raw/failed/"
    return (
        f"SLURM job {jobid} ({job}) ended {state.strip()}: {meaning}. A block keeps what it measured "
        f"(an unfinished one in {kept}, a finished one where it is); resume with `{rerun}`, which reruns "
        f"only the unfinished jobs."
    )


def job_experiments(job) -> list[str]:
    """The experiments (the `exp` wildcard) of a Snakemake job, or of every job of a group job."""
    members = list(job.jobs) if job.is_group() else [job]
    return sorted({str(j.wildcards["exp"]) for j in members if "exp" in dict(getattr(j, "wildcards", None) or {})})


def job_name(job, wildcards: str) -> str:
    """`rule block smoke_3`, or for a group job `group blocks-smoke-node1 (block smoke_0, block smoke_1)`."""
    if not job.is_group():
        return f"rule {job.name}" + (f" {wildcards}" if wildcards else "")
    members = sorted(job.jobs, key=lambda j: (j.rule.name, int(dict(j.wildcards).get("k", 0) or 0)))
    parts = [f"{j.rule.name} " + "_".join(str(v) for v in dict(j.wildcards).values()) for j in members]
    return f"group {job.groupid} ({', '.join(parts)})"


def rerun_command(argv: list[str] | None = None) -> str:
    """The command line of this snakemake invocation, to run again."""
    argv = sys.argv if argv is None else argv
    return shlex.join(["snakemake", *argv[1:]])


def install(workflow=None) -> bool:
    """Wrap the SLURM executor plugin's status query and error report; False where it is not installed.

    Safe to call more than once (the Snakefile is read again inside every job). Also keeps a finished
    block's outputs when its group job fails (bracket.cluster.group_failure), under any executor, and lets
    the plugin's partition selection place a block that asks for no CPU count (bracket.cluster.slurm_partitions)."""
    group_failure.install()
    slurm_partitions.install()
    try:
        import snakemake_executor_plugin_slurm as plugin
    except ImportError:
        return False
    if getattr(plugin.query_job_status, "_bracket", False):
        return True
    seen: dict[str, str] = {}  # job id -> the state as SLURM wrote it, for the error message
    query = plugin.query_job_status

    @functools.wraps(query)
    async def query_job_status(command, logger):
        states, took = await query(command, logger)
        if states is None:
            return states, took
        seen.update(states)
        # read when asked: the Snakefile, which installs this, is read before the executor's settings exist
        requeue = bool(getattr(getattr(workflow, "executor_settings", None), "requeue", False))
        return {jobid: plugin_state(state, requeue) for jobid, state in states.items()}, took

    query_job_status._bracket = True
    report = plugin.Executor.report_job_error

    @functools.wraps(report)
    def report_job_error(self, job_info, msg=None, **kwargs):
        state = seen.get(str(job_info.external_jobid), "")
        job = job_info.job
        if base_state(state) in FAILED:
            name = job_name(job, plugin.get_job_wildcards(job))
            said = failure_message(job_info.external_jobid, state, name, rerun_command(), job_experiments(job))
            msg = said + (f"\n{msg}" if msg else "")
        if msg and job.is_group():
            # Snakemake's GroupJob.log_error (9.27) logs "Error in group ..." and drops the message: say it here.
            from snakemake.logging import logger

            logger.error(msg)
        return report(self, job_info, msg=msg, **kwargs)

    plugin.query_job_status = query_job_status
    plugin.Executor.report_job_error = report_job_error
    if not getattr(plugin.Executor.check_active_jobs, "_bracket", False):
        plugin.Executor.check_active_jobs = capped_checks(plugin.Executor.check_active_jobs)
    return True


def capped_checks(checks):
    """The plugin's check_active_jobs, after which the wait for the next check is at most STATUS_EVERY_MAX_S."""

    @functools.wraps(checks)
    async def check_active_jobs(self, active_jobs):
        async for job in checks(self, active_jobs):
            yield job
        # the plugin adds 10 s per check in which no job ended, up to 180 s: held at STATUS_EVERY_MAX_S
        if (self.next_seconds_between_status_checks or 0) > STATUS_EVERY_MAX_S:
            self.next_seconds_between_status_checks = STATUS_EVERY_MAX_S

    check_active_jobs._bracket = True
    return check_active_jobs
