"""A level step the drift line cannot see (bracket.stats.steps) and the comparison's check against it (issue 43)."""

import math

import numpy as np
import pytest
from bracket.article.verdicts import undetermined_words
from bracket.stats.cells import compare_arms
from bracket.stats.compare import FASTER, UNDETERMINED, step_decide
from bracket.stats.io import from_table
from bracket.stats.multiplicity import holm
from bracket.stats.reasons import Why
from bracket.stats.simulate import simulate
from bracket.stats.steps import StepFit, exposures


def test_abba_with_three_rounds_is_exposed_at_its_middle_by_hand():
    """A B B A A B at positions 0-5, X = [1, arm, position]: X'X = [[6, 3, 15], [3, 3, 8], [15, 8, 55]] and, for
    the step h = 0 0 0 1 1 1, X'h = (3, 1, 12). Solving gives the arm's shift b = -11/26, the residual M h has
    squares summing to 1/13 on 3 df (r^2 = 1/39), and [(X'X)^-1]_arm = 35/52, so q = (11/26) / sqrt(35 / 2028)."""
    [e] = exposures([0, 1, 2, 3, 4, 5], [0, 1, 1, 0, 0, 1])
    assert e.at == 3
    assert e.shift == pytest.approx(-11 / 26)
    assert e.residual**2 == pytest.approx(1 / 39)
    assert e.q == pytest.approx((11 / 26) / math.sqrt(35 / 2028))  # 3.22


@pytest.mark.parametrize(
    "arm",
    [
        [0, 1, 0, 1, 0, 1],  # A/B/A/B, 3 rounds
        [0, 1, 1, 0, 0, 1, 1, 0],  # A/B/B/A, 4 rounds
        [0, 1, 1, 0, 0, 1, 1, 0, 0, 1],  # A/B/B/A, 5 rounds
        [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1],  # A/B/A/B, 8 rounds
    ],
)
def test_designs_that_see_every_step_are_not_exposed(arm):
    assert exposures(range(len(arm)), arm) == []


def _abba3(effect, seed, step=-0.08, block_sd=0.0):
    df = simulate(
        "abba", rounds=3, effect=effect, step=step, step_at=3, block_sd=block_sd, rng=np.random.default_rng(seed)
    )
    return compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200)


@pytest.mark.parametrize("seed", [36, 58, 119])
def test_a_step_halfway_through_abba_no_longer_reads_as_faster(seed):
    """No true effect, a -8 % step before position 3 of A B B A A B, block sd 1 %, request sd 0.5 %: the line
    leaves the arm +3.4 % (0.42 x 8 %). On these datasets (8 of the first 300 seeds are such) its interval clears
    the band, a false "faster" without the check; the fit with the step there does not clear it."""
    c = _abba3(1.0, seed, block_sd=0.01)
    assert c.drift_adjusted_ci_low > 1 + c.noise_band  # the line alone: "faster"
    assert c.verdict == UNDETERMINED and c.undetermined["why"] == Why.STEP
    assert c.undetermined["at"] == 3 and c.undetermined["step_ci_low"] <= 1.0 <= c.undetermined["step_ci_high"]
    assert c.ci_low <= 1.0 <= c.ci_high  # the union judged on covers the truth
    assert c.p_beyond_band >= 0.05
    words = undetermined_words(c.undetermined)
    assert "position 3" in words and "A/B/A/B" in words


def test_an_effect_beyond_any_step_is_still_decided():
    c = _abba3(1.25, 0)
    assert c.verdict == FASTER and c.steps and c.undetermined is None
    assert c.ci_low < c.drift_adjusted_ci_low  # the interval is the union's


def test_abab_carries_no_step_fits():
    df = simulate("abab", rounds=3, effect=1.05, block_sd=0.0, rng=np.random.default_rng(1))
    c = compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200)
    assert c.steps is None and c.verdict == FASTER


def test_step_decide_by_hand():
    """Line interval 1.03-1.06 against a 1 % band; a step fit of estimate 0 and se 0.01 on 1,000 df gives about
    0.980-1.020: the union 0.980-1.06 clears nothing, so "faster" becomes undetermined, naming the step."""
    fit = StepFit(at=3.0, estimate=0.0, se=0.01, df=1000.0, q=3.2)
    v, lo, hi, why = step_decide(FASTER, 1.03, 1.06, [fit.record()], 0.01, 0.95)
    assert v == UNDETERMINED and why.why == Why.STEP
    assert lo == pytest.approx(math.exp(-1.96234 * 0.01), rel=1e-4) and hi == 1.06
    far = StepFit(at=3.0, estimate=0.05, se=0.01, df=1000.0, q=3.2)
    assert step_decide(FASTER, 1.03, 1.06, [far], 0.01, 0.95)[0] == FASTER


def test_holm_keeps_the_step_check():
    """One comparison in the family: Holm's level is the comparison's own, and the step check still stands."""
    rows = [dict(_abba3(1.0, 36, block_sd=0.01).__dict__)]
    holm(rows)
    assert rows[0]["verdict"] == UNDETERMINED and rows[0]["undetermined"]["why"] == Why.STEP


def test_an_adaptive_abba_design_does_not_judge_after_an_odd_round():
    """A/B/B/A looked at after round 3 (A B B A A B) cannot see a step at its middle: that look is structural, and a
    large effect settles at the next look, after round 4."""
    from bracket.article.verdicts import look_words
    from bracket.stats.reasons import Structural
    from bracket.stats.sequential import Plan, assess

    plan = Plan(arms=("A", "B"), reference="A", workloads=("sim",), kind="abba", seed=1, min_rounds=2, max_rounds=6)
    df = simulate("abba", rounds=6, effect=1.3, block_sd=0.005, rng=np.random.default_rng(0))
    [c] = assess(from_table(df), plan)["comparisons"]
    first = c["looks"][0]
    assert first["round"] == 3 and first["structural"] == Structural.STEP
    assert "level step" in look_words(first)
    assert c["verdict"] == FASTER and c["settled_round"] == 4
