"""Speculative decoding: acceptance length, tokens per event, the draft budget."""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Figure, Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import pct, rate
from bracket.stats.speculative import Reading

#: Seed 000's readings of a saturation in words (bracket.stats.speculative.Reading).
READING_WORDS = {
    Reading.BUDGET_LIMITED: "budget-limited: the drafts are nearly all used; raise the draft budget",
    Reading.NEARLY_FULL: "nearly full, more budget might pay",
    Reading.PARTLY_USED: "partly used: a larger budget is unlikely to pay much",
    Reading.GUESSING_BADLY: "guessing badly, more budget won't help",
    Reading.NEVER_DRAFTED: "never drafted: the engine proposed no draft token, so this arm measured the baseline",
}


def reading_words(code: str | None) -> str:
    """A reading's words; an older stats.json's words (not a code) as they were."""
    return READING_WORDS.get(code, code or "")


def speculative_table(d: Data) -> pd.DataFrame:
    rows = []
    for r in d.results.speculative:
        rows.append(
            {
                "arm": r.arm,
                "workload": r.workload,
                "draft budget": r.draft_budget,
                "acceptance length": "n/a" if r.acceptance_length is None else f"{r.acceptance_length:.2f}",
                "acceptance rate": pct(r.acceptance_rate),
                "saturation": pct(r.saturation),
                "reading": reading_words(r.reading),
            }
        )
    return pd.DataFrame(rows)


def tokens_per_event(d: Data) -> pd.DataFrame:
    """stats.json's mean completion tokens per stream event of each speculative arm (valid runs)."""
    rows = d.results.tokens_per_event or ()
    return (
        pd.DataFrame({"arm": [r.arm for r in rows], "tokens per event": [r.tokens_per_event for r in rows]})
        if rows
        else pd.DataFrame()
    )


def budget_table(d: Data) -> pd.DataFrame:
    """Seed 000's "same flag, different workloads" table: median per draft budget, and the change
    from the smallest to the largest budget, for arms that differ only in the draft budget (one
    method as launched, one lookup window, one draft model): stats.json's `budget_groups`
    (bracket.stats.speculative.budget_groups and budget_effects)."""
    rows = []
    for g in d.results.budget_groups or ():
        ks, arms = g.budgets, g.arms
        for w in g.workloads:
            row = {"workload": w.workload, "method": g.method, "arms": ", ".join(arms)}
            row.update({f"budget {k}": rate(m) for k, m in zip(ks, w.medians)})
            row[f"change {ks[0]} \u2192 {ks[-1]}"] = pct(w.change, 1, True)
            row["_change"] = w.change
            row["_same_direction"] = g.same_direction
            row["_span"] = f"{g.method} from {ks[0]} to {ks[-1]} ({arms[0]} \u2192 {arms[-1]})"
            rows.append(row)
    return pd.DataFrame(rows)


def section_speculative(d: Data, figure: Figure | None = None) -> Section | None:
    t = speculative_table(d)
    if t.empty:
        return None
    s = Section([Heading("Speculative decoding: saturation, not acceptance rate")])
    s.add(
        Para(
            "Acceptance length is the tokens produced per verify step, the target's own token included; "
            "acceptance rate is accepted / proposed draft tokens; saturation is acceptance length / draft "
            "budget. Read saturation: a high acceptance rate can just mean the budget is so small there is "
            "barely anything to get wrong."
        )
    )
    s.add(
        Table(t, "Pooled over the valid runs of each cell (sums of counters, not means of ratios)", "speculative.csv")
    )
    sat = [r for r in d.results.speculative if r.saturation is not None]
    if sat:
        hi = max(sat, key=lambda r: r.saturation)
        lo = min(sat, key=lambda r: r.saturation)
        s.add(
            Para(
                f"Fullest: {hi.arm} on {hi.workload}, {hi.acceptance_length:.2f} of a budget of "
                f"{hi.draft_budget} ({pct(hi.saturation)}): {reading_words(hi.reading)}. Emptiest: {lo.arm} on "
                f"{lo.workload}, {lo.acceptance_length:.2f} of {lo.draft_budget} ({pct(lo.saturation)}): "
                f"{reading_words(lo.reading)}."
            )
        )
        over = [r for r in sat if r.saturation > 1]
        if over:
            s.add(
                Para(
                    "Saturation above 100% is possible: the acceptance length counts the target's own token, "
                    "so a step that accepts all K drafts yields K + 1 tokens.",
                    "note",
                )
            )
    bt = budget_table(d)
    if not bt.empty:
        s.add(Heading("The same flag on different workloads", 3))
        for span, g in bt.groupby("_span", sort=False):
            s.add(
                Para(
                    f"Raising the draft budget of {span}, nothing else changed, "
                    + (
                        "moves every workload the same way: "
                        if g["_same_direction"].iloc[0]
                        else "helps on some workloads and hurts on others: "
                    )
                    + "; ".join(f"{w} {pct(c, 1, True)}" for w, c in zip(g["workload"], g["_change"]))
                    + ". Medians; their verdicts against the reference are in the results above."
                )
            )
        s.add(
            Table(
                bt.drop(columns=["_span", "_same_direction"]),
                "Median decode rate per draft budget, arms that differ only in it",
                "draft_budget.csv",
            )
        )
    tpe = tokens_per_event(d)
    if not tpe.empty and (tpe["tokens per event"] > 1.05).any():
        s.add(
            Para(
                "A stream event carries several tokens under speculation ("
                + ", ".join(f"{a}: {v:.2f} tokens per event" for a, v in zip(tpe["arm"], tpe["tokens per event"]))
                + "). Count events and the rate looks that many times lower; every rate here is completion_tokens "
                "divided by wall time."
            )
        )
    if figure:
        s.add(figure)
    return s
