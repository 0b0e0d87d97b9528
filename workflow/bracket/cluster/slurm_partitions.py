"""The plugin's automatic partition selection, for a block that asks for no CPU count.

A block asks SLURM for no CPU count by default (cluster.cpus 0: the resource cpus_per_task is -1,
bracket.cluster.placement): under --exclusive it holds the whole node, and its job step, asking no
count, runs on every CPU of it (`-c 1` pinned it to core 0). snakemake-executor-plugin-slurm 2.8.0
honours -1 when it writes sbatch's arguments (`get_cpu_setting`: "some clusters do not allow CPU
settings", no --cpus-per-task), but its partition selection (`--slurm-partition-config`) reads the same
resource through `partitions.get_job_cpu_requirement`, which raises "cpus_per_task cannot be negative",
so no block could be placed. `install` wraps that function, upstream-style (the fix belongs there: read
a negative count as the plugin's own "none", as it already does for cpus_per_gpu <= 0), so the block
is scored on its memory, runtime and GPUs alone. Nothing else of the plugin changes.
"""

from __future__ import annotations

import functools


def no_cpu_count(job) -> bool:
    """True when the job asks for no CPU count: cpus_per_task below zero (an int, or a string of one)."""
    value = job.resources.get("cpus_per_task")
    try:
        return value is not None and int(value) < 0
    except (TypeError, ValueError):
        return False


def install() -> bool:
    """Wrap the plugin's get_job_cpu_requirement as the module says; False where the plugin is not installed.

    Safe to call more than once (the Snakefile is read again inside every job)."""
    try:
        from snakemake_executor_plugin_slurm import partitions
    except ImportError:
        return False
    if getattr(partitions.get_job_cpu_requirement, "_bracket", False):
        return True
    requirement = partitions.get_job_cpu_requirement

    @functools.wraps(requirement)
    def get_job_cpu_requirement(job):
        if no_cpu_count(job):
            return (0, "none")  # the plugin's own word for a job that sets no CPU count
        return requirement(job)

    get_job_cpu_requirement._bracket = True
    partitions.get_job_cpu_requirement = get_job_cpu_requirement
    return True
