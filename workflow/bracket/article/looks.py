"""The article's account of an adaptive design: the stopping rule, each look, when each question settled.

Reads `sequential` of stats.json (bracket.stats.sequential.assess on the runs); nothing is
recomputed here.
"""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.verdicts import look_words
from bracket.stats.compare import WIDE
from bracket.stats.results import Sequential


def rule(seq: Sequential) -> str:
    """The stopping rule in words, from the plan stats.json's `sequential` records (alpha, family, first_look,
    max_rounds, margin); an older file's `rule` sentence as it was recorded."""
    if isinstance(seq.rule, str):
        return seq.rule
    alpha, m, margin = seq.alpha, seq.family, seq.margin
    within = f"+/-{margin:.1%}" if margin else f"+/-{WIDE:g} x its noise band"
    share = (
        f"spending {alpha:g} / {m} per comparison to begin with; when a comparison settles as "
        f"faster/slower its share passes to the others (Holm-type recycling in a group-sequential "
        f"design, Maurer & Bretz 2013), which are then judged at the larger level on every look so far"
        if m > 1
        else f"spending {alpha:g}"
    )
    return (
        f"After each round from {seq.first_look} to {seq.max_rounds}, each of the {m} "
        f"comparisons is judged on a repeated confidence interval (Jennison & Turnbull) at the "
        f"Lan-DeMets O'Brien-Fleming-type boundary, {share}: it settles as faster/slower when the "
        f"interval clears the noise band, as no measurable effect when the interval at "
        f"{alpha:g} / {m} (never recycled) lies within {within}; another round runs "
        f"while any comparison is open (every arm in every round, so the arms stay interleaved and drift "
        f"stays estimable), and at {seq.max_rounds} rounds the open ones are undetermined. "
        f"Over every look and comparison, the chance of any false faster/slower is at most "
        f"{alpha:g}, and so is the chance of any wrong no measurable effect."
    )


def _rci(lo, hi) -> str:
    """A ratio interval; an early look's interval can reach absurd values (one degree of freedom at a
    strict boundary): "unbounded" then."""
    if lo is None or hi is None:
        return ""
    return f"{lo:.3f}–{hi:.3f}" if 1e-3 <= lo and hi <= 1e3 else "unbounded"


def looks_table(seq: Sequential) -> pd.DataFrame:
    """One row per look: the round it followed, blocks so far, and each comparison's state at it."""
    keys = [(c.candidate, c.workload) for c in seq.comparisons]
    rows = []
    for look in seq.looks:
        row = {"after round": look.round, "blocks": look.blocks}
        for c, key in zip(seq.comparisons, keys):
            at = next((x for x in c.looks if x["round"] == look.round), None)  # a look's record (sequential.judge)
            if at is None:
                cell = f"settled ({c.verdict})" if c.settled_round and c.settled_round < look.round else ""
            else:
                ci = _rci(at.get("rci_low"), at.get("rci_high")) if at.get("rci_low") is not None else "no CI yet"
                cell = f"{at['verdict'] or 'open'}: {ci}"
            row[f"{key[0]} / {key[1]}"] = cell
        row["comparisons open after it"] = look.open
        if look.level is not None:
            row["level of each open comparison"] = f"{look.level:.4g}"
        rows.append(row)
    return pd.DataFrame(rows)


def settled_table(seq: Sequential) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "candidate": c.candidate,
                "workload": c.workload,
                "verdict": c.verdict or "open",
                "settled after round": c.settled_round or "",
                "repeated CI": _rci(c.rci_low, c.rci_high) if c.rci_low is not None else "",
                "nominal level": f"{c.nominal_level:.4%}" if c.nominal_level is not None else "",
                "alpha share": f"{c.level:.4g}" if c.level is not None else "",
                "how": look_words(c.how if c.how is not None else c.look),
            }
            for c in seq.comparisons
        ]
    )


def section_looks(d: Data) -> Section | None:
    """None unless the design was adaptive (stats.json `sequential`)."""
    seq = d.results.sequential
    if not seq:
        return None
    s = Section([Heading("When to stop: the looks of an adaptive design")])
    s.add(Para(rule(seq)))
    n_settled = sum(1 for c in seq.comparisons if c.status == "settled")
    stop = f"It stopped after round {seq.rounds_run}: " + (
        "every comparison had settled."
        if seq.rounds_run < seq.max_rounds and n_settled == len(seq.comparisons)
        else f"the budget of {seq.max_rounds} rounds was spent."
        if seq.rounds_run >= seq.max_rounds
        else f"{len(seq.comparisons) - n_settled} comparisons are still open (the run stopped early)."
    )
    m = seq.family
    alpha = seq.alpha
    recycle = (
        f" The {m} comparisons start at {alpha:g} / {m} each; when one settles as faster/slower its "
        f"share passes to the others (Holm-type recycling, Maurer & Bretz 2013), which are then judged at "
        f"the larger level on every look so far, so one decisive comparison makes the others easier to "
        f"settle. This keeps the chance of any false faster/slower, over every look and comparison, at "
        f'most {alpha:g}. "No measurable effect" is judged on the intervals at {alpha:g} / '
        f"{m}, never recycled (a comparison settled as faster has not ruled out an effect beyond the "
        f"margin), and those all cover the true ratios together with probability at least "
        f'{1 - alpha:.0%}: the chance of any wrong "no measurable effect" is also at most '
        f"{alpha:g}."
        if m > 1
        else f" The intervals cover the true ratio at every look together with probability at least "
        f'{1 - alpha:.0%}, so the chance of a wrong verdict (a false faster/slower, or "no measurable '
        f'effect" where the truth lies outside the margin) is at most {alpha:g}.'
    )
    s.add(
        Para(
            f"{stop} Each interval below is a repeated confidence interval, valid however many looks were "
            f"taken.{recycle} Early looks use wide intervals (O'Brien-Fleming-type spending keeps the alpha "
            f"for the end), so only large effects settle early."
        )
    )
    s.add(Table(looks_table(seq), "Each look: verdict or open, with the repeated CI of the ratio", "stats.json"))
    s.add(Table(settled_table(seq), "When each question settled", "stats.json"))
    return s
