"""The numbers and judgements the article states, decided in bracket.stats and worked out by hand here:
the reference against the ceiling (stats/efficiency.py), the draft budget's effect and tokens per event
(stats/speculative.py), and the design as it ran (stats/design_ran.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from bracket.stats import speculative as spec
from bracket.stats.design_ran import design_ran
from bracket.stats.drift import worst
from bracket.stats.efficiency import FLAT, above_ceiling, reference_reading, regime, spread


@pytest.mark.parametrize(
    "eff, said",
    [
        (1.0001, "above the ceiling"),
        (1.0, "bandwidth-bound"),
        (0.7, "bandwidth-bound"),
        (0.6999, "partly bandwidth-bound"),
        (0.3, "partly bandwidth-bound"),
        (0.2999, "far below"),
        (0.0, "far below"),
    ],
)
def test_the_regime_at_its_edges(eff, said):
    assert regime(eff) == said


def test_the_reference_reading_worked_by_hand():
    # ceiling 50 tok/s; the reference's medians 10.0, 10.4, 10.2 on code, prose, chat
    rows = [
        {"workload": w, "arm": a, "median": m, "efficiency": m / 50}
        for w, a, m in [
            ("chat", "base", 10.2),
            ("code", "base", 10.0),
            ("prose", "base", 10.4),
            ("code", "other", 60.0),  # an arm without speculation above the ceiling
        ]
    ]
    r = reference_reading(rows, "base", ["code", "prose", "chat"])
    assert [w["workload"] for w in r["workloads"]] == ["code", "prose", "chat"]  # the experiment's order
    assert r["median"] == pytest.approx(10.2) and r["efficiency"] == pytest.approx(10.2 / 50)  # 0.204
    assert r["regime"] == "far below"
    # (10.4 - 10.0) / 10.2 = 0.0392: below 5 %, flat
    assert r["spread"] == pytest.approx(0.4 / 10.2) and r["flat"] is True and r["flat_below"] == FLAT == 0.05
    assert above_ceiling(rows) == [{"arm": "other", "workload": "code"}]
    # two workloads 10 and 12: (12 - 10) / 11 = 0.1818, not flat; the median of two is their mean
    two = reference_reading(rows[1:2] + [{**rows[0], "median": 12.0, "efficiency": 0.24}], "base", ["code", "chat"])
    assert two["spread"] == pytest.approx(2 / 11) and two["flat"] is False and two["median"] == pytest.approx(11.0)
    one = reference_reading(rows[1:2], "base", ["code"])
    assert one["spread"] is None and one["flat"] is None and spread([10.0]) is None
    assert reference_reading(rows, "absent", ["code"]) is None


def test_the_draft_budget_effect_worked_by_hand():
    groups = [{"method": "ngram", "arms": ["n4", "n8"], "budgets": [4, 8]}]
    medians = {("n4", "code"): 10.0, ("n8", "code"): 12.0, ("n4", "chat"): 10.0, ("n8", "chat"): 9.0, ("n4", "x"): 1.0}
    (g,) = spec.budget_effects(groups, medians, ["code", "chat", "x"])
    # 12 / 10 - 1 = +20 %, 9 / 10 - 1 = -10 %; workload x has no n8 median and is left out
    assert [(w["workload"], w["medians"]) for w in g["workloads"]] == [("code", [10.0, 12.0]), ("chat", [10.0, 9.0])]
    assert [w["change"] for w in g["workloads"]] == pytest.approx([0.2, -0.1])
    assert g["same_direction"] is False and g["method"] == "ngram"
    (same,) = spec.budget_effects(groups, {**medians, ("n8", "chat"): 11.0}, ["code", "chat"])
    assert same["same_direction"] is True
    (none,) = spec.budget_effects(groups, {}, ["code"])
    assert none["workloads"] == [] and none["same_direction"] is None


def test_tokens_per_event_counts_valid_speculative_runs_only():
    runs = pd.DataFrame(
        {
            "arm": ["s", "s", "s", "base"],
            "valid": [True, True, False, True],
            "draft_budget": [4, 4, 4, np.nan],
            "completion_tokens": [256, 256, 256, 256],
            "stream_events": [128, 64, 1, 256],
        }
    )
    # (256 / 128 + 256 / 64) / 2 = 3.0; the invalid run (256 per event) and the baseline are left out
    assert spec.tokens_per_event(runs) == [{"arm": "s", "tokens_per_event": 3.0}]
    assert spec.tokens_per_event(runs.drop(columns="stream_events")) == []


def test_the_design_that_ran_is_counted_in_the_runs():
    """Four blocks a, b, b, a over two rounds, two workloads, 1 warmup + 3 timed runs each; block 3 ran short
    on one workload (2 timed runs): the design ran is what the records say, not what the YAML asked."""
    rows = []
    for pos, arm in enumerate(["a", "b", "b", "a"]):
        for wl in ("code", "chat"):
            timed = 2 if (pos, wl) == (3, "chat") else 3
            for r in range(1 + timed):
                rows.append(
                    {"arm": arm, "block": pos, "position": pos, "round": pos // 2 + 1, "workload": wl, "warmup": r == 0}
                )
    ran = design_ran(pd.DataFrame(rows).sample(frac=1, random_state=1))  # any row order
    assert ran == {
        "rounds": 2,
        "blocks": 4,
        "order": ["a", "b", "b", "a"],
        "runs_per_block": 3,
        "runs_per_block_min": 2,
        "runs_per_block_max": 3,
        "warmup_runs": 1,
        "warmup_runs_min": 1,
        "warmup_runs_max": 1,
    }
    assert design_ran(pd.DataFrame({"arm": ["a"], "value": [1.0]})) is None  # a table without blocks


def test_the_reference_s_worst_drift_against_the_threshold():
    per = {"code": {"reference_first_vs_last": -0.03}, "chat": {"reference_first_vs_last": 0.02}, "x": {}}
    assert worst(per, 0.01) == {"change": 0.03, "workload": "code", "threshold": 0.01, "beyond": True}
    assert worst(per, 0.05)["beyond"] is False and worst(per, 0.03)["beyond"] is False  # beyond means more than
    assert worst({"code": {"reference_first_vs_last": None}}, 0.01) is None and worst({}, 0.01) is None
