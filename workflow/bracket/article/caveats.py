"""Warnings, grouped by arm and workload."""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Bullets, Heading, Para, Section, Table
from bracket.article.findings import group
from bracket.article.inputs import Data


def group_warnings(findings: list[dict]) -> list[str]:
    """Identical messages about several cells, merged: "message (baseline / code, ngram_4 / chat)"."""
    return group(findings)


def section_warnings(d: Data) -> Section:
    s = Section([Heading("Warnings the analysis raised")])
    c = d.stats.get("counts") or {}
    s.add(
        Para(
            f"{c.get('total', len(d.runs))} requests: {c.get('valid', 0)} valid, {c.get('warmups', 0)} warmups "
            f"(kept and marked, left out of the statistics), {c.get('invalid', 0)} invalid."
            + (
                f" {c['torn']} more {'was' if c['torn'] == 1 else 'were'} cut short in the raw files and could not "
                f"be read (below)."
                if c.get("torn")
                else ""
            )
        )
    )
    reasons = c.get("invalid_by_reason") or {}
    if reasons:
        s.add(
            Table(
                pd.DataFrame({"reason": list(reasons), "runs": list(reasons.values())}),
                "Invalid runs by reason (never dropped: each is in the raw table, marked)",
                "invalid.csv",
            )
        )
    ws = group_warnings(d.stats.get("findings") or [])
    s.add(Bullets(tuple(ws)) if ws else Para("None."))
    return s
