"""The decode ceiling: byte account, efficiency and the precision hypotheses."""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import TIMES, pct, rate, size
from bracket.stats.findings import FindingKind
from bracket.stats.results import ByteAccount, CeilingRecord, Hypothesis, Json, Physics

READ_EVERY_TOKEN = {
    "backbone": "yes",
    "embedding": "one row per token",
    "output": "yes",
    "vision": "only with images",
    "mtp": "only with MTP speculation on",
    "other": "no (audio and other encoders)",
}
COMPONENT_NAMES = {
    "backbone": "Language backbone",
    "embedding": "Token embedding",
    "output": "Output layer",
    "vision": "Vision tower",
    "mtp": "MTP head",
    "other": "Other encoders",
}


def byte_account(weights: ByteAccount) -> pd.DataFrame:
    """Component, size, and whether a text token reads it (seed 000's table)."""
    tied = weights.tied_embeddings
    rows = []
    for comp, nbytes in (weights.components or {}).items():
        if not nbytes:
            continue
        read = READ_EVERY_TOKEN.get(comp, "?")
        if comp == "embedding" and tied:
            read = "yes (tied: it is also the output layer)"
        rows.append(
            {
                "Component": COMPONENT_NAMES.get(comp, comp),
                "Size": size(nbytes),
                "Read every token?": read,
                "bytes": int(nbytes),
            }
        )
    return pd.DataFrame(rows, columns=["Component", "Size", "Read every token?", "bytes"])


#: The words for each regime of bracket.stats.efficiency.regime.
REGIME_WORDS = {
    "above the ceiling": "above the ceiling: more than one token per weight read, which only speculative decoding "
    "(or a wrong byte count) can do",
    "bandwidth-bound": "bandwidth-bound: the clock mostly measures how long it takes to read the weights",
    "partly bandwidth-bound": "a large share of each token's time goes to something other than reading weights",
    "far below": "far below the ceiling: the time goes to scheduling, sampling and framework overhead, "
    "not to reading weights, so bandwidth is not what limits this model on this machine",
}


def physics(d: Data) -> Physics | None:
    """stats.json's `physics`: the analysis's measurement against the ceiling (for a file written before
    it existed, bracket.stats.contract fills it in when the article reads the file); None where neither a
    ceiling nor a byte account was given."""
    return d.results.physics


def efficiency_table(d: Data) -> pd.DataFrame:
    """Measured median of each arm without speculation against the plain ceiling, per workload."""
    p = physics(d)
    order = {(wl, a): (i, j) for i, wl in enumerate(d.workloads) for j, a in enumerate(d.arms)}
    rows = sorted(
        (r for r in (p.efficiency if p else ()) if (r.workload, r.arm) in order),
        key=lambda r: order[(r.workload, r.arm)],
    )
    return pd.DataFrame(
        [
            {
                "workload": r.workload,
                "arm": r.arm,
                "median tok/s": rate(r.median),
                "ceiling tok/s": rate(r.ceiling_tok_s),
                "of the ceiling": pct(r.efficiency, 0),
                "implied GB/s": f"{r.implied_gbps:.2f}",
                "_efficiency": r.efficiency,
                "_median": r.median,
            }
            for r in rows
        ]
    )


def hypotheses(d: Data) -> tuple[float | None, tuple[Hypothesis, ...]]:
    """The reference's median (across workloads) and seed 000's hypotheses evaluated at it."""
    p = physics(d)
    if p is None:
        return None, ()
    return p.reference_median, (p.hypotheses if p.reference_median else ())


def hypotheses_table(d: Data) -> pd.DataFrame:
    """Seed 000's "bandwidth, not logs" table for the reference's median (across workloads)."""
    measured, hyp = hypotheses(d)
    rows = []
    for h in hyp:
        rows.append(
            {
                "Assumption": h.name,
                "Bytes per token": size(h.bytes_per_token),
                "Ceiling tok/s": rate(h.ceiling_tok_s),
                f"Measured {rate(measured)} is": pct(h.efficiency, 0),
                "Physically possible?": "yes" if h.possible else "no: falsified",
            }
        )
    return pd.DataFrame(rows)


def section_ceiling_unknown(w: ByteAccount, c: CeilingRecord) -> Section:
    """No headers were found: the ceiling is unknown; say why and which key would give it."""
    s = Section([Heading("The ceiling is unknown: no byte account of the model")])
    reason = w.reason or c.reason or "no tensor headers of the model were found"
    key = w.key or c.key or "engine.model"
    s.add(
        Para(
            "Every token a model emits requires reading the weights it uses from memory, so single-stream "
            "decoding has a physical ceiling: bandwidth " + TIMES + " bytes read per token. The bytes come "
            "from the model's tensor headers, and none could be read for this experiment, so the ceiling is "
            "unknown and the measured rates below stand without it."
        )
    )
    s.add(Para(f"Why: {reason}.", "warn"))
    s.add(
        Para(
            f"To get it, set {key}; bracket reads the headers from a local directory or .gguf file, the "
            "local Hugging Face cache for a hub id, a container path mapped through engine.docker.volumes, "
            "or the hub itself where it is reachable. `bracket weights DIR` prints the account for any "
            "directory."
        )
    )
    bw = c.bandwidth_gbps
    if bw:
        s.add(
            Para(
                f"Memory bandwidth was found ({gbps(bw)} GB/s); with the bytes per token, the ceiling would be "
                f"{gbps(bw)} GB/s {TIMES} bytes per token.",
                "note",
            )
        )
    return s


def gbps(bw: float) -> str:
    """A bandwidth as written: four significant figures (27.93, 217.5, 4800), whole numbers from 10,000."""
    return f"{bw:.4g}" if bw < 10_000 else f"{bw:,.0f}"


def machine_steadiness(m: Json, threshold: float | None, moved: bool) -> Para | None:
    """How steady the machine's memory was before the blocks (bracket.physics.steadiness); a warning where the
    analysis found it moved (a "machine" finding) as much as `threshold` (analysis.spread_warning)."""
    if not m:
        return None
    return Para(
        f"Before the blocks, with no server running, this machine's memory copy rate ranged "
        f"{m['low_gbps']:.1f}–{m['high_gbps']:.1f} GB/s between {m['window_s']:g} s windows over "
        f"{m['seconds']:g} s ({pct(m['spread'])} of its median)"
        + (
            ": a server's runs and blocks on this machine can differ by as much for the machine's sake alone."
            if moved
            else f", under the {pct(threshold, 0)} at which bracket warns."
            if threshold is not None
            else "."
        ),
        "warn" if moved else "",
    )


def section_ceiling(d: Data) -> Section | None:
    p = physics(d)
    w = p.weights if p else None
    if w is None or not w.model_fields_set:  # no byte account (an empty one says nothing either)
        return None
    c = p.ceiling or CeilingRecord()
    if w.status == "unknown" or not w.bytes_per_token:
        return section_ceiling_unknown(w, c)
    bpt, bw, ceil = w.bytes_per_token, c.bandwidth_gbps, c.ceiling_tok_s
    head = (
        f"{gbps(bw)} GB/s {TIMES} {size(bpt)} = {ceil:.2f} tok/s: the ceiling, computed before any measurement"
        if ceil
        else "The byte account"
    )
    s = Section([Heading(head)])
    s.add(
        Para(
            "Every token a model emits requires reading the weights it uses from memory. That gives "
            "single-stream decoding a hard physical ceiling: bandwidth " + TIMES + " bytes read per token = "
            "tokens per second. The denominator comes from the tensor headers, not the file size: parts a "
            "text token never reads are left out, and the embedding table counts one row per token."
        )
    )
    acct = byte_account(w)
    s.add(
        Table(
            acct.drop(columns="bytes"),
            f"Byte account of {w.model if 'model' in w.model_fields_set else 'the model'}, from tensor headers",
            "byte_account.csv",
        )
    )
    stored = w.stored_bytes or acct["bytes"].sum()
    if stored and abs(stored - bpt) > 0.005 * stored:
        s.add(Para(f"The denominator for text-only work is {size(bpt)}, not the {size(stored)} stored."))
    else:
        s.add(
            Para(
                f"A text token reads {size(bpt)}: everything stored"
                + (
                    ", because the output layer is the embedding matrix itself (tied), read in full once."
                    if w.tied_embeddings
                    else "."
                )
            )
        )
    for note in w.notes or ():
        s.add(Para(f"Note from the account: {note}", "note"))
    if not ceil:
        src = (c.bandwidth_source or {}).get("detail", "")
        return s.add(
            Para(
                f"No memory bandwidth was stated or measured ({src}), so there is no ceiling to "
                f"compare against: set hardware.device or hardware.bandwidth_gbps."
            )
        )
    src = c.bandwidth_source or {}
    src_text = {
        "user": "stated in the experiment (hardware.bandwidth_gbps)",
        "table": f"from the datasheet table: {src.get('citation') or src.get('source') or ''}",
        "probe": f"measured by a copy probe: {src.get('method', '')}",
    }.get(src.get("kind"), src.get("detail", ""))
    s.add(Para(f"Memory bandwidth: {gbps(bw)} GB/s, {src_text.strip().rstrip(':')}."))
    moved = any(f.kind == FindingKind.MACHINE for f in d.results.findings)
    steady = machine_steadiness(c.machine_steadiness, d.results.spread_warning, moved)
    if steady:
        s.add(steady)
    s.add(
        Para(
            f"{gbps(bw)} GB/s {TIMES} {size(bpt)} = {ceil:.2f} tok/s. That's the wall for this model on this machine "
            f"without speculative decoding."
        )
    )
    s.add(*measured_items(d))
    s.add(*precision_items(d))
    return s


def measured_items(d: Data) -> list:
    """The measured medians against the ceiling: the reference's reading, arms above it, the table."""
    out: list = []
    p = physics(d)
    eff = efficiency_table(d)
    if not eff.empty:
        ref = p.reference_reading
        if ref:
            out.append(Heading(f"Measured: {rate(ref.median)} tok/s, or {pct(ref.efficiency, 0)} of the ceiling", 3))
            out.append(
                Para(
                    f"The reference, {d.label(d.reference)}, as the median of its workloads' medians: "
                    f"{REGIME_WORDS[ref.regime]}."
                )
            )
            if ref.spread is not None:
                each = ", ".join(f"{x.workload} {rate(x.median)}" for x in ref.workloads)
                out.append(
                    Para(
                        f"Across workloads the reference's medians differ by {pct(ref.spread)} ({each}). "
                        + (
                            "That flatness is itself evidence: compute-bound throughput moves when the work "
                            "changes; a rate set by the weight read doesn't."
                            if ref.flat
                            else "The rate moves with the work, so something other than the weight read sets it."
                        )
                    )
                )
        if p.above_ceiling:
            out.append(
                Para(
                    "An arm without speculation above the ceiling cannot be: check the byte account and the "
                    "bandwidth before believing either number.",
                    "warn",
                )
            )
        if any(a.speculative for a in d.results.experiment.arms if a.arm in d.arms):
            out.append(
                Para(
                    "Speculative arms are left out of this table: one weight read verifies several drafted "
                    "tokens, so they are not bound by this ceiling; their section below reads tokens per step.",
                    "note",
                )
            )
        out.append(Table(eff, "Measured medians against the ceiling", "efficiency.csv"))
    return out


def precision_items(d: Data) -> list:
    """Seed 000's precision hypotheses: the ceiling under each way of reading the weights."""
    out: list = []
    hyp = hypotheses_table(d)
    if not hyp.empty:
        out.append(Heading("Is the engine reading the weights at their stored width? Bandwidth, not logs", 3))
        out.append(
            Para(
                "If the engine secretly widened the weights before the math, it would read more bytes per "
                "token, and the ceiling would fall. A hypothesis whose ceiling lies below the measured rate "
                "is physically impossible."
            )
        )
        out.append(Table(hyp, "Ceilings under each precision hypothesis", "precision_hypotheses.csv"))
        if len(set(hyp["Bytes per token"])) == 1:
            out.append(
                Para(
                    "Here the weights are stored at 16 bits or wider, so the three hypotheses read the same "
                    "bytes: this check cannot tell them apart on this model.",
                    "note",
                )
            )
    return out
