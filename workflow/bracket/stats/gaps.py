"""The time between consecutive blocks: the design's cooldown, or the scheduler's wait as well.

An A/B/A/B design compares arms whose blocks lie close in time; drift between them is what the
interleaving cancels. On a cluster each block may be its own job, and the next one starts only
after the scheduler has noticed the last one end and found it a node again (seconds to minutes on
SLURM: issue 30 saw 4-47 s, and another job may take the node in between). So every experiment
records how far apart its blocks actually were, from each block's provenance:

    gap_i = started_at(block i+1) - ended_at(block i)     (blocks of one host, in the order they ran)

`started_at` is the launch of the block's server, after its cooldown; `ended_at` is after the
server's teardown. A gap therefore holds the design's cooldown plus what the design did not ask
for: the job's end and start, the scheduler's wait, the Python start of the next block.

Rule: a gap longer than the cooldown by more than `EXCESS_S` (60 s) is a finding. A minute is
several times what starting the next job costs on one machine (a few seconds: Snakemake's own
switch and the block's imports), and of the order of SLURM's status interval (40-180 s): a gap
beyond it is the scheduler's, not the design's.
"""

from __future__ import annotations

import statistics

from bracket.stats.findings import Finding, Gaps
from bracket.stats.findings import FindingKind as K

EXCESS_S = 60.0


def block_gaps(metas: list[dict], cooldown_s: float, excess_s: float = EXCESS_S) -> dict | None:
    """Gaps between consecutive complete blocks of each host, in seconds; None with fewer than two blocks.

    Parameters
    ----------
    metas : each block's provenance (raw/block-K.meta.json): `block`, `host`, `started_at`, `ended_at`
        (unix seconds). Blocks without both times, or not complete, are left out.
    cooldown_s : the design's cooldown between blocks.
    excess_s : how much longer than the cooldown a gap may be before it is a finding.

    Returns
    -------
    {n, median_s, max_s, cooldown_s, excess_s, over (gaps longer than cooldown + excess_s), gaps: [{host,
    after, before, gap_s}]}; median and max over every host's gaps together.
    """
    by_host: dict[str, list[dict]] = {}
    for m in metas:
        if m.get("status", "complete") != "complete":
            continue
        if not all(isinstance(m.get(k), (int, float)) for k in ("started_at", "ended_at")):
            continue
        by_host.setdefault(str(m.get("host") or ""), []).append(m)
    rows = []
    for host, ms in sorted(by_host.items()):
        ms = sorted(ms, key=lambda m: m["started_at"])
        for a, b in zip(ms, ms[1:]):
            rows.append(
                {
                    "host": host,
                    "after": a.get("block"),
                    "before": b.get("block"),
                    "gap_s": round(b["started_at"] - a["ended_at"], 3),
                }
            )
    if not rows:
        return None
    values = [r["gap_s"] for r in rows]
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 3),
        "max_s": max(values),
        "cooldown_s": float(cooldown_s),
        "excess_s": float(excess_s),
        "over": sum(v > cooldown_s + excess_s for v in values),
        "gaps": rows,
    }


def findings(gaps: dict | None) -> list[Finding]:
    """One finding when some gap exceeds the cooldown by more than the rule's excess (module docstring)."""
    if not gaps or not gaps["over"]:
        return []
    return [Finding(K.GAPS, Gaps(**{k: gaps[k] for k in ("n", "over", "median_s", "max_s", "cooldown_s", "excess_s")}))]
