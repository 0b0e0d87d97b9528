"""rounds_needed as a plan: the rounds at which a comparison reaches 80 % power for a stated effect (issue 43)."""

import math

import numpy as np
import pytest
from bracket.article.text import rounds_needed
from bracket.article.verdicts import undetermined_words
from bracket.stats.cells import compare_arms
from bracket.stats.compare import PLAN_POWER, UNDETERMINED, plan_rounds, power_at
from bracket.stats.io import from_table
from bracket.stats.reasons import Goal
from bracket.stats.simulate import simulate
from scipy import stats


def test_power_at_the_band_edge_is_the_tail_by_hand():
    """A/B/A/B, 2 rounds: X'X = [[4, 2, 6], [2, 2, 4], [6, 4, 14]] (arm 0 1 0 1, positions 0-3), det 16, cofactor of
    the arm 4 x 14 - 6 x 6 = 20: [(X'X)^-1]_arm = 1.25. A true effect on the band's edge has noncentrality 0: the
    CI clears the band with chance (1 - 0.95) / 2 whatever the noise."""
    p = power_at([2], 0.01**2 / 1.25, math.log(1.01), 0.01, 0.95, Goal.CLEAR)
    assert p[0] == pytest.approx(0.025)
    # one t quantile (12.706 on 1 df) of standard errors beyond the edge: P((Z + 12.706) / sqrt(chi2_1) > 12.706),
    # 0.682 in 200,000 draws (the noncentral t is skewed right: above its noncentrality more than half the time)
    q = stats.t.ppf(0.975, 1)
    p = power_at([2], 0.01**2 / 1.25, math.log(1.01) + q * 0.01, 0.01, 0.95, Goal.CLEAR)
    assert p[0] == pytest.approx(0.682, abs=0.005)


def test_the_plan_is_the_first_round_with_the_power():
    plan = plan_rounds(0.02**2, math.log(1.05), 0.01)
    assert plan.goal == Goal.CLEAR and plan.power == PLAN_POWER and plan.effect == pytest.approx(1.05)
    r = plan.rounds
    before, at = power_at([r - 1, r], 0.02**2, math.log(1.05), 0.01, 0.95, Goal.CLEAR)
    assert before < PLAN_POWER <= at
    # the variance measured on 5 df, planned on the upper end of its interval: more rounds, never fewer
    assert plan_rounds(0.02**2, math.log(1.05), 0.01, var_df=5).rounds > r
    # inside the band: planned to settle as no measurable effect
    assert plan_rounds(0.02**2, 0.0, 0.01).goal == Goal.WITHIN


def test_an_undetermined_comparison_states_its_plan():
    df = simulate("abab", rounds=4, effect=1.05, block_sd=0.03, rng=np.random.default_rng(3), seed=1)
    c = compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200)
    assert c.verdict == UNDETERMINED and c.rounds_needed > 4
    assert c.rounds_needed_power == 0.8 and c.rounds_needed_goal == Goal.CLEAR
    assert c.rounds_needed_effect == pytest.approx(c.ratio)  # the effect measured, which the reader sees beside it
    assert c.undetermined["power"] == 0.8 and c.undetermined["rounds_needed"] == c.rounds_needed
    said = f"{c.rounds_needed} rounds of A/B/A/B would have 80% power to call a {c.ratio - 1:+.1%} effect faster"
    assert said in undetermined_words(c.undetermined)
    assert (
        rounds_needed(c)  # the comparison as analysed: the presenter reads its attributes, as of the typed one
        == f"run {c.rounds_needed} rounds for 80% power to call a {c.ratio - 1:+.1%} effect faster"
    )
