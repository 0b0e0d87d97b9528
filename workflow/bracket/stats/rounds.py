"""How many A/B/A/B rounds would decide a comparison: the power of a fixed design, and the plan an
undetermined comparison is told to run (bracket.stats.compare).

The arm effect is the drift-adjusted OLS coefficient on log block medians (bracket.stats.blocks); in A/B/A/B
with r rounds its variance is block_var x [(X'X)^-1]_arm (`abab_variance_factor`), on 2r - 3 df.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from bracket.stats import defaults as D
from bracket.stats.reasons import Goal, Undetermined

#: A CI reaching past WIDE x band on either side is too wide for "no measurable effect" (see `too_wide`).
WIDE = 2.0
#: Most rounds `rounds_needed` searches.
MAX_ROUNDS = 200
#: Power the rounds an undetermined comparison is told to run are planned for (`plan_rounds`).
PLAN_POWER = 0.8
#: One-sided level of the upper bound on the block variance that plan uses: a few blocks know it only roughly,
#: and a plan on the point estimate falls short of its power about half the time (bench/rounds_plan.py).
PLAN_NOISE = 0.75


def abab_variance_factor(rounds: int) -> float:
    """[(X'X)^-1] of the arm term in A/B/A/B with `rounds` rounds, X = [1, arm, position]."""
    pos = np.arange(2 * rounds, dtype=float)
    arm = pos % 2
    X = np.column_stack([np.ones(pos.size), arm, pos])
    return float(np.linalg.pinv(X.T @ X)[1, 1])


_ABAB_FACTORS = np.array([abab_variance_factor(r) for r in range(2, MAX_ROUNDS + 1)])


def rounds_needed(block_var: float, half_width: float, confidence: float = D.CONFIDENCE) -> int | None:
    """Fewest A/B/A/B rounds whose drift-adjusted CI of the log ratio is at most +/- half_width.

    Expected half-width t(2r - 3) x sqrt(block_var x factor(r)), block_var the variance of one
    block median at the current runs per block (from the variance components). None when more
    than MAX_ROUNDS would be needed.
    """
    if not half_width > 0:
        return None
    r = np.arange(2, MAX_ROUNDS + 1)
    hw = stats.t.ppf(0.5 + confidence / 2, 2 * r - 3) * np.sqrt(max(block_var, 0.0) * _ABAB_FACTORS)
    ok = np.flatnonzero(hw <= half_width)
    return int(r[ok[0]]) if ok.size else None


@dataclass(frozen=True)
class RoundsPlan:
    """The A/B/A/B rounds at which a comparison reaches `goal` with `power` for a true ratio `effect` (None: more
    than MAX_ROUNDS), and its expected CI half-width there (a fraction)."""

    rounds: int | None
    half_width: float | None
    effect: float
    power: float
    goal: Goal


def power_at(rounds, block_var: float, effect: float, band: float, level: float, goal: Goal) -> np.ndarray:
    """Power of a fixed A/B/A/B design of `rounds` rounds (drift-adjusted block fit, t on 2 rounds - 3 df, block
    medians of variance `block_var`) for a true log ratio `effect`.

    clear: the CI at `level` lies beyond the band on the effect's side, P(T'(df, (|effect| - edge) / se) > t)
    with T' noncentral t (the one-sided t test of the arm against the band's edge). within: the CI lies within
    WIDE x band, P(-w + t se < estimate < w - t se), the estimate t-distributed about the effect (se taken as
    known: slightly generous at few rounds)."""
    r = np.asarray(rounds, dtype=int)
    df = 2 * r - 3
    se = np.sqrt(max(block_var, 1e-300) * _ABAB_FACTORS[r - 2])
    q = stats.t.ppf(0.5 + level / 2, df)
    edge = math.log(1 + band)
    if goal == Goal.CLEAR:
        return stats.nct.sf(q, df, (abs(effect) - edge) / se)
    w = math.log(1 + WIDE * band)
    return np.clip(stats.t.cdf((w - q * se - effect) / se, df) - stats.t.cdf((-w + q * se - effect) / se, df), 0, 1)


def plan_rounds(
    block_var: float,
    estimate: float,
    band: float,
    level: float = D.CONFIDENCE,
    *,
    var_df: float | None = None,
    effect: float | None = None,
    power: float = PLAN_POWER,
) -> RoundsPlan:
    """The fewest A/B/A/B rounds with `power` to decide, from a block variance measured on `var_df` df.

    The effect planned for: `effect` (a ratio the reader cares about) when given, planned to clear the band;
    else the effect measured (`estimate`, log), planned to clear the band where it lies beyond it and to settle
    as "no measurable effect" (the CI within WIDE x band) where it lies within WIDE x band, whichever is
    reached in fewer rounds. The block variance is taken at the upper end
    of its one-sided PLAN_NOISE interval on var_df df (chi-square), none when var_df is None (a floor, as with
    one block per arm)."""
    v = max(block_var, 0.0)
    if var_df and var_df > 0:
        v = v * var_df / stats.chi2.ppf(1 - PLAN_NOISE, var_df)
    if effect is not None:
        goals = [(math.log(effect), Goal.CLEAR)]
    else:
        # the measured effect beyond the band may clear it, within WIDE x band may settle: the sooner of the two
        goals = [(estimate, g) for g in (Goal.CLEAR, Goal.WITHIN)]
        goals = goals[:1] if abs(estimate) >= math.log(1 + WIDE * band) else goals
        goals = goals[1:] if abs(estimate) <= math.log(1 + band) else goals
    r = np.arange(2, MAX_ROUNDS + 1)
    found = []
    for target, goal in goals:
        ok = np.flatnonzero(power_at(r, v, target, band, level, goal) >= power)
        found.append((int(r[ok[0]]) if ok.size else MAX_ROUNDS + 1, target, goal))
    rounds, target, goal = min(found, key=lambda f: f[0])
    rounds = rounds if rounds <= MAX_ROUNDS else None
    hw = None
    if rounds is not None:
        hw = float(math.expm1(stats.t.ppf(0.5 + level / 2, 2 * rounds - 3) * math.sqrt(v * _ABAB_FACTORS[rounds - 2])))
    return RoundsPlan(rounds, hw, float(math.exp(target)), power, goal)


def with_rounds(reason: Undetermined | dict, plan: RoundsPlan, rounds_now: int) -> Undetermined:
    """The undetermined reason with what to run instead: the plan's A/B/A/B rounds (None: more than MAX_ROUNDS),
    its power, effect and goal, news when above `rounds_now`."""
    if isinstance(reason, dict):
        reason = Undetermined(**reason)
    return dataclasses.replace(
        reason,
        rounds_needed=plan.rounds,
        half_width=plan.half_width,
        power=plan.power,
        effect=plan.effect,
        goal=plan.goal,
        rounds_now=rounds_now,
        max_rounds_searched=MAX_ROUNDS,
    )


def plan_fields(plan: RoundsPlan) -> dict:
    """A comparison's rounds_needed* fields from its plan."""
    return dict(
        rounds_needed=plan.rounds,
        rounds_needed_for=plan.half_width,
        rounds_needed_power=plan.power,
        rounds_needed_effect=plan.effect,
        rounds_needed_goal=plan.goal,
    )
