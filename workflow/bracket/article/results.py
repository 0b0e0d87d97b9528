"""Results per workload: medians, CIs, ratios and verdicts."""

from __future__ import annotations

import math

import pandas as pd

from bracket.article.elements import Figure, Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import DASH, _missing, interval, pct, rate, ratio, rounds_needed, span
from bracket.article.verdicts import family_words, significance_words, undetermined_words
from bracket.stats.results import Comparison
from bracket.stats.sequential import METHOD as SEQUENTIAL_METHOD


def ci_label(level, comparisons, method: str | None = None) -> str:
    """ "95% CI", or "98.3% CI (Holm, 3 comparisons)" when multiplicity widened it; an adaptive design's
    repeated CI names itself (its nominal level is that of its look's boundary)."""
    if _missing(level):
        return "95% CI"
    text = f"{level_pct(level)} CI"
    if method == SEQUENTIAL_METHOD:
        return f"repeated CI (nominal {level_pct(level)}, {comparisons} comparisons)"
    return text + (f" (Holm, {comparisons} comparisons)" if comparisons and comparisons > 1 else "")


def level_pct(level: float) -> str:
    """A confidence level as a percentage with three significant digits, or with as many decimals as
    keep it below 100 %: an early look's boundary at 99.9973 % reads "99.997%", never "100%"."""
    text = f"{level * 100:.3g}"
    if 0 < level < 1 and float(text) >= 100:
        text = f"{level * 100:.{math.ceil(-math.log10((1 - level) * 100) - 1e-9)}f}"
    return text + "%"


def verdict_cell(comp: Comparison) -> str:
    """The verdict; an undetermined one with its rounds needed; an adaptive design's with the round it settled."""
    sq = comp.sequential
    if sq:
        if sq.settled_round and comp.verdict != "undetermined":
            return f"{comp.verdict} (settled after round {sq.settled_round})"
        return "undetermined (" + ("budget spent" if sq.status == "settled" else "still open") + ")"
    if comp.verdict != "undetermined":
        return comp.verdict
    return f"undetermined ({rounds_needed(comp)})"


def results_table(d: Data, workload: str) -> pd.DataFrame:
    """Per arm: runs, blocks, median, CI, range, spread; ratio to the reference (raw and drift-adjusted,
    each with its CI), the CI the verdict rests on (adjusted for multiplicity), and the verdict."""
    rows = []
    for arm in d.arms:
        c = d.results.cell(arm, workload)
        if not c:
            continue
        comp = d.results.comparison(arm, workload)
        mult = comp.multiplicity if comp else None
        rows.append(
            {
                "arm": arm,
                "runs": c.n,
                "blocks": "" if c.blocks is None else c.blocks,
                "median tok/s": rate(c.median),
                "95% CI": interval(c.ci_low, c.ci_high, 2),
                "min–max": span(c.min, c.max, 2),
                "spread": pct(c.spread),
                f"ratio to {d.reference}": "1 (reference)"
                if arm == d.reference
                else ratio(comp.ratio)
                if comp
                else "n/a",
                "raw ratio (95% CI)": (
                    f"{ratio(comp.raw_ratio)} ({interval(comp.raw_ci_low, comp.raw_ci_high, 2)})"
                    if comp and not _missing(comp.raw_ratio)
                    else ""
                ),
                "drift-adjusted (95% CI)": (
                    f"{ratio(comp.drift_adjusted_ratio)} "
                    f"({interval(comp.drift_adjusted_ci_low, comp.drift_adjusted_ci_high, 2)})"
                    if comp and not _missing(comp.drift_adjusted_ratio)
                    else ""
                ),
                "verdict rests on": (
                    f"{comp.basis}, {ci_label(comp.ci_level, mult and mult.comparisons, mult and mult.method)} "
                    f"{interval(comp.ci_low, comp.ci_high, 2)}"
                    if comp and not _missing(comp.ci_low)
                    else ""
                ),
                "verdict": verdict_cell(comp) if comp else ("reference" if arm == d.reference else "not compared"),
            }
        )
    return pd.DataFrame(rows)


def section_results(d: Data, figure: Figure | None = None) -> Section | None:
    if not d.results.cells:
        return None
    s = Section([Heading("Results per workload")])
    s.add(
        Para(
            "Median of the valid timed runs, its CI, the range, and spread = (max " + DASH + " min) / median. "
            "Each block is a fresh server, so the block is the unit: with two blocks or more the CI of an arm's "
            "median and of each ratio come from the blocks' medians (OLS on their logs, Student t on the "
            "blocks' degrees of freedom, pooled with the request noise only when blocks agree); with one block "
            "a CI covers request noise only. The raw ratio and the drift-adjusted one (a linear trend in "
            "time removed) are both shown; 'verdict rests on' names the one the verdict uses and gives its CI "
            "at the level multiplicity leaves it. 'Faster' or 'slower' needs that CI wholly outside the noise band; "
            "'no measurable effect' needs it within twice the band on both sides, so that it rules out any "
            "effect larger than that; 'undetermined' means the data support neither (one block per arm, arm "
            "confounded with time, too few blocks, or a CI reaching past twice the band) and says how many "
            "rounds would."
        )
    )
    mult = d.results.multiplicity
    if mult and mult.comparisons:
        m = mult.comparisons
        s.add(
            Para(
                f"{m} comparison{'s' if m != 1 else ''} with a test ({family_words(mult.family)})"
                + (
                    (
                        f"; the design was adaptive: verdicts rest on repeated CIs that stay valid at every look "
                        f"(group-sequential, each comparison starting at alpha / {m}; a comparison settled as faster or slower "
                        f"passes its alpha to the others), so the chance of any false 'faster' or 'slower' among them, over "
                        f"every look, is at most {pct(1 - mult.confidence, 0)}, and so is the chance of any "
                        f"wrong 'no measurable effect'; see the looks"
                    )
                    if mult.method == SEQUENTIAL_METHOD
                    else (
                        f"; verdicts and their CIs are adjusted with Holm's step-down method, so the chance of any "
                        f"false 'faster' or 'slower' among them is at most {pct(1 - mult.confidence, 0)}"
                        if m > 1
                        else ""
                    )
                )
                + (f"; {mult.untested} more could not be tested (undetermined)" if mult.untested else "")
                + ".",
                "note",
            )
        )
    for wl in d.workloads:
        t = results_table(d, wl)
        if t.empty:
            continue
        s.add(Heading(wl, 3), Table(t, f"{wl}: decode rate per arm", f"results_{wl}.csv"))
        tests = sorted({significance_words(c.test) for c in d.results.comparisons if c.workload == wl and c.test})
        if tests:
            s.add(Para("Test: " + "; ".join(tests) + ".", "note"))
        for c in d.results.comparisons:
            if c.workload == wl and c.verdict == "undetermined" and c.undetermined:
                s.add(Para(f"{c.candidate}: undetermined: {undetermined_words(c.undetermined)}.", "warn"))
        for c in d.results.cells:
            m2 = c.modes
            if c.workload == wl and m2:
                s.add(
                    Para(
                        f"{c.arm} has two modes ({m2.where}): {m2.low_n} runs near "
                        f"{rate(m2.low_median)} and {m2.high_n} near {rate(m2.high_median)} tok/s; its "
                        f"median depends on how many runs took each path, so read both.",
                        "warn",
                    )
                )
    if figure:
        s.add(figure)
    return s
