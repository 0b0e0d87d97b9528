"""Drift and hosts: the reference's movement over the run, and box against box."""

from __future__ import annotations

import math

import pandas as pd

from bracket.article.elements import Figure, Heading, Para, Section, Table
from bracket.article.inputs import Data
from bracket.article.results import ci_label, verdict_cell
from bracket.article.text import _missing, pct, span
from bracket.stats.results import Hosts


def drift_table(d: Data) -> pd.DataFrame:
    rows = []
    for wl in d.workloads:
        x = d.results.drift.get(wl)
        if not x:
            continue
        ref = x.reference_blocks
        rounds = "; ".join(f"{a} {pct(v.change, 2, True)}" for a, v in x.rounds.items() if v.change is not None)
        rows.append(
            {
                "workload": wl,
                f"{d.reference} first vs last block": pct(x.reference_first_vs_last, 2, True),
                "first / last median": span(ref.first_median, ref.last_median, 2) if ref else "",
                "trend per block": pct(_expm1(x.slope_per_block), 2, True),
                "trend CI": (
                    f"{pct(_expm1(x.slope_ci[0]), 2, True)} to {pct(_expm1(x.slope_ci[1]), 2, True)}"
                    + (f" ({x.blocks} blocks, t {x.df:g} df)" if x.blocks else "")
                    if x.slope_ci
                    else ""
                ),
                "robust trend (Theil-Sen)": pct(_expm1(x.slope_theil_sen), 2, True),
                "round-to-round change": rounds,
            }
        )
    return pd.DataFrame(rows)


def _expm1(x):
    return None if _missing(x) else math.expm1(x)


def section_drift(d: Data, figure: Figure | None = None) -> Section:
    s = Section([Heading("Drift: the same configuration, measured again later")])
    s.add(
        Para(
            "Alternating blocks instead of running one configuration to completion means drift hits every "
            "arm alike, and the gap between two visits to the same arm measures the drift itself."
        )
    )
    t = drift_table(d)
    measured = (
        not t.empty
        and (t.drop(columns="workload") != "n/a").to_numpy().any()
        and any(
            x.reference_first_vs_last is not None or x.slope_per_block is not None
            for w, x in d.results.drift.items()
            if w in d.workloads
        )
    )
    if measured:
        s.add(Table(t, "Drift per workload (changes of the decode rate)", "drift.csv"))
        worst = d.results.drift_worst  # bracket.stats.drift.worst
        if worst is not None:
            s.add(
                Para(
                    f"The reference moved by up to {pct(worst.change, 2)} between its first and last blocks, "
                    f"against a noise threshold of {pct(worst.threshold, 0)}: "
                    + (
                        "effects smaller than that cannot be told from drift."
                        if worst.beyond
                        else "drift stayed inside the threshold."
                    )
                )
            )
    else:
        s.add(
            Para(
                "Each arm ran in one block only, so drift is not measurable here and time is confounded with "
                "arm: a difference between arms could be the machine changing. Run two rounds or more "
                "(design.rounds) to measure it."
                if not d.results.sequential and ((d.results.design_ran and d.results.design_ran.rounds) or 1) < 2
                else "The design could not separate time from arm for any workload; see the warnings."
            )
        )
    hosts = d.results.hosts
    if hosts:
        s.add(*host_parts(hosts))
    if figure:
        s.add(figure)
    return s


def host_parts(hosts: Hosts) -> list:
    """Hosts as a factor: each host against the first, and each host's own drift."""
    base = hosts.baseline
    rows = [
        {
            "arm": c.arm,
            "workload": c.workload,
            "host": c.candidate,
            "against": c.baseline,
            "ratio": f"{c.ratio:.3f}x",
            "raw ratio (95% CI)": (
                f"{c.raw_ratio:.3f}x ({span(c.raw_ci_low, c.raw_ci_high, 3)})" if not _missing(c.raw_ratio) else ""
            ),
            "verdict rests on": (
                f"{c.basis}, {ci_label(c.ci_level, c.multiplicity and c.multiplicity.comparisons)} "
                f"{span(c.ci_low, c.ci_high, 3)}"
                if not _missing(c.ci_low)
                else ""
            ),
            "p": "" if c.p_value is None else f"{c.p_value:.3g}",
            "verdict": verdict_cell(c),
        }
        for c in hosts.comparisons
    ]
    out = [
        Heading("Hosts", 3),
        Para(
            f"The whole design ran on each of {len(hosts.names)} hosts ({', '.join(hosts.names)}) "
            f"side by side. Each host is compared with {base} on the same arm and workload, like any two arms: "
            "a ratio from block medians with its CI, a test, and a verdict against the noise band, Holm-adjusted "
            "across the host comparisons."
        ),
    ]
    if rows:
        out.append(Table(pd.DataFrame(rows), f"Each host against {base}", "hosts.csv"))
    drift_rows = []
    for host, per_wl in hosts.drift.items():
        for wl, v in per_wl.items():
            fl = v.reference_first_vs_last
            drift_rows.append(
                {
                    "host": host,
                    "workload": wl,
                    "reference first vs last": "n/a" if fl is None else pct(fl, 2, sign=True),
                    "trend per block": "n/a" if v.slope_per_block is None else pct(v.slope_per_block, 2, sign=True),
                }
            )
    if drift_rows:
        out.append(Table(pd.DataFrame(drift_rows), "Drift on each host, in that host's own blocks", "hosts_drift.csv"))
    return out
