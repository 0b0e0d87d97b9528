"""Multiplicity: Holm's step-down adjustment across the comparisons of one experiment.

An experiment compares many arms on many workloads; at alpha = 0.05 each, some will clear the
band by chance. Holm (1979) controls the chance of any false "faster"/"slower" in the family at
alpha and rejects everything Bonferroni does and more.

The p-values adjusted are each comparison's `p_beyond_band` (the test that the effect lies
outside the noise band, which is what a verdict claims). So that the CI printed beside a
verdict is the one it rests on, each comparison's CI is recomputed at its Holm step's level:
1 - alpha / (m - i) for the i-th smallest p (0-based) while the steps reject, and, for every
comparison after the first that does not, the level of that first non-rejected step. A CI at
those levels clears the band exactly when Holm rejects.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from bracket.stats import defaults as D
from bracket.stats.compare import (
    CONFOUNDED_VIF,
    UNDETERMINED,
    RoundsPlan,
    decide,
    plan_fields,
    plan_rounds,
    step_decide,
    wide_reason,
    with_rounds,
)


class Family(StrEnum):
    """Which comparisons share alpha (a comparison's `multiplicity.family`; bracket.article.verdicts words it)."""

    EXPERIMENT = "experiment"  # every comparison of the experiment with a test (arms x workloads)
    HOSTS = "hosts"  # every host comparison (hosts x arms x workloads)
    WORKLOADS = "workloads"  # the workloads the command line compares


FAMILY = Family.EXPERIMENT


def holm_adjust(p) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p-values, equal to statsmodels' multipletests(method="holm"), and the ascending order.

    adjusted p of the i-th smallest (0-based) = max over j <= i of min(1, (m - j) p_(j)).

    Kept by hand rather than calling statsmodels (pinned, 0.15.0): its Holm branch runs gc.collect() on
    every call, measured at 0.24 s a call in a running analysis on this 2-core machine (5 calls of 30
    p-values: 1.22 s, all in gc.collect), where this takes microseconds; the design's simulations
    (bench/, stats.planning) adjust thousands of families. tests/test_holm_statsmodels.py checks that
    both give the same adjusted p-values on 400 families (sizes 1-40, ties, 0 and 1).
    """
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.empty(m)
    adj[order] = np.maximum.accumulate(steps)
    return adj, order


def holm(rows: list[dict], confidence: float = D.CONFIDENCE, family: Family = FAMILY) -> int:
    """Adjust `rows` (Comparison dicts) in place; returns the family size m.

    Rows without a test (undetermined for lack of blocks) are outside the family and keep their
    verdict. Each row in it gets p_adjusted (Holm), ci_low / ci_high at its step's
    level (ci_level: the interval the verdict rests on), the verdict those decide, rounds_needed at that level, and
    multiplicity {method, comparisons, family, level}.
    """
    alpha = 1 - confidence
    idx = [
        i
        for i, r in enumerate(rows)
        if r.get("p_beyond_band") is not None and r.get("se") is not None and r.get("vif", 1.0) <= CONFOUNDED_VIF
    ]
    m = len(idx)
    if m == 0:
        return 0
    p = np.array([rows[i]["p_beyond_band"] for i in idx], dtype=float)
    p_adj, order = holm_adjust(p)
    reject = p_adj < alpha
    level = np.empty(m)
    stop = None
    for step, j in enumerate(order):
        if stop is None and not reject[j]:
            stop = step
        level[j] = 1 - alpha / (m - (step if stop is None else stop))
    for j, i in enumerate(idx):
        r = rows[i]
        v, lo, hi = decide(r["estimate"], r["se"], r["df"], r["noise_band"], float(level[j]), None, r.get("thin"))
        v, lo, hi, step = step_decide(v, lo, hi, r.get("steps"), r["noise_band"], float(level[j]))
        if lo is not None:
            r.update(ci_low=lo, ci_high=hi, ci_level=float(level[j]))
        r.update(
            verdict=v,
            p_adjusted=float(p_adj[j]),
            multiplicity={
                "method": "holm" if m > 1 else "none",
                "comparisons": m,
                "family": family,
                "level": float(level[j]),
            },
        )
        if m > 1:  # the rounds planned at this comparison's Holm level, as the CI shown beside it
            var = max(r.get("block_var") or 0.0, r.get("within_var") or 0.0)
            r.update(plan_fields(plan_rounds(var, r["estimate"], r["noise_band"], float(level[j]), var_df=r["df"])))
        if v != UNDETERMINED:
            r["undetermined"] = None
        else:
            r["undetermined"] = with_rounds(
                step or r.get("thin") or wide_reason(lo, hi, r["noise_band"]),
                RoundsPlan(
                    r.get("rounds_needed"),
                    r.get("rounds_needed_for"),
                    r.get("rounds_needed_effect"),
                    r.get("rounds_needed_power"),
                    r.get("rounds_needed_goal"),
                ),
                min(r["blocks_baseline"], r["blocks_candidate"]),
            ).record()
    return m
