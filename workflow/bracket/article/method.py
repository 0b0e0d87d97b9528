"""Method: the design as it ran, the requests, the schedule, the accelerator in each block, the arms, what failed,
the model and the analysis, as stats.json states them (`design_ran`, `sequential`, `experiment`, `provenance`,
`gaps`, `conservatism`). What served and where (engine, bracket, hardware, launch, cache check, weights) is
bracket.article.served's.

The records inside `provenance` and `experiment` that stats.json leaves untyped (`Json`: a block's record and
telemetry, an arm's launch, a failed attempt, the model's build record, the design and request as planned) are
read by key here; everything else by attribute (bracket.stats.results).
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
from collections.abc import Mapping

import pandas as pd

from bracket.article.advice import arm_flags
from bracket.article.elements import Heading, Para, Pre, Section, Table
from bracket.article.inputs import Data
from bracket.article.neutrality import section_items as neutrality_items
from bracket.article.phases import arm_state
from bracket.article.served import (
    cache_sentence,
    command,
    hardware_sentence,
    instrument_sentence,
    launch_sentence,
    model_hash_sentence,
    served_sentence,
)
from bracket.article.text import _missing, _n, pct, spec_words
from bracket.stats.results import DesignRan, Json, StatedArm
from bracket.stats.results.base import thaw


def _utc(t) -> str:
    if _missing(t) or t is None:
        return ""
    return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _blocks(d: Data) -> dict[int, Json]:
    """Each block as stats.json's provenance states it, by its number."""
    return {int(b["block"]): b for b in d.results.provenance.blocks if b.get("block") is not None}


def schedule_table(d: Data) -> pd.DataFrame:
    rows = []
    seq = d.results.sequential
    ran = max((x.blocks for x in seq.looks), default=None) if seq else None
    blocks = _blocks(d)
    for b in d.schedule.itertuples(index=False):
        if ran is not None and int(b.position) >= ran:
            continue  # an adaptive design's planned round that its looks did not ask for
        m = blocks.get(int(b.position))
        n = int((d.runs["position"] == b.position).sum()) if "position" in d.runs else 0
        rows.append(
            {
                "position": int(b.position),
                "arm": b.arm,
                "round": int(b.round),
                "seed": int(b.seed),
                "status": (m.get("status") or "not run") if m else "not run",
                "ready (s)": m.get("ready_s", "") if m else "",
                "started (UTC)": _utc(m.get("started_at")) if m else "",
                "server": m.get("server_id", "") if m else "",
                "requests": n,
            }
        )
    return pd.DataFrame(rows)


def _span3(x: Json, digits: int = 0) -> str:
    if not x:
        return ""
    lo, med, hi = (x.get(k) for k in ("min", "median", "max"))
    if lo == hi:
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f}–{med:.{digits}f}–{hi:.{digits}f}"


def telemetry_table(d: Data) -> pd.DataFrame:
    """Per block: what the accelerator did while it was measured (each block's NVML summary in stats.json's
    provenance)."""
    rows = []
    blocks = _blocks(d)
    for pos in sorted(blocks):
        m = blocks[pos]
        tel = m.get("telemetry")
        if not isinstance(tel, Mapping) or not tel.get("n"):
            continue
        power = tel.get("power_w") or {}
        rows.append(
            {
                "block": pos,
                "arm": m.get("arm"),
                "round": m.get("round"),
                "device": tel.get("name"),
                "samples": tel.get("n"),
                "SM clock MHz (min–median–max)": _span3(tel.get("sm_clock_mhz")),
                "memory clock MHz": _span3(tel.get("mem_clock_mhz")),
                "temperature °C (min–median–max)": _span3(tel.get("temp_c")),
                "power W, median (max)": f"{power['median']:.0f} ({power['max']:.0f})" if power else "",
                "GPU busy %, median": (tel.get("util_gpu_pct") or {}).get("median"),
                "throttle reasons": ", ".join(tel.get("throttle_reasons_seen") or []) or "none",
                "sm_min": (tel.get("sm_clock_mhz") or {}).get("min"),
                "sm_max": (tel.get("sm_clock_mhz") or {}).get("max"),
            }
        )
    return pd.DataFrame(rows)


def section_telemetry(d: Data) -> Section | None:
    """The accelerator's clocks, temperature and power in every block: drift that is the machine's."""
    t = telemetry_table(d)
    if t.empty:
        return None
    s = Section([Heading("The accelerator during each block", 3)])
    lo, hi = t["sm_min"].min(), t["sm_max"].max()
    busy = [r for r in t["throttle reasons"] if r not in ("none", "gpu_idle")]
    if lo == hi and not busy:
        s.add(
            Para(
                f"The SM clock held at {lo:.0f} MHz in every block, with no throttle reason other than idle: the "
                "differences between blocks are not the clock's."
            )
        )
    else:
        s.add(
            Para(
                f"The SM clock ranged {lo:.0f}–{hi:.0f} MHz across blocks"
                + (f", and the GPU reported throttling ({', '.join(sorted(set(busy)))})" if busy else "")
                + ": blocks ran at different speeds of the machine itself; read the drift section with this in "
                "mind.",
                "warn",
            )
        )
    s.add(
        Table(
            t.drop(columns=["sm_min", "sm_max"]), "NVML samples per block, taken while the block ran", "telemetry.csv"
        )
    )
    return s


def _x(span: tuple[float, ...], digits: int = 2) -> str:
    """A factor or its range: x1.12, or x1.05-1.43."""
    lo, hi = span
    return f"x{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"x{lo:.{digits}f}-{hi:.{digits}f}"


def conservatism_sentence(d: Data) -> str | None:
    """Where the comparisons' intervals get their width, against an oracle's that knew the noise (stats.json
    `conservatism`, bracket.stats.conservatism): every factor as it ran; None for a file without it."""
    c = d.results.conservatism
    if not c:
        return None
    conf = d.results.confidence
    df = c.df
    dfs = f"{df[0]:g}" if df[0] == df[1] else f"{df[0]:g}-{df[1]:g}"
    parts = [
        f"the t quantile on {dfs} degrees of freedom ({_x(c.df_factor)}: the noise is estimated "
        f"from the blocks and requests that ran, not known)"
    ]
    if c.level_factor[1] > 1.005:
        why = (
            "the adaptive design's repeated-CI boundary at its looks"
            if d.results.sequential
            else f"the multiplicity of {_n(m.comparisons if (m := d.results.multiplicity) else None, 'comparison')} "
            "(Holm)"
        )
        parts.append(
            f"the level each interval is drawn at, up to {pct(c.level[1], 2)} for {why} ({_x(c.level_factor)})"
        )
    if c.drift_fits:
        parts.append(
            f"the drift term in {c.drift_fits} of {c.comparisons} fits ({_x(c.drift_factor)}: time "
            "takes a degree of freedom and shares the arm's variance)"
        )
    pooled = c.pooled + c.floored
    if pooled and c.median_factor:
        rpb = c.runs_per_block
        runs = f"{rpb[0]:.0f}" if round(rpb[0]) == round(rpb[1]) else f"{rpb[0]:.0f}-{rpb[1]:.0f}"
        how = " and ".join(
            x
            for x in (
                f"{c.pooled} pooled block and request noise (blocks agreed within it)" if c.pooled else "",
                f"{c.floored} took request noise as the floor of a one-df block variance" if c.floored else "",
            )
            if x
        )
        parts.append(
            f"request noise's part of the variance where {how}: it is taken as (pi/2) sigma^2 / n, a "
            f"median's large-sample variance, which at {runs} runs per block is "
            f"{_x(c.median_factor)} a block median's variance under normal noise (at most "
            f"{_x([v**0.5 for v in c.median_factor])} on the width)"
        )
    head = (
        f"Where the comparisons' intervals get their width, against the {pct(conf, 0)} interval of an oracle "
        f"that knew how much servers and requests vary: "
        + "; ".join(parts)
        + f". Degrees of freedom, level and drift term together make the intervals {_x(c.total)} as wide "
        "as an oracle's."
    )
    if c.band_raised:
        head += (
            f" Besides, a verdict's interval must clear the noise band, which the fitted drift raised above the "
            f"{pct(c.threshold, 0)} threshold in {c.band_raised} of {c.comparisons} comparisons "
            f"(to {pct(c.band_max)} at most)."
        )
    if c.pooled:
        head += (
            " Each guards against a false verdict when blocks disagree more than they appear to; where they "
            "agree closely, as in the pooled fits here, the intervals cover the truth more often than they state "
            "(the H200 regime of bench/results/design_efficiency.md, section 2)."
        )
    return head


def gap_sentence(d: Data) -> str | None:
    """How far apart the blocks followed each other (stats.json `gaps`), against the design's cooldown."""
    g = d.results.gaps
    if not g:
        return None
    return (
        f"Blocks followed each other after a median gap of {g.median_s:.1f} s (max {g.max_s:.1f} s), "
        f"from one block's end to the next one's server start on its host; the design's cooldown is "
        f"{g.cooldown_s:g} s"
        + (f", and {g.over} of {g.n} gaps exceeded it by more than {g.excess_s:g} s." if g.over else ".")
    )


def _per_block(lo: int | None, hi: int | None, noun: str) -> str:
    """ "3 timed runs", or "2 to 3 timed runs" where a block ran short (stats.json's design_ran)."""
    return _n(hi, noun) if lo == hi else f"{lo} to {_n(hi, noun)}"


def _design_ran(d: Data) -> DesignRan:
    """What ran, counted in the runs (bracket.stats.design_ran); the plan only for a table without blocks."""
    if d.results.design_ran:
        return d.results.design_ran
    des = d.results.experiment.design
    return DesignRan.model_construct(
        rounds=des.rounds,
        runs_per_block_min=des.runs_per_block,
        runs_per_block_max=des.runs_per_block,
        warmup_runs_min=des.warmup_runs,
        warmup_runs_max=des.warmup_runs,
    )


def design_para(d: Data) -> Para:
    """The design as it ran: rounds (an adaptive design's looks), blocks, runs per block, cooldown, launch."""
    des = d.results.experiment.design
    seq, ran = d.results.sequential, _design_ran(d)
    first = (seq.first_look if seq.first_look is not None else des.min_rounds) if seq else None
    rounds = (
        f"adaptive: {_n(seq.rounds_run, 'round')} run of {first} to {des.max_rounds}, the first look "
        f"after round {first} (see the looks)"
        if seq
        else _n(ran.rounds, "round")
    )
    return Para(
        f"Design: {des.kind}, {rounds}, {len(schedule_table(d))} blocks in the order below, drawn "
        f"once with seed {des.seed} and recorded. Each block served one arm and ran, per workload, "
        f"{_per_block(ran.warmup_runs_min, ran.warmup_runs_max, 'warmup run')} and "
        f"{_per_block(ran.runs_per_block_min, ran.runs_per_block_max, 'timed run')}; "
        f"{des.cooldown_s} s of cooldown between blocks. " + launch_sentence(d)
    )


def request_para(d: Data) -> Para:
    """The request as the experiment set it (experiment.request)."""
    req = d.results.experiment.request
    return Para(
        f"Requests: max_tokens {req.max_tokens}, temperature {req.temperature}, seed "
        f"{req.seed}; "
        + (
            "each prompt carried a unique prefix, so the prefix cache could not engage. "
            if req.unique_prefix
            else "prompts were sent without a unique prefix, so the prefix cache could engage. "
        )
        + "Decode rate = completion_tokens / wall time of the request, never stream events."
    )


def arms_table(d: Data) -> pd.DataFrame:
    """Each arm: label, speculative settings, extra args, the flags as launched and the server state."""
    named = {a.arm: a for a in d.results.experiment.arms}
    kind = d.results.experiment.engine.kind
    rows = []
    for arm in d.arms:
        a = named.get(arm) or StatedArm(arm=arm)
        rows.append(
            {
                "arm": arm,
                "label": "" if "label" not in a.model_fields_set else a.label,
                "speculative": spec_words(a.speculative, kind),
                "extra args": shlex.join(a.args or ()),
                "flags as launched": arm_flags(d, arm),
                "server state": arm_state(d, arm),
            }
        )
    return pd.DataFrame(rows)


def what_ran_items(d: Data) -> list:
    """The arms, their launch commands, blocks that did not complete and failed attempts (stats.json's
    provenance)."""
    prov = d.results.provenance
    out: list = [
        Table(arms_table(d), "Arms, and the state each one's server kept between requests (as launched)", "arms.csv")
    ]
    if prov.arm_states_differ:
        out.append(
            Para(
                "The arms ran with different server state (the arms table's last column): their TTFT, and with it "
                "the decode rate, differ for that reason as well as for the arm's own.",
                "warn",
            )
        )
    launches = sorted(
        (a for a in prov.arms if a.get("launch") and a["launch"].get("argv")),
        key=lambda a: a["launch"].get("block") or 0,
    )
    for a in launches:
        out += [
            Para(f"Launch command of {a['arm']} (block {a['launch']['block']}):", "note"),
            Pre(command(a["launch"])),
        ]
    for b in prov.blocks:
        if b.get("status") not in (None, "complete"):
            out += [
                Para(f"Block {b.get('block')} ended with status {b.get('status')}; the last lines of its log:", "warn"),
                Pre(str(b.get("log_tail") or "")),
            ]
    attempts = prov.failed_attempts
    if attempts:
        out.append(
            Para(
                f"{len(attempts)} block attempt(s) failed and were run again in a fresh server; "
                "their records are kept beside the raw values but left out of every statistic:",
                "warn",
            )
        )
        rows = [
            {
                "block": m.get("block"),
                "arm": m.get("arm"),
                "records kept": m.get("records_kept"),
                "file": m.get("file"),
                "error": str(m.get("error") or m.get("status"))[:300],
            }
            for m in attempts
        ]
        out.append(Table(pd.DataFrame(rows), "Failed block attempts", "failed_attempts.csv"))
    return out


def model_items(d: Data) -> list:
    """Where the model's files were and, for a model built locally, its build record (build.json)."""
    model_dir = d.results.provenance.served and d.results.provenance.served.model_dir
    b = d.results.provenance.model_build
    if not (model_dir or b):
        return []
    out: list = [Heading("The model", 3)]
    if model_dir:
        out.append(Para(f"Its files: {model_dir}."))
    if b and "layers" in b:
        out.append(
            Para(
                f"Built locally (build.json): {b.get('layers')} layers, hidden {b.get('hidden')}, vocabulary "
                f"{b.get('vocab')}, {b.get('steps')} training steps of batch {b.get('batch')} x "
                f"{b.get('seq_len')} tokens at lr {b.get('lr')} on {b.get('corpus', 'its corpus')}, "
                + (
                    f"final loss {b['final_loss']:.2f}"
                    if isinstance(b.get("final_loss"), (int, float))
                    else "untrained (no final loss)"
                )
                + f", seed {b.get('seed')}, {b.get('build_seconds')} s "
                f"with torch {b.get('torch')}."
            )
        )
    elif b:
        out += [Para("Build record (build.json):"), Pre(json.dumps(thaw(b), indent=1))]
    return out


def analysis_para(d: Data) -> Para:
    """The analysis's settings: resamples, confidence, seed, noise threshold, spread warning."""
    r = d.results
    return Para(
        f"Analysis: medians with {r.resamples} bootstrap resamples "
        f"at {pct(r.confidence, 0)} confidence, analysis seed {r.seed} (each "
        f"statistic derives its own stream from it), noise threshold {pct(r.noise_threshold, 0)}, "
        f"spread warning above {pct(r.spread_warning, 0)}."
    )


def section_method(d: Data) -> Section:
    """How these numbers were taken: design, requests, the instrument's cost, the cache check, the schedule, the
    accelerator, what served and on what, the arms, what failed, the model and the analysis."""
    s = Section([Heading("How these numbers were taken"), design_para(d)])
    gaps = gap_sentence(d)
    if gaps:
        s.add(Para(gaps))
    s.add(request_para(d))
    s.add(*neutrality_items(d))
    cache = cache_sentence(d)
    if cache:
        s.add(Para(cache))
    s.add(Table(schedule_table(d), "The schedule as it ran", "schedule.csv"))
    tel = section_telemetry(d)
    if tel is not None:
        s.add(*tel.items)
    plat = d.results.provenance.served.platforms if d.results.provenance.served else ()
    s.add(Para(served_sentence(d) + (f" Platform: {', '.join(plat)}." if plat else "")))
    s.add(Para(instrument_sentence(d)))
    hw = hardware_sentence(d)
    if hw:
        s.add(Para(hw))
    served = model_hash_sentence(d.results.provenance.weights_served)
    if served:
        s.add(Para(served[0], served[1]))
    s.add(*what_ran_items(d), *model_items(d), analysis_para(d))
    width = conservatism_sentence(d)
    if width:
        s.add(Para(width))
    return s
