"""The quality gate's statistics (bracket.stats.quality): hand-calculated intervals, verdicts, Holm, calibration."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from bracket.stats.quality import (
    _p_from_interval,
    accuracy_gate,
    margin_from_perplexity_percent,
    newcombe_paired,
    newcombe_unpaired,
    nll_gate,
    non_inferiority,
    simulate_answers,
    tango_paired,
    tango_statistic,
    wilson,
)
from bracket.stats.results.quality import AccuracyGate, CiMethod, NllGate, Verdict
from pydantic import ValidationError


def test_wilson_by_hand():
    # 8/10 at 95 % with z = 1.96: z^2/n = 0.38416, centre = (0.8 + 0.19208)/1.38416 = 0.716738,
    # half = 1.96/1.38416 * sqrt(0.016 + 0.009604) = 0.226580 (z = 1.959964 moves the ends by 5e-6)
    lo, hi = wilson(8, 10)
    assert (lo, hi) == pytest.approx((0.490158, 0.943318), abs=1e-5)
    # 0/10: the lower end is 0 and the upper z^2/(n + z^2) = 3.8416/13.8416
    assert wilson(0, 10) == pytest.approx((0.0, 3.8416 / 13.8416), abs=1e-4)
    with pytest.raises(ValueError):
        wilson(11, 10)


def test_newcombe_paired_by_hand():
    # Bentur et al. 2009 (Fagerland, Lydersen & Laake, ch. 8): a=1, b=1, c=7, d=12, n=21.
    # p1 = 2/21, p2 = 8/21; Wilson(2,21) = (0.026517, 0.289147), Wilson(8,21) = (0.207509, 0.591219);
    # A = ad - bc = 5 lies in [0, n/2], so phi = 0:
    # L = -0.285714 - sqrt(0.068721^2 + 0.210267^2) = -0.506926, U = -0.285714 + sqrt(0.193909^2 + 0.173443^2)
    lo, hi = newcombe_paired(1, 1, 7, 12)
    assert (lo, hi) == pytest.approx((-0.506926, -0.025555), abs=2e-5)
    # swapping the arms mirrors the interval
    assert newcombe_paired(1, 7, 1, 12) == pytest.approx((-hi, -lo), abs=1e-12)


def test_newcombe_paired_uses_the_correlation():
    # Highly concordant pairs (A > n/2): phi > 0 narrows the interval against phi = 0 (the unpaired width).
    a, b, c, d = 80, 2, 8, 10
    lo, hi = newcombe_paired(a, b, c, d)
    ulo, uhi = newcombe_unpaired(a + b, 100, a + c, 100)
    assert lo == pytest.approx(lo) and hi - lo < 0.8 * (uhi - ulo)
    assert lo < (b - c) / 100 < hi


def test_newcombe_unpaired_agrees_with_statsmodels():
    from statsmodels.stats.proportion import confint_proportions_2indep

    for x1, n1, x2, n2 in [(56, 70, 48, 80), (9, 10, 3, 10), (0, 20, 5, 25)]:
        ref = confint_proportions_2indep(x1, n1, x2, n2, method="newcomb", compare="diff")
        assert newcombe_unpaired(x1, n1, x2, n2) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize(
    "lo, hi, margin, better, verdict",
    [
        (-0.01, 0.04, 0.02, True, Verdict.HELD),
        (-0.03, 0.01, 0.02, True, Verdict.UNDETERMINED),
        (-0.08, -0.03, 0.02, True, Verdict.LOST),
        (-0.05, -0.01, 0.02, True, Verdict.UNDETERMINED),  # worse, but maybe not by the margin
        (0.001, 0.008, 0.01, False, Verdict.HELD),  # NLL: higher is worse
        (0.02, 0.05, 0.01, False, Verdict.LOST),
        (-0.01, 0.02, 0.01, False, Verdict.UNDETERMINED),
    ],
)
def test_verdicts(lo, hi, margin, better, verdict):
    assert non_inferiority(lo, hi, margin, better) is verdict


def _frame(tables: dict[str, tuple[int, int, int, int]]) -> pd.DataFrame:
    """A reference and candidates on the same n items, each candidate's 2x2 table against the reference."""
    rows = []
    for arm, (a, b, c, d) in tables.items():
        cand = [True] * a + [True] * b + [False] * c + [False] * d
        ref = [True] * a + [False] * b + [True] * c + [False] * d
        rows += [(arm, i, x) for i, x in enumerate(cand)]
        if not any(r[0] == "ref" for r in rows):
            rows += [("ref", i, x) for i, x in enumerate(ref)]
    return pd.DataFrame(rows, columns=["arm", "item", "correct"])


def test_tango_by_hand():
    # Bentur et al.: b = 1, c = 7, n = 21. At delta 0: A = 42, B = -8, C = 0, q = (8 + 8)/84 = 4/21,
    # T = (1 - 7)/sqrt(21 * 8/21) = -6/sqrt(8)
    assert tango_statistic(1, 7, 21, 0.0) == pytest.approx(-6 / math.sqrt(8), abs=1e-12)
    lo, hi = tango_paired(1, 1, 7, 12)
    z = NormalDist().inv_cdf(0.975)
    # the ends are where the statistic is +z and -z, around the estimate -6/21
    assert tango_statistic(1, 7, 21, lo) == pytest.approx(z, abs=1e-6)
    assert tango_statistic(1, 7, 21, hi) == pytest.approx(-z, abs=1e-6)
    assert lo < -6 / 21 < hi < 0
    assert (lo, hi) == pytest.approx((-0.51723, -0.02600), abs=1e-5)
    assert tango_paired(1, 7, 1, 12) == pytest.approx((-hi, -lo), abs=1e-8)  # swapped arms mirror it
    assert tango_paired(10, 0, 0, 10) == pytest.approx((-0.161125, 0.161125), abs=1e-6)  # no discordant pair


def test_gate_paired_case_and_its_p_value():
    df = _frame({"cand": (1, 1, 7, 12)})
    g = accuracy_gate(df, "ref", margin=0.02)
    (c,) = g.comparisons
    assert (c.paired, c.table, c.ci_method, c.ci_level) == (True, (1, 1, 7, 12), CiMethod.TANGO_PAIRED, 0.95)
    assert (c.ci_low, c.ci_high) == pytest.approx(tango_paired(1, 1, 7, 12), abs=1e-9)
    assert c.difference == pytest.approx(-6 / 21) and c.verdict is Verdict.LOST and c.differs
    assert [a.accuracy for a in g.arms] == pytest.approx([2 / 21, 8 / 21])
    # the p-value is Tango's test at the margin; at level 1 - 2p the interval's lower end is -margin
    df = _frame({"cand": (150, 10, 5, 35)})
    (c,) = accuracy_gate(df, "ref", margin=0.03).comparisons
    assert c.p_value == pytest.approx(1 - NormalDist().cdf(tango_statistic(10, 5, 200, -0.03)))
    assert tango_paired(150, 10, 5, 35, 1 - 2 * c.p_value)[0] == pytest.approx(-0.03, abs=1e-7)
    assert c.verdict is Verdict.HELD and c.p_value < 0.025


def test_unpaired_where_the_items_differ():
    df = pd.DataFrame(
        [("ref", i, i < 8) for i in range(10)] + [("cand", 100 + i, i < 6) for i in range(10)],
        columns=["arm", "item", "correct"],
    )
    (c,) = accuracy_gate(df, "ref").comparisons
    assert not c.paired and c.table is None and c.ci_method is CiMethod.NEWCOMBE_UNPAIRED
    assert (c.ci_low, c.ci_high) == pytest.approx(newcombe_unpaired(6, 10, 8, 10), abs=1e-12)


def test_holm_across_arms():
    # Three candidates: one clearly held, one near the margin, one clearly lost.
    df = _frame({"good": (180, 10, 2, 8), "edge": (170, 8, 12, 10), "bad": (150, 2, 40, 8)})
    g = accuracy_gate(df, "ref", margin=0.03)
    assert g.holm_family == 3
    by = {c.arm: c for c in g.comparisons}
    p = np.array([by[a].p_value for a in ("good", "edge", "bad")])
    order = np.argsort(p)
    adj = np.maximum.accumulate(np.minimum(1, (3 - np.arange(3)) * p[order]))
    assert [by[a].p_adjusted for a in np.array(["good", "edge", "bad"])[order]] == pytest.approx(adj)
    for c in g.comparisons:  # held exactly where Holm rejects, at the interval shown
        assert (c.verdict is Verdict.HELD) == (c.p_adjusted < 0.025) == (c.ci_low > -0.03)
    assert by["good"].verdict is Verdict.HELD and by["bad"].verdict is Verdict.LOST
    assert by["good"].ci_level == pytest.approx(1 - 0.05 / 3)  # the first Holm step
    assert by["bad"].p_value > 0.5


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match="lacks column"):
        accuracy_gate(pd.DataFrame({"arm": ["a"], "correct": [True]}), "a")
    df = pd.DataFrame({"arm": ["ref", "ref"], "item": [1, 1], "correct": [True, False]})
    with pytest.raises(ValueError, match="twice"):
        accuracy_gate(df, "ref")
    df = pd.DataFrame({"arm": ["ref"], "item": [1], "correct": [None]})
    with pytest.raises(ValueError, match="true or false"):
        accuracy_gate(df, "ref")
    with pytest.raises(ValueError, match="reference arm 'x'"):
        accuracy_gate(pd.DataFrame({"arm": ["ref"], "item": [1], "correct": [True]}), "x")


def test_results_are_frozen_and_described():
    g = accuracy_gate(_frame({"cand": (1, 1, 7, 12)}), "ref")
    with pytest.raises(ValidationError):
        g.margin = 0.5
    assert isinstance(g.arms, tuple) and isinstance(g.comparisons, tuple)
    for model in (AccuracyGate, NllGate):
        schema = model.model_json_schema()
        for name, defn in [(model.__name__, schema), *schema.get("$defs", {}).items()]:
            for field, spec in defn.get("properties", {}).items():
                assert spec.get("description"), f"{name}.{field} has no description"
    assert AccuracyGate.model_validate_json(g.model_dump_json()) == g


def _nll_frame(ref: list[float], cand: list[float], tokens: list[int]) -> pd.DataFrame:
    rows = [("ref", i, v, t) for i, (v, t) in enumerate(zip(ref, tokens))]
    rows += [("cand", i, v, t) for i, (v, t) in enumerate(zip(cand, tokens))]
    return pd.DataFrame(rows, columns=["arm", "doc", "nll", "tokens"])


def test_nll_per_token_by_hand_and_a_constant_difference():
    tokens = [10, 20, 30, 40]
    ref = [20.0, 50.0, 60.0, 100.0]  # 230 nats over 100 tokens: 2.3 per token
    cand = [r + 0.05 * t for r, t in zip(ref, tokens)]  # 0.05 nats per token worse on every document
    g = nll_gate(_nll_frame(ref, cand, tokens), "ref", margin=0.1, resamples=500, rng=1)
    r, c = g.arms
    assert (r.nll_per_token, r.tokens, r.documents) == (pytest.approx(2.3), 100, 4)
    assert r.perplexity == pytest.approx(math.exp(2.3))
    (d,) = g.comparisons
    # every resample sees the same 0.05: the paired interval is that point
    assert (d.difference, d.ci_low, d.ci_high) == pytest.approx((0.05, 0.05, 0.05))
    assert d.verdict is Verdict.HELD and d.differs and d.perplexity_ratio == pytest.approx(math.exp(0.05))
    assert d.p_value == pytest.approx(1 / 501)
    g = nll_gate(_nll_frame(ref, cand, tokens), "ref", margin=0.01, resamples=500, rng=1)
    assert g.comparisons[0].verdict is Verdict.LOST


def test_nll_paired_bootstrap_sees_what_unpaired_could_not():
    # Documents differ widely in difficulty; the candidate is 0.02 nats/token worse on each, with small noise.
    rng = np.random.default_rng(5)
    tokens = rng.integers(50, 400, 120)
    per_doc = rng.normal(3.0, 0.8, 120)
    ref = per_doc * tokens
    cand = (per_doc + 0.02 + rng.normal(0, 0.005, 120)) * tokens
    g = nll_gate(_nll_frame(list(ref), list(cand), list(tokens)), "ref", margin=margin_from_perplexity_percent(5))
    (d,) = g.comparisons
    assert d.ci_low > 0 and d.differs  # the loss is seen
    assert d.verdict is Verdict.HELD  # and it is within 5 % of perplexity (0.0488 nats)
    # the arms' own intervals overlap almost wholly: only the pairing separates them
    r, c = g.arms
    assert c.ci_low < r.ci_high
    assert margin_from_perplexity_percent(5) == pytest.approx(math.log(1.05))


def test_nll_frames_are_checked():
    with pytest.raises(ValueError, match="finite nll"):
        nll_gate(_nll_frame([1.0, float("nan")], [1.0, 2.0], [5, 5]), "ref")
    with pytest.raises(ValueError, match="tokens > 0"):
        nll_gate(_nll_frame([1.0, 2.0], [1.0, 2.0], [5, 0]), "ref")
    with pytest.raises(ValueError, match="rng"):
        nll_gate(_nll_frame([1.0, 2.0], [1.0, 2.0], [5, 5]), "ref", rng=None)


def test_p_value_inversion_on_both_sides():
    def interval(z):
        return (-0.01 - 0.02 * z, -0.01 + 0.02 * z)  # estimate -0.01, se 0.02

    # above the bound -0.03: p = 1 - Phi(1); below the bound 0.01 (as if the margin were negative): Phi(1)
    assert _p_from_interval(interval, -0.01, -0.03) == pytest.approx(0.158655, abs=1e-6)
    assert _p_from_interval(interval, -0.01, 0.01) == pytest.approx(0.841345, abs=1e-6)


def test_calibration_small_seeded():
    """At the margin (88 % against 85 %, margin 3 points) the gate passes at most about 2.5 % of tasks;
    at no loss it passes often on 500 correlated items. 150 runs each (the bench runs 500 per row)."""
    rng = np.random.default_rng(11)
    false_pass = sum(
        accuracy_gate(simulate_answers(300, {"ref": 0.88, "cand": 0.85}, 1.5, rng), "ref", 0.03).comparisons[0].verdict
        is Verdict.HELD
        for _ in range(150)
    )
    power = sum(
        accuracy_gate(simulate_answers(500, {"ref": 0.88, "cand": 0.88}, 4.0, rng), "ref", 0.03).comparisons[0].verdict
        is Verdict.HELD
        for _ in range(150)
    )
    # a one-sided 2.5 % test: 150 runs give 3.75 expected; 10 or more would mean a rate near 7 % or worse
    assert false_pass < 10
    assert power > 75  # measured well above half on correlated answers (bench/results/quality_gate.md)


def test_simulated_answers_have_the_stated_accuracy():
    df = simulate_answers(200_000, {"a": 0.88, "b": 0.7}, 2.0, 3)
    acc = df.groupby("arm")["correct"].mean()
    assert acc["a"] == pytest.approx(0.88, abs=0.003) and acc["b"] == pytest.approx(0.7, abs=0.004)
