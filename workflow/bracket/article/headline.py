"""The headline: title line and one sentence per workload, from the raw values."""

from __future__ import annotations

import math

from bracket.article.elements import Bullets, Heading, Para, Section
from bracket.article.inputs import Data
from bracket.article.results import ci_label
from bracket.article.text import interval, rate, ratio, rounds_needed, runs_phrase
from bracket.article.verdicts import significance_words
from bracket.stats.results import Comparison, SameSettings


def headline_rows(d: Data) -> list[dict]:
    """Per workload: the best arm, its median, runs and range, and its ratio to the reference.

    From stats.json `best`; the reference's numbers come from the same session's cells. The rows are the
    headline's own (what `headline_sentence` and the recommendation read), made from the typed results.
    """
    st = d.results
    mult = st.multiplicity
    aa_arms = st.aa.arms if st.aa else ()
    rows = []
    for wl in d.workloads:
        b = st.best.get(wl)
        if not b:
            continue
        ref = st.cell(d.reference, wl)
        comp = st.comparison(b.arm, wl)
        rows.append(
            {
                "workload": wl,
                "arm": b.arm,
                "median": b.median,
                "n": b.n,
                "min": b.min,
                "max": b.max,
                "ratio": b.ratio_to_reference,
                "ci_low": b.ci_low,
                "ci_high": b.ci_high,
                "verdict": b.verdict,
                "ci_level": b.ci_level,
                "ci_basis": b.ci_basis,
                "picked_from": b.picked_from,
                "comparisons": mult.comparisons if mult else None,
                "method": mult.method if mult else None,
                "is_reference": b.arm == d.reference,
                "ref_median": ref.median if ref else None,
                "ref_n": ref.n if ref else None,
                "ref_min": ref.min if ref else None,
                "ref_max": ref.max if ref else None,
                "test": significance_words(comp.test) if comp else None,
                "needed": rounds_needed(comp),
                "same_settings": b.arm in aa_arms,
            }
        )
    return rows


def unmeasured_arms(d: Data) -> list[str]:
    """Arms without one valid timed run (stats.json's `unmeasured`): while any is, no arm is named fastest."""
    return [u.name for u in d.results.unmeasured or () if u.what == "arm"]


def headline_sentence(row: dict, reference: str) -> str:
    """Seed 000's form: "65.02 tok/s (10 runs, 56.6–69.3), 5.28x the baseline".

    The wording follows the verdict: only a "faster" verdict names the arm as the winner; otherwise
    the sentence says no arm was shown faster and gives the highest median as a measurement.
    """
    best = f"{rate(row['median'])} tok/s {runs_phrase(row['n'], row['min'], row['max'])}"
    if row.get("unmeasured"):
        missing = _join(row["unmeasured"])
        return (
            f"{row['workload']}: no arm is named fastest, because {missing} had no valid run; the highest "
            f"median among the arms measured, {row['arm']}'s {best}, is a measurement, not a winner."
        )
    if row["is_reference"]:
        return f"{row['workload']}: the reference {reference} was fastest, {best}; no other arm beat it."
    if row.get("same_settings"):
        best += f" (the same settings as the {reference}: an A/A control, so any difference is drift)"
    if row["verdict"] == "faster":
        text = f"{row['workload']}: {row['arm']}, {best}, {ratio(row['ratio'])} the {reference}"
    else:
        text = (
            f"{row['workload']}: no arm was shown faster than the {reference}; the highest median, "
            f"{row['arm']}'s {best}, is {ratio(row['ratio'])} the {reference}"
        )
    if row["ci_low"] is not None:
        basis = f"{row['ci_basis']}, " if row.get("ci_basis") else ""
        text += (
            f" ({basis}{ci_label(row.get('ci_level'), row.get('comparisons'), row.get('method'))} "
            f"{interval(row['ci_low'], row['ci_high'], 2, row.get('needed', ''))}; verdict: {row['verdict']})"
        )
    if row["ref_median"] is not None:
        text += (
            f". The {reference}, same session: {rate(row['ref_median'])} tok/s "
            f"{runs_phrase(row['ref_n'], row['ref_min'], row['ref_max'])}"
        )
    return text + "."


def _join(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def aa_test(d: Data) -> SameSettings | None:
    """stats.json `aa` when every arm ran the reference's settings (an A/A test: a drift test), else None."""
    aa = d.results.aa
    return aa if aa and aa.all else None


def aa_title(d: Data) -> str:
    """The subtitle of an A/A test: what it is, and what its comparisons say about the setup's drift."""
    aa_arms = d.results.aa.arms
    comps = [c for c in d.results.comparisons if c.candidate in aa_arms]
    ref = d.label(d.reference)
    if not aa_arms:
        return f"A drift test: one arm, {ref}, measured block after block; the drift section says how far it moved"
    line = f"A drift test (A/A): every arm ran the settings of {ref}"
    if not comps:
        return line + ", and no comparison could be made"
    verdicts = {c.verdict for c in comps}
    moved = [c for c in comps if c.verdict in ("faster", "slower")]
    if moved:
        top = max(moved, key=lambda c: abs(math.log(c.ratio)) if c.ratio else 0)
        return (
            line + f"; yet {top.candidate} read '{top.verdict}' on {top.workload} "
            f"({ratio(top.ratio)}): the same configuration moved between blocks, by drift or an unsteady setup"
        )
    if verdicts == {"no measurable effect"}:
        return line + "; the same configuration measured the same in every comparison (no measurable effect)"
    return line + "; at this run count it cannot yet say how far the same configuration moves (undetermined)"


def aa_sentence(c: Comparison, d: Data) -> str:
    """One comparison of an A/A test: the same settings, their ratio, its interval and verdict."""
    mult = c.multiplicity or d.results.multiplicity
    return (
        f"{c.workload}: {c.candidate} against {d.reference}, the same settings: {ratio(c.ratio)} ({c.basis or 'raw'}, "
        f"{ci_label(c.ci_level, mult.comparisons if mult else None, mult.method if mult else None)} "
        f"{interval(c.ci_low, c.ci_high, 2, rounds_needed(c))}; verdict: {c.verdict})."
    )


def title_line(d: Data) -> str | None:
    """The subtitle, following the verdicts: a seed-000 line ("ngram_8 reaches 653 tok/s on code, 188
    with baseline") for the largest ratio among arms shown faster; otherwise that no arm was shown
    faster than the reference, never a ratio the verdict did not carry."""
    rows = headline_rows(d)
    if not rows:
        return None
    missing = unmeasured_arms(d)
    if missing:
        return f"No arm can be named fastest: {_join(missing)} had no valid run"
    if aa_test(d):
        return aa_title(d)
    ref = d.label(d.reference)
    shown = [r for r in rows if not r["is_reference"] and r["ratio"] and r["verdict"] == "faster"]
    if shown:
        top = max(shown, key=lambda r: r["ratio"])
        line = (
            f"{top['arm']} reaches {top['median']:.0f} tok/s on {top['workload']}, {top['ref_median']:.0f} with {ref}"
        )
        rest = [r["workload"] for r in rows if r not in shown]
        return line + (f"; on {_join(rest)} no arm was shown faster" if rest else "")
    others = [r for r in rows if not r["is_reference"] and r["ratio"]]
    if not others:
        return f"{ref} was the fastest on every workload measured"
    top = max(others, key=lambda r: r["ratio"])
    verdict = top["verdict"] or "no verdict at this run count"
    return (
        f"No arm was shown faster than {ref}: the largest ratio, {top['arm']}'s {ratio(top['ratio'])} on "
        f"{top['workload']}, reads '{verdict}'"
    )


def unmeasured(d: Data) -> list[str]:
    """Errors for the article's first lines: each arm and each workload without one valid timed run
    (stats.json's `unmeasured`, bracket.stats.coverage)."""
    out = []
    for u in d.results.unmeasured or ():
        why = ", ".join(f"{n} {r}" for r, n in u.reasons.items()) or "no timed request ran"
        out.append(f"Error: {u.what} {u.name} has no valid run ({why}); nothing below measures it.")
    return out


def section_headline(d: Data) -> Section:
    stated = d.results.experiment
    s = Section([Heading(stated.title or d.name, 1)])
    sub = title_line(d)
    if sub:
        s.add(Para(sub, "lead"))
    if stated.question:
        s.add(Para(f"The question: {stated.question}"))
    for problem in unmeasured(d):  # before any number: what could not be measured at all
        s.add(Para(problem, "warn"))
    rows = headline_rows(d)
    if not rows:
        return s.add(
            Para("No arm produced a valid run, so there is no headline; see the warnings and the raw values below.")
        )
    if aa_test(d) and not d.results.aa.arms:
        s.add(
            Para(
                f"One arm, {d.reference}, ran in every block: this experiment compares it with itself over time, "
                "a drift test; it recommends no setting. Its median per workload:"
            )
        )
        cells = [d.results.cell(d.reference, wl) for wl in d.workloads]
        s.add(
            Bullets(
                tuple(f"{c.workload}: {rate(c.median)} tok/s {runs_phrase(c.n, c.min, c.max)}." for c in cells if c)
            )
        )
        return s
    if aa_test(d):
        s.add(
            Para(
                f"Every arm ran the settings of {d.reference} (only their labels differ): this is an A/A test, "
                "a drift test. Its comparisons say how far one configuration moves from block to block and how "
                "large a difference this setup can resolve (the width of each interval); they recommend no "
                "setting. A 'faster' or 'slower' here is drift or an unsteady setup, not an effect."
            )
        )
        comps = sorted(
            (c for c in d.results.comparisons if c.candidate in d.results.aa.arms),
            key=lambda c: (
                d.workloads.index(c.workload) if c.workload in d.workloads else 99,
                d.arms.index(c.candidate) if c.candidate in d.arms else 99,
            ),
        )
        if comps:
            s.add(Bullets(tuple(aa_sentence(c, d) for c in comps)))
        return s
    s.add(
        Para(
            "The fastest arm per workload, as the median decode rate (completion tokens divided by the "
            "request's wall time), with its run count and range, and its ratio to the reference measured "
            "in the same session. Ratios survive drift between sessions; absolute numbers don't."
        )
    )
    missing = unmeasured_arms(d)
    s.add(Bullets(tuple(headline_sentence({**r, "unmeasured": missing}, d.reference) for r in rows)))
    if missing:
        return s
    weak: dict = {}
    for r in rows:
        if not r["is_reference"] and r["verdict"] and r["verdict"] != "faster":
            weak.setdefault((r["verdict"], r["test"]), []).append(r["workload"])
    for (verdict, test), wls in weak.items():
        s.add(
            Para(
                f"Read the verdict before the ratio: on {_join(wls)} it is '{verdict}'"
                + (f" ({test})" if test else "")
                + ". A ratio without a verdict is a number, not a result.",
                "warn",
            )
        )
    return s
