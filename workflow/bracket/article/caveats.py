"""Warnings, grouped by arm and workload."""

from __future__ import annotations

import pandas as pd

from bracket.article.elements import Bullets, Heading, Para, Section, Table
from bracket.article.findings import group
from bracket.article.inputs import Data


def group_warnings(findings) -> list[str]:
    """Identical messages about several cells, merged: "message (baseline / code, ngram_4 / chat)"."""
    return group(findings)


def section_warnings(d: Data) -> Section:
    s = Section([Heading("Warnings the analysis raised")])
    c = d.results.counts
    torn = c.torn or 0
    s.add(
        Para(
            f"{c.total} requests: {c.valid} valid, {c.warmups} warmups "
            f"(kept and marked, left out of the statistics), {c.invalid} invalid."
            + (
                f" {torn} more {'was' if torn == 1 else 'were'} cut short in the raw files and could not "
                f"be read (below)."
                if torn
                else ""
            )
        )
    )
    reasons = c.invalid_by_reason
    if reasons:
        s.add(
            Table(
                pd.DataFrame({"reason": list(reasons), "runs": list(reasons.values())}),
                "Invalid runs by reason (never dropped: each is in the raw table, marked)",
                "invalid.csv",
            )
        )
    ws = group_warnings([f.finding for f in d.results.findings])
    s.add(Bullets(tuple(ws)) if ws else Para("None."))
    return s
