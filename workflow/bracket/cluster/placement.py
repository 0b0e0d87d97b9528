"""What one block asks of a cluster scheduler: CPUs, the node to itself, the named host.

The experiment's `cluster:` key says it once; the rules hand it to the executor as resources
(workflow/profiles/README.md). What SLURM 22.05 did with each request, on the one-node test cluster
with task/affinity and task/cgroup (tools/slurm_cluster.py):

- `--exclusive` gives the job every CPU and every GPU of the node, whatever it asked for, and the
  site bills them all, but only the memory it asked for (sbatch's --mem: cluster.mem_mb); a job step
  then sees every CPU only if it asks for no CPU count (`srun -c 1` pins it to core 0), and the GPUs
  its `--gpus` names (CUDA_VISIBLE_DEVICES).
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


def problems(cluster) -> list[str]:
    """What validation refuses in the experiment's cluster: key (bracket.experiment.config calls it).

    exclusive user or false with cpus 0 asks SLURM for no CPU count on a node the block does not hold:
    the site's default applies, often one CPU, and the server then ran on core 0 with no word said
    (a block's meta records `cpus_allowed`; the article's finding names a block that got fewer)."""
    mode = exclusive_mode(cluster)
    if mode != "node" and int(cluster.cpus) <= 0:
        value = "user" if mode == "user" else "false"
        return [
            f"cluster.exclusive is {value} and cluster.cpus is 0: a block that does not hold its node gets the "
            f"site's default CPU count, often one CPU, and its server runs on that. Set cluster.cpus to the CPUs "
            f"a block's server needs (e.g. cluster.cpus: 16), or cluster.exclusive: true to hold the whole node."
        ]
    return []


def slurm_extra(cluster, host: str) -> str:
    """sbatch options beyond the plugin's own: the node to itself, and the named host.

    No --nice: blocks are submitted one per host at a time (the profiles cap exclusive_host), so a
    nice value would order nothing and only lower the jobs' priority against other users'."""
    mode = exclusive_mode(cluster)
    opts = {"node": ["--exclusive"], "user": ["--exclusive=user"], "none": []}[mode]
    return " ".join(opts + ([f"--nodelist={host}"] if host else []))
