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
it means, and the command that resumes the run. Nothing else of the plugin changes.
"""

from __future__ import annotations

import functools
import shlex
import sys

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


def failure_message(jobid: str, state: str, job: str, rerun: str) -> str:
    """What the user reads when job `jobid` ended in `state`: the job, the state, why, and what to run."""
    meaning = FAILED.get(base_state(state), "it ended without completing")
    return (
        f"SLURM job {jobid} ({job}) ended {state.strip()}: {meaning}. A block keeps what it measured "
        f"(results/EXPERIMENT/raw/failed/); resume with `{rerun}`, which reruns only the unfinished jobs."
    )


def rerun_command(argv: list[str] | None = None) -> str:
    """The command line of this snakemake invocation, to run again."""
    argv = sys.argv if argv is None else argv
    return shlex.join(["snakemake", *argv[1:]])


def install(workflow=None) -> bool:
    """Wrap the SLURM executor plugin's status query and error report; False where it is not installed.

    Safe to call more than once (the Snakefile is read again inside every job)."""
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
        if base_state(state) in FAILED:
            job = job_info.job
            wildcards = plugin.get_job_wildcards(job)
            name = f"rule {job.name}" + (f" {wildcards}" if wildcards else "")
            msg = failure_message(job_info.external_jobid, state, name, rerun_command()) + (f"\n{msg}" if msg else "")
        return report(self, job_info, msg=msg, **kwargs)

    plugin.query_job_status = query_job_status
    plugin.Executor.report_job_error = report_job_error
    return True
