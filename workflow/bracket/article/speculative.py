"""Speculative decoding: acceptance length, tokens per event, the draft budget."""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Figure, Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import pct, rate
from bracket.stats import speculative as spec


def speculative_table(d: Data) -> pd.DataFrame:
    rows = []
    for r in d.stats.get("speculative", []):
        rows.append(
            {
                "arm": r["arm"],
                "workload": r["workload"],
                "draft budget": r["draft_budget"],
                "acceptance length": "n/a" if r["acceptance_length"] is None else f"{r['acceptance_length']:.2f}",
                "acceptance rate": pct(r["acceptance_rate"]),
                "saturation": pct(r["saturation"]),
                "reading": r.get("reading") or "",
            }
        )
    return pd.DataFrame(rows)


def tokens_per_event(d: Data) -> pd.DataFrame:
    """Mean completion tokens per stream event of each speculative arm (valid runs)."""
    r = d.runs[d.runs["valid"] & d.runs["draft_budget"].notna()] if "draft_budget" in d.runs else d.runs.iloc[0:0]
    if r.empty or "stream_events" not in r:
        return pd.DataFrame()
    g = r.assign(tpe=r["completion_tokens"] / r["stream_events"]).groupby("arm")["tpe"].mean()
    return g.reset_index().rename(columns={"tpe": "tokens per event"})


def budget_groups(d: Data) -> list[dict]:
    """stats.json's groups of arms that differ only in the draft budget (older files: from the experiment)."""
    groups = d.stats.get("budget_groups")
    if groups is None:
        groups = [
            {"method": label, "arms": [a for _, a in arms], "budgets": [k for k, _ in arms]}
            for label, arms in spec.budget_groups(d.cfg.get("arms", {}))
        ]
    return groups


def budget_table(d: Data) -> pd.DataFrame:
    """Seed 000's "same flag, different workloads" table: median per draft budget, and the change
    from the smallest to the largest budget, for arms that differ only in the draft budget (one
    method as launched, one lookup window, one draft model: stats.speculative.budget_groups)."""
    rows = []
    for g in budget_groups(d):
        for wl in d.workloads:
            cells = [(k, a, d.cell(a, wl)) for k, a in zip(g["budgets"], g["arms"])]
            if any(c is None for _, _, c in cells):
                continue
            row = {"workload": wl, "method": g["method"], "arms": ", ".join(g["arms"])}
            row.update({f"budget {k}": rate(c["median"]) for k, a, c in cells})
            first, last = cells[0][2]["median"], cells[-1][2]["median"]
            row[f"change {cells[0][0]} \u2192 {cells[-1][0]}"] = pct(last / first - 1, 1, True)
            row["_change"] = last / first - 1
            row["_span"] = f"{g['method']} from {cells[0][0]} to {cells[-1][0]} ({cells[0][1]} \u2192 {cells[-1][1]})"
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
    sat = [r for r in d.stats.get("speculative", []) if r.get("saturation") is not None]
    if sat:
        hi = max(sat, key=lambda r: r["saturation"])
        lo = min(sat, key=lambda r: r["saturation"])
        s.add(
            Para(
                f"Fullest: {hi['arm']} on {hi['workload']}, {hi['acceptance_length']:.2f} of a budget of "
                f"{hi['draft_budget']} ({pct(hi['saturation'])}): {hi['reading']}. Emptiest: {lo['arm']} on "
                f"{lo['workload']}, {lo['acceptance_length']:.2f} of {lo['draft_budget']} ({pct(lo['saturation'])}): "
                f"{lo['reading']}."
            )
        )
        over = [r for r in sat if r["saturation"] > 1]
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
            signs = {v > 0 for v in g["_change"]}
            s.add(
                Para(
                    f"Raising the draft budget of {span}, nothing else changed, "
                    + (
                        "helps on some workloads and hurts on others: "
                        if len(signs) > 1
                        else "moves every workload the same way: "
                    )
                    + "; ".join(f"{w} {pct(c, 1, True)}" for w, c in zip(g["workload"], g["_change"]))
                    + ". Medians; their verdicts against the reference are in the results above."
                )
            )
        s.add(
            Table(
                bt.drop(columns=["_span"]),
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
