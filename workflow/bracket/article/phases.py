"""TTFT apart from decode, per arm and workload, and the server state each arm ran with.

The decode rate (completion tokens over the request's wall time) carries the time to the first
token, and with it whatever the server does before a request's prefill: a prompt cache saved
per task, a prefix cache that engages, graphs captured late. The table shows each arm's TTFT and
its decode-phase rate (first to last token) beside the request-level decode rate, all from
stats.json's `phases` (bracket.stats.phases); the sentences are made here from its numbers.
"""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import _missing, pct, rate, ratio, span


def _ms(x) -> str:
    return "n/a" if _missing(x) else f"{1000 * x:.1f}"


def _with_ci(value: str, lo, hi, digits: int = 1, scale: float = 1.0) -> str:
    if _missing(lo) or _missing(hi):
        return value
    return f"{value} ({span(scale * lo, scale * hi, digits)})"


def phase_table(d: Data) -> pd.DataFrame:
    """One row per arm and workload: TTFT, tg and decode rate with CIs, and their ratios to the reference."""
    ph = d.results.phases
    rows = []
    for r in ph.rows if ph else ():
        where = {True: "TTFT", False: "decode", None: ""}[r.in_ttft]
        ref = r.arm == d.reference
        if ref:
            where = "reference"
        rows.append(
            {
                "workload": r.workload,
                "arm": r.arm,
                "runs": r.n,
                "TTFT ms (CI)": _with_ci(_ms(r.ttft_s), r.ttft_ci_low, r.ttft_ci_high, 1, 1000.0),
                "TTFT vs reference (CI)": ""
                if ref
                else _with_ci(ratio(r.ttft_ratio), r.ttft_ratio_ci_low, r.ttft_ratio_ci_high, 2),
                "decode phase tg tok/s (CI)": _with_ci(rate(r.tg_tok_s), r.tg_ci_low, r.tg_ci_high),
                "tg vs reference": "" if ref else ratio(r.tg_ratio),
                "decode rate tok/s (CI)": _with_ci(rate(r.decode_tok_s), r.decode_ci_low, r.decode_ci_high),
                "decode rate vs reference": "" if ref else ratio(r.decode_ratio),
                "TTFT share of wall time": pct(r.ttft_share),
                "difference lives in": where,
                "_in_ttft": r.in_ttft is True,
            }
        )
    return pd.DataFrame(rows)


def section_phases(d: Data) -> Section | None:
    """The TTFT / decode split; None for stats.json without `phases` (older files, tables without TTFT)."""
    ph = d.results.phases
    t = phase_table(d)
    if not ph or t.empty:
        return None
    s = Section([Heading("Time to first token apart from decode", 3)])
    margin = ph.margin
    s.add(
        Para(
            "The decode rate counts the whole request, so it carries the time to the first token and whatever "
            "the server does before a prefill (a prompt cache saved per task, a prefix cache that engages). "
            "Beside it: TTFT, and the decode phase alone (tg = (tokens - 1) / (last token - first token), "
            "llama-benchy's definition). Ratios are each arm's over the reference, from block medians with "
            f"their CI. An arm's difference is said to live in TTFT when its TTFT ratio lies more than "
            f"{pct(margin, 0)} further from 1 than its tg ratio does (|ln TTFT ratio| > |ln tg ratio| + "
            f"ln(1 + {margin:g}), analysis.phase_margin) and the TTFT ratio's CI excludes 1."
        )
    )
    flagged = t[t["_in_ttft"]]
    if flagged.empty:
        s.add(
            Para(
                "No arm's TTFT moved further from the reference than its decode phase did by more than that "
                "margin: the decode rates above compare decoding, not server state."
            )
        )
    else:
        cells = ", ".join(
            f"{r['arm']} on {r['workload']} (TTFT {r['TTFT vs reference (CI)']}, tg {r['tg vs reference']},"
            f" decode rate {r['decode rate vs reference']})"
            for _, r in flagged.iterrows()
        )
        s.add(
            Para(
                f"The difference lives in TTFT, not in decode, for {cells}: read the tg ratio for the decode "
                "effect, and the arms table's server state for what else differed between the arms.",
                "warn",
            )
        )
    s.add(Table(t, "TTFT, decode phase and decode rate per arm (median, CI)", "phases.csv"))
    return s


STATE_WORDS = {"off": "off", "on": "on", "partly": "partly on", "unknown": "unknown"}


def state_words(state: dict | None) -> str:
    """A server's state between requests in words: "prefix cache off (--no-cache-prompt ...); CUDA graphs ..."."""
    if not state:
        return "not recorded"
    words = f"prefix cache {STATE_WORDS.get(state.get('prefix_cache'), state.get('prefix_cache'))}"
    if state.get("how"):
        words += f" ({'; '.join(state['how'])})"
    if state.get("graphs"):
        words += f"; CUDA graphs {state['graphs']}"
    return words


def arm_state(d: Data, arm: str) -> str:
    """The server state an arm's blocks ran with, as stats.json's provenance states it (the blocks' own
    `server_state`, or for blocks measured before bracket recorded it, the engine adapter's reading of their launch
    command: bracket.stats.provenance.server_state). Where an arm's blocks differ, each state is listed."""
    rec = next((a for a in d.provenance.get("arms") or [] if a.get("arm") == arm), {})
    states = list(dict.fromkeys(state_words(st) for st in rec.get("states") or []))
    if not states:
        return "no block ran"
    return states[0] if len(states) == 1 else "differed between blocks: " + " | ".join(states)
