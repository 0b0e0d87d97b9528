"""Blocks that ran on fewer CPUs than they asked for: a finding.

Each block records the CPUs its process, and the server it starts, may run on (`cpus_allowed`,
os.sched_getaffinity at the block's start) and the machine's CPUs (`cpus_online`, os.cpu_count). A
scheduler's job step can confine a block to fewer than it asked: with `srun -c 1` a block that held
a whole node ran its server on core 0 alone (workflow/profiles/slurm/README.md), and
`cluster.exclusive: user` without `cluster.cpus` gets the site's default count, often one. What a
block asked:

    cluster.cpus N > 0                  -> N CPUs
    cluster.cpus 0, exclusive true      -> every CPU of its host (`cpus_online`)
    cluster.cpus 0, exclusive user/false -> nothing stated (validation refuses it; no finding)

A complete block whose `cpus_allowed` holds fewer than that is narrower than asked. One finding per
experiment: how many blocks, of how many read, the fewest CPUs one got and what was asked.
"""

from __future__ import annotations

from bracket.stats.findings import CpusNarrow, Finding
from bracket.stats.findings import FindingKind as K


def asked(cluster, meta: dict) -> int | None:
    """The CPUs a block asked for (module docstring), or None where it stated no count."""
    cpus = int(getattr(cluster, "cpus", 0) or 0)
    if cpus > 0:
        return cpus
    online = meta.get("cpus_online")
    if getattr(cluster, "exclusive", True) is True and isinstance(online, int) and online > 0:
        return online
    return None


def narrow_blocks(metas: list[dict], cluster) -> list[tuple[int, int, int]]:
    """(block, CPUs allowed, CPUs asked) for each complete block that ran on fewer CPUs than it asked."""
    out = []
    for m in metas:
        allowed = m.get("cpus_allowed")
        if m.get("status", "complete") != "complete" or not isinstance(allowed, list) or not allowed:
            continue
        want = asked(cluster, m)
        if want is not None and len(allowed) < want:
            out.append((int(m.get("block", -1)), len(allowed), want))
    return out


def findings(metas: list[dict] | None, cluster) -> list[Finding]:
    """One finding when some block ran on fewer CPUs than it asked for (module docstring)."""
    metas = metas or []
    narrow = narrow_blocks(metas, cluster)
    if not narrow:
        return []
    read = sum(
        1 for m in metas if isinstance(m.get("cpus_allowed"), list) and m.get("status", "complete") == "complete"
    )
    fewest = min(narrow, key=lambda n: n[1])
    return [
        Finding(
            K.CPUS_NARROW,
            CpusNarrow(
                blocks=len(narrow),
                of=read,
                fewest=fewest[1],
                asked=fewest[2],
                block=fewest[0],
                basis="cluster.cpus" if int(getattr(cluster, "cpus", 0) or 0) > 0 else "the whole host",
            ),
        )
    ]
