"""Recommendations: what to run, and its flags."""

from __future__ import annotations

import shlex

import pandas as pd

from bracket.article.elements import Heading, Para, Section, Table
from bracket.article.headline import aa_test, headline_rows
from bracket.article.inputs import Data
from bracket.article.text import rate, ratio, runs_phrase, spec_words
from bracket.stats.levels import Advice
from bracket.stats.results import Levels


def levels_words(lv: Levels) -> str:
    """What one cell's variance components (stats.json's `levels`, bracket.stats.levels) say to change; an older
    file's sentence as it was recorded."""
    advice, best, n, share = lv.advice, lv.best_runs_per_block, lv.runs_per_block, lv.between_share
    if advice == Advice.BLOCKS_AGREE:
        return (
            "blocks agree within run-to-run noise: runs within a block are as good as new "
            "blocks; keep the blocks you need to measure drift and add runs per block."
        )
    if advice == Advice.MORE_BLOCKS:
        return (
            f"{share:.0%} of the variance is between blocks: use more blocks with fewer "
            f"runs each (about {best} run{'s' if best > 1 else ''} per block; now {n:g}); "
            f"raise design.rounds."
        )
    if advice == Advice.MORE_RUNS:
        return (
            f"blocks differ little ({share:.0%} of the variance): more runs per block "
            f"(about {best}) buy a narrower CI more cheaply than more blocks."
        )
    if advice == Advice.BALANCED:
        return f"{n:g} runs per block balances block and run noise; add blocks to narrow the CI."
    return str(advice or "")


def arm_record(d: Data, arm: str) -> dict:
    """The arm as it ran, from stats.json's provenance (bracket.stats.provenance.arm_record); {} for an arm it does
    not name."""
    return next((a for a in d.provenance.get("arms") or [] if a.get("arm") == arm), {})


def arm_flags(d: Data, arm: str) -> str:
    """The launch flags that distinguish this arm, as they ran: its speculative flags and its own args, as
    stats.json's provenance read them from a block's launch command (bracket.stats.provenance.launched_flags);
    the experiment's speculative settings where no block of the arm has a launch record."""
    flags = arm_record(d, arm).get("flags")
    if flags is not None:
        return shlex.join(flags) if flags else "(no speculative flags)"
    spec = d.arm_config(arm).get("speculative")
    return (
        f"{spec_words(spec, d.experiment.get('engine', {}).get('kind'))} (from the experiment: no launch record)"
        if spec
        else "(no speculative flags)"
    )


def recommendations(d: Data) -> tuple[pd.DataFrame, bool]:
    """Per workload: what to use, its flags and its measurement; and whether the choice splits."""
    rows = []
    for r in headline_rows(d):
        b = d.results.best[r["workload"]]
        use, because = b.use, b.use_because  # the analysis decides (bracket.stats.analyze.recommend)
        note = {
            "reference fastest": "the reference was fastest",
            "shown faster": f"{ratio(r['ratio'])} the {d.reference}",
        }.get(
            because,
            f"{r['arm']} measured {ratio(r['ratio'])} but '{r['verdict']}': keep {d.reference} until more "
            f"runs confirm it",
        )
        cell = d.results.cell(use, r["workload"])
        rows.append(
            {
                "workload": r["workload"],
                "use": use,
                "flags": arm_flags(d, use),
                "measured": f"{rate(cell.median)} {runs_phrase(cell.n, cell.min, cell.max)}" if cell else "",
                "fastest measured": f"{r['arm']}, {rate(r['median'])}",
                "why": note,
                "_fastest": r["arm"],
            }
        )
    t = pd.DataFrame(rows)
    split = not t.empty and t["use"].nunique() > 1
    fastest_split = len({r["arm"] for r in headline_rows(d)}) > 1
    return t, split or fastest_split


def section_recommendations(d: Data) -> Section | None:
    t, split = recommendations(d)
    if t.empty:
        return None
    s = Section([Heading("Recommendation")])
    if aa_test(d):
        return s.add(
            Para(
                (
                    f"None: every arm ran the settings of {d.reference}, so there is nothing to choose between them."
                    if d.results.aa.arms
                    else f"None: {d.reference} was the only arm."
                )
                + " Read this experiment as a drift test (the headline and the drift section)."
            )
        )
    fastest = list(t["_fastest"])
    if t["use"].nunique() > 1:
        s.add(
            Para(
                "The best arm is not the same on every workload, so the recommendation splits by workload "
                "rather than shipping one global default:"
            )
        )
    elif split:
        s.add(
            Para(
                f"The fastest arm differs by workload ({'; '.join(f'{a} on {w}' for a, w in zip(fastest, t['workload']))}), "
                f"but none was shown faster than the reference at this run count, so the recommendation is "
                f"{t['use'].iloc[0]} everywhere until more runs settle it:"
            )
        )
    elif (t["use"] == d.reference).all():
        s.add(
            Para(
                f"Keep {t['use'].iloc[0]}: no arm was shown faster than it on any workload measured"
                + (
                    ""
                    if not fastest or set(fastest) == {d.reference}
                    else ", so the highest medians below are measurements, not reasons to switch"
                )
                + "."
            )
        )
    else:
        s.add(Para(f"The same choice holds on every workload measured: {t['use'].iloc[0]}."))
    s.add(Table(t, "What to run, per workload", "recommendations.csv"))
    if (t["use"] != t["_fastest"]).any():
        s.add(
            Para(
                "Where the fastest arm is not the one to use, its advantage was not shown at this run count: "
                "the verdict, not the median, decides.",
                "note",
            )
        )
    return s
