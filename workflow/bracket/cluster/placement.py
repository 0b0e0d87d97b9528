"""What one block asks of a cluster scheduler: CPUs, the node to itself, the named host.

The experiment's `cluster:` key says it once; the rules hand it to the executor as resources
(workflow/profiles/README.md). What SLURM 22.05 did with each request, on the one-node test cluster
with task/affinity and task/cgroup (tools/slurm_cluster.py):

- `--exclusive` gives the job every CPU, every GPU and all the memory of the node, whatever it asked
  for, and the site bills them all; a job step then sees every CPU only if it asks for no CPU count
  (`srun -c 1` pins it to core 0), and the GPUs its `--gpus` names (CUDA_VISIBLE_DEVICES).
- `--exclusive=user` keeps other users' jobs off the node but gives the job only what it asked.
"""

from __future__ import annotations

# `cluster` below is the experiment's cluster: key as validated (bracket.typed.experiment.Cluster), read by
# attribute; not imported here: experiment/ stands above this layer (ARCHITECTURE.md, the floor plan).

# cluster.exclusive: true is "node", false is "none"
EXCLUSIVE = {True: "node", False: "none", "user": "user"}


def exclusive_mode(cluster) -> str:
    """`node`, `user` or `none`, from cluster.exclusive (true, user or false)."""
    value = cluster.exclusive
    if value not in EXCLUSIVE:
        raise ValueError(
            f"cluster.exclusive is {value!r}: use true (the whole node), 'user' (no other user's "
            f"job on the node) or false"
        )
    return EXCLUSIVE[value]


def cpus_per_task(cluster) -> int:
    """The block's CPU count for sbatch and for its job step; -1 asks for none (the plugins then pass no -c).

    cluster.cpus 0 asks for none: under exclusive node the job holds the whole node and its step,
    asking no count, runs on every CPU of it; elsewhere the site's default applies (often one CPU)."""
    cpus = int(cluster.cpus)
    return cpus if cpus > 0 else -1


def slurm_extra(cluster, host: str) -> str:
    """sbatch options beyond the plugin's own: the node to itself, and the named host.

    No --nice: blocks are submitted one per host at a time (the profiles cap exclusive_host), so a
    nice value would order nothing and only lower the jobs' priority against other users'."""
    mode = exclusive_mode(cluster)
    opts = {"node": ["--exclusive"], "user": ["--exclusive=user"], "none": []}[mode]
    return " ".join(opts + ([f"--nodelist={host}"] if host else []))
