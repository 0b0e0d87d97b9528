"""Many users at once: the load workloads' section, from stats.json's `load` (bracket.stats.results.load).

Per load workload: the capacity sentence under the stated SLO, throughput against per-user speed (the Pareto view)
with intervals over blocks, the levels' throughput and goodput, the tail table (TTFT, TPOT, ITL at p50, p90, p99),
the per-level verdicts against the reference, the speculation gain per level, the batch ceiling beside the measured
aggregate where it is known, the levels left out because the client fell behind, and every block's values.
Reads the typed results' attributes only.
"""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Bullets, Figure, Heading, Para, Section, Table
from bracket.article.figures import _figure_setup, _save
from bracket.article.inputs import Data
from bracket.article.text import DASH, interval, ratio, span
from bracket.stats.results.load import WorkloadLoad

__all__ = ["section_load", "figure_load_pareto", "level_words", "capacity_sentence"]

TAILS = ("ttft", "tpot", "itl")
QUANTILES = ("p50", "p90", "p99")
# The driver's codes for a level it left out, as the article says them.
REASONS = {
    "client_behind": "the client fell behind its schedule",
    "client_cpu_saturated": "the client's CPU was saturated",
    "no_steady_requests": "no request ran inside the steady window",
}


def level_words(level: float, kind: str) -> str:
    """A level as a reader says it: "4 users" or "2.5 requests/s"."""
    n = f"{level:g}"
    if kind == "users":
        return f"{n} user" + ("" if level == 1 else "s")
    return f"{n} requests/s"


def _iv(ld: WorkloadLoad, arm: str, level: float, metric: str):
    return next((i for i in ld.intervals if i.arm == arm and i.level == level and i.metric == metric), None)


def _with_ci(iv, scale: float = 1.0, digits: int = 1) -> str:
    """ "centre (low–high)" of an interval, scaled (1e3: seconds as milliseconds); n/a where there is none."""
    if iv is None:
        return "n/a"
    c = f"{iv.center * scale:.{digits}f}"
    if iv.low is None or iv.high is None:
        return f"{c} (one block)"
    return f"{c} ({span(iv.low * scale, iv.high * scale, digits)})"


def _arms(ld: WorkloadLoad) -> list[str]:
    seen = {b.arm for b in ld.blocks}
    ordered = [ld.reference, *sorted(seen - {ld.reference})]
    return [a for a in ordered if a in seen]


def _levels(ld: WorkloadLoad) -> list[float]:
    return sorted({b.level for b in ld.blocks})


def capacity_sentence(ld: WorkloadLoad, arm: str) -> str:
    """The capacity answer of `arm` in one sentence, or why there is none."""
    c = next((c for c in ld.capacity if c.arm == arm), None)
    if ld.slo is None:
        return f"{arm}: no SLO is stated, so no capacity is given (set the workload's load.slo)."
    if c is None:
        return f"{arm}: no level has an interval, so the capacity is undetermined."
    lw = lambda x: level_words(x, ld.level_kind)  # noqa: E731
    undetermined = [s for s in c.levels if s.status == "undetermined"]
    first = c.levels[0] if c.levels else None
    if c.low is None and (first is None or first.status == "fails"):
        why = f" ({lw(first.level)} fails)" if first else ""
        return f"{arm}: no level run meets the SLO{why}; the capacity lies below the lowest level run."
    if c.low is None:
        why = "; ".join(_why_undetermined(ld, arm, s) for s in undetermined)
        upper = f"below {lw(c.high)}" if c.high is not None else "anywhere in the levels run"
        return f"{arm}: undetermined, {upper}: {why}; more rounds would decide."
    if c.determined and c.high is None:
        return (
            f"{arm}: the highest level meeting the SLO is {lw(c.low)}, the highest level run: the limit lies beyond "
            f"the levels run."
        )
    if c.determined:
        return f"{arm}: the highest level meeting the SLO is {lw(c.low)} (between {lw(c.low)} and {lw(c.high)})."
    open_end = lw(c.high) if c.high is not None else "beyond the levels run"
    why = "; ".join(_why_undetermined(ld, arm, s) for s in undetermined)
    return f"{arm}: undetermined between {lw(c.low)} and {open_end}: {why}; more rounds would decide."


def _why_undetermined(ld: WorkloadLoad, arm: str, s) -> str:
    """Why a level is undetermined: its interval straddles the limit, or it has none."""
    where = level_words(s.level, ld.level_kind)
    iv = _iv(ld, arm, s.level, s.limiting) if s.limiting else None
    if iv is None or iv.low is None or iv.high is None:
        return (
            f"at {where} {s.limiting or 'the bound quantile'} has no interval (fewer than two valid blocks, or "
            f"too few requests in a block for the quantile)"
        )
    return f"at {where} the interval of {s.limiting} ({_with_ci(iv, 1e3)} ms) straddles its limit"


def figure_load_pareto(d: Data, ld: WorkloadLoad) -> Figure | None:
    """Aggregate throughput against per-user decode rate, one line per arm through its levels, each point's
    intervals over blocks as bars and the throughput's as a band."""
    arms = _arms(ld)
    pts = []
    for arm in arms:
        for lv in _levels(ld):
            x, y = _iv(ld, arm, lv, "decode_rate_p50"), _iv(ld, arm, lv, "throughput_tok_s")
            if x is not None and y is not None:
                pts.append((arm, lv, x, y))
    if not pts:
        return None
    plt, sns = _figure_setup()
    colours = dict(zip(arms, sns.color_palette("colorblind", len(arms))))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for arm in arms:
        mine = sorted((p for p in pts if p[0] == arm), key=lambda p: p[2].center)
        if not mine:
            continue
        xs = [p[2].center for p in mine]
        ys = [p[3].center for p in mine]
        lo = [p[3].low if p[3].low is not None else p[3].center for p in mine]
        hi = [p[3].high if p[3].high is not None else p[3].center for p in mine]
        ax.fill_between(xs, lo, hi, color=colours[arm], alpha=0.2, lw=0)
        xerr = [
            [max(0.0, p[2].center - (p[2].low if p[2].low is not None else p[2].center)) for p in mine],
            [max(0.0, (p[2].high if p[2].high is not None else p[2].center) - p[2].center) for p in mine],
        ]
        yerr = [[max(0.0, y - a) for y, a in zip(ys, lo)], [max(0.0, b - y) for y, b in zip(ys, hi)]]
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, fmt="o-", color=colours[arm], label=arm, capsize=3, ms=4)
        for p in mine:
            ax.annotate(f"{p[1]:g}", (p[2].center, p[3].center), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("per-user decode rate, median over requests (tokens/s)")
    ax.set_ylabel("aggregate throughput (tokens/s)")
    ax.legend(frameon=False, fontsize=8)
    unit = "users" if ld.level_kind == "users" else "requests/s"
    return Figure(
        _save(fig, d, f"load_pareto_{ld.workload}"),
        f"Throughput against per-user speed, {ld.workload}",
        f"Each point one level (labelled in {unit}), its centre over blocks; bars and band: "
        f"{ld.confidence:.0%} intervals over blocks (none where a level has one valid block). Up and to the right is "
        f"better.",
    )


def _levels_table(ld: WorkloadLoad) -> Table:
    rows = []
    for arm in _arms(ld):
        for lv in _levels(ld):
            ceil = next((c for c in ld.ceilings if c.arm == arm and c.level == lv), None)
            row = {
                "arm": arm,
                "level": level_words(lv, ld.level_kind),
                "throughput tok/s": _with_ci(_iv(ld, arm, lv, "throughput_tok_s")),
                "per-user tok/s (p50)": _with_ci(_iv(ld, arm, lv, "decode_rate_p50")),
                "requests/s": _with_ci(_iv(ld, arm, lv, "request_rate"), digits=2),
            }
            if ld.slo is not None:
                row["goodput requests/s"] = _with_ci(_iv(ld, arm, lv, "goodput_req_s"), digits=2)
                row["share meeting SLO"] = _with_ci(_iv(ld, arm, lv, "goodput_fraction"), scale=100, digits=0)
            if ld.ceilings:
                row["batch ceiling tok/s"] = f"{ceil.ceiling_tok_s:.1f}" if ceil else "n/a"
                row["of ceiling"] = f"{100 * ceil.efficiency:.0f}%" if ceil and ceil.efficiency is not None else "n/a"
            rows.append(row)
    return Table(
        pd.DataFrame(rows),
        f"{ld.workload}: aggregate throughput over the steady window, per-user decode rate, request rate"
        + (" and goodput (requests meeting the SLO themselves, per second, and their share in %)" if ld.slo else "")
        + f"; centre and {ld.confidence:.0%} interval over blocks.",
        csv=f"load_{ld.workload}_levels.csv",
    )


def _tail_table(ld: WorkloadLoad) -> Table:
    rows = []
    for arm in _arms(ld):
        for lv in _levels(ld):
            row = {"arm": arm, "level": level_words(lv, ld.level_kind)}
            for t in TAILS:
                for q in QUANTILES:
                    row[f"{t.upper()} {q} ms"] = _with_ci(_iv(ld, arm, lv, f"{t}_{q}"), scale=1e3)
            rows.append(row)
    return Table(
        pd.DataFrame(rows),
        f"{ld.workload}: tail latencies in milliseconds over the steady window, each block's quantile "
        f"({ld.quantile_method}) then the centre and {ld.confidence:.0%} interval over blocks; n/a where a block "
        f"holds too few requests for the quantile (fewer than {ld.min_tail:g} expected beyond it).",
        csv=f"load_{ld.workload}_tails.csv",
    )


def _verdicts(ld: WorkloadLoad) -> Table | None:
    if not ld.verdicts:
        return None
    rows = [
        {
            "candidate": v.candidate,
            "level": level_words(v.level, ld.level_kind),
            "metric": v.metric,
            "ratio": ratio(v.ratio),
            "interval": interval(v.ci_low, v.ci_high, 2),
            "verdict": v.verdict,
            "rounds needed": v.rounds_needed if v.verdict == "undetermined" and v.rounds_needed else "",
        }
        for v in ld.verdicts
    ]
    return Table(
        pd.DataFrame(rows),
        f"{ld.workload}: each arm against {ld.reference} at each level, as a rate (a latency as its reciprocal, so "
        f"above 1 is better), with its interval adjusted across the levels of each metric.",
        csv=f"load_{ld.workload}_verdicts.csv",
    )


def _gains(ld: WorkloadLoad) -> Table | None:
    if not ld.gains:
        return None
    rows = [
        {
            "speculative arm": g.speculative,
            "level": level_words(g.level, ld.level_kind),
            "metric": "per-user decode rate" if g.metric == "decode_rate_p50" else "aggregate throughput",
            "gain": ratio(g.ratio),
            f"{g.confidence:.0%} interval": interval(g.ci_low, g.ci_high, 2),
            "verdict": g.verdict,
        }
        for g in ld.gains
    ]
    return Table(
        pd.DataFrame(rows),
        f"{ld.workload}: the speculation gain against concurrency: speculative / {ld.reference} per level.",
        csv=f"load_{ld.workload}_gains.csv",
    )


def _invalid(ld: WorkloadLoad) -> Para | Bullets:
    if not ld.invalid_levels:
        return Para("The client kept up at every level of every block: no level was left out.", "note")
    items = []
    for b in sorted(ld.invalid_levels, key=lambda b: (b.arm, b.block, b.level)):
        r = b.invalid_reason if hasattr(b.invalid_reason, "get") else {"code": b.invalid_reason}
        code = str(r.get("code") or "unknown")
        numbers = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items() if k != "code")
        items.append(
            f"{b.arm}, block {b.block}, {level_words(b.level, ld.level_kind)}: invalid, "
            f"{REASONS.get(code, code)} ({code}{': ' + numbers if numbers else ''}); left out of every statistic."
        )
    return Bullets(tuple(items))


def _raw(ld: WorkloadLoad) -> Table:
    metrics = sorted({m for b in ld.blocks for m in b.values})
    rows = []
    for b in sorted(ld.blocks, key=lambda b: (b.arm, b.level, b.block)):
        row = {
            "arm": b.arm,
            "block": b.block,
            "level": f"{b.level:g}",
            "order in block": "" if b.level_position is None else int(b.level_position),
            "valid": "yes" if b.valid else "no",
            "window s": f"{b.window_s:.2f}",
            "steady requests": b.n_steady,
        }
        for m in metrics:
            v = b.values.get(m)
            row[m] = "" if v is None else f"{v:.4g}"
        rows.append(row)
    return Table(
        pd.DataFrame(rows),
        f"{ld.workload}: every block's value at every level (times in seconds, rates per second): what each interval "
        f"above is taken over.",
        csv=f"load_{ld.workload}_blocks.csv",
    )


def _ceiling_para(ld: WorkloadLoad) -> Para:
    if ld.ceilings:
        return Para(
            "The batch ceiling is the bandwidth-bound aggregate: the batch times one token per decode step, a step "
            "reading the model's bytes once for the whole batch (bytes per step / bandwidth); the table puts it "
            "beside the measured throughput.",
            "note",
        )
    return Para(
        "The batch ceiling is not drawn: the bandwidth or the bytes a decode step reads are unknown for this run "
        "(set hardware.bandwidth_gbps and a model with a byte account).",
        "note",
    )


def _one(d: Data, ld: WorkloadLoad) -> list:
    levels = ", ".join(level_words(x, ld.level_kind) for x in _levels(ld))
    slo = ld.slo
    slo_words = (
        "no SLO is stated"
        if slo is None
        else "the SLO is "
        + " and ".join(
            f"p{100 * slo.quantile:g} {name} <= {1e3 * lim:g} ms"
            for name, lim in (("TTFT", slo.ttft_s), ("TPOT", slo.tpot_s))
            if lim is not None
        )
    )
    n_blocks = len({(b.arm, b.block) for b in ld.blocks})
    items = [
        Heading(f"Many users at once: {ld.workload}", 3),
        Para(
            f"{'Closed loop' if ld.level_kind == 'users' else 'Open loop'} at {levels}; every block a fresh server "
            f"that ran every level ({n_blocks} blocks), the levels' order rotated across blocks; only each level's "
            f"steady window counts; {slo_words}."
        ),
        Bullets(tuple(capacity_sentence(ld, a) for a in _arms(ld))),
        figure_load_pareto(d, ld),
        _levels_table(ld),
        _ceiling_para(ld),
        _tail_table(ld),
        _verdicts(ld),
        _gains(ld),
        _invalid(ld),
        _raw(ld),
    ]
    return items


def section_load(d: Data) -> Section | None:
    """The load workloads' section; None where the experiment has none."""
    loads = d.results.load
    if not loads:
        return None
    s = Section().add(
        Heading("Many users at once"),
        Para(
            f"Each load workload runs its levels of concurrent users (or request rates) in every block. Intervals are "
            f"over blocks{DASH}the fresh servers{DASH}at {loads[0].confidence:.0%}; a level meets the SLO when both "
            f"its tail intervals lie under their limits, fails when one lies wholly above, and is undetermined "
            f"otherwise."
        ),
    )
    for ld in loads:
        s.add(*_one(d, ld))
    return s
