"""A comparison's interval method, test and undetermined reason in words (stats.json holds them as data,
bracket.stats.reasons): the one place they become text, for the article and the command line alike.

A value that is already a string is an older stats.json's sentence, said as it was recorded.
"""

from __future__ import annotations

from bracket.stats.compare import FASTER
from bracket.stats.multiplicity import Family
from bracket.stats.reasons import Center, CiKind, Goal, Outcome, Structural, Variance, Why
from bracket.stats.results import CiMethod, SignificanceTest, Undetermined


def _summary(center) -> str:
    return "log block means (two paths)" if center == Center.MEAN else "log block medians"


def ci_method_words(m: CiMethod | dict | str | None) -> str:
    """Where a comparison's interval comes from: "OLS on log block medians, t with 4 df", ..."""
    if m is None or isinstance(m, str):
        return m or ""
    m = CiMethod.model_validate(m) if isinstance(m, dict) else m  # the command line's records, typed here
    kind = m.kind
    if kind == CiKind.REQUESTS_ONLY:
        return f"{m.bootstrap or 'bootstrap'}; requests only, block-to-block variation unmeasured"
    if kind == CiKind.ONE_BLOCK:
        return (
            f"{m.bootstrap or 'percentile'} bootstrap of {m.unit or 'requests'}; one block, so "
            f"block-to-block variation is unmeasured"
        )
    if kind == CiKind.BOOTSTRAP:
        return m.bootstrap or "percentile"
    if kind == CiKind.NO_BLOCK_DF:
        return "no residual degrees of freedom at the block level"
    what, block_df = _summary(m.center), m.block_df
    if m.variance == Variance.POOLED:
        return (
            f"OLS on {what}; block variance not above within-block noise (F test at {m.pool_alpha:g}), pooled "
            f"with it: t with {m.df:g} df"
        )
    if m.variance == Variance.FLOORED:
        return (
            f"OLS on {what}, t with {block_df} df; block variance below the within-block noise, which is its "
            f"floor (not pooled on {block_df} df)"
        )
    return f"OLS on {what}, t with {block_df} df"


FAMILIES = {
    Family.EXPERIMENT: "every comparison of the experiment with a test (arms x workloads)",
    Family.HOSTS: "every host comparison (hosts x arms x workloads)",
    Family.WORKLOADS: "the workloads compared here",
}


def family_words(family: str | None) -> str:
    """Which comparisons share alpha (`multiplicity.family`); an older file's words as recorded."""
    if not family:
        return "arms x workloads"
    return FAMILIES.get(family, family)


def _r(x: float) -> str:
    return f"{x:.3f}" if 1e-3 <= x <= 1e3 else f"{x:.2g}"


STRUCTURAL = {
    Structural.NO_RUNS: "an arm has no valid runs on this workload yet",
    Structural.FEW_BLOCKS: "fewer than two blocks per arm",
    Structural.CONFOUNDED: "arm confounded with time",
    Structural.NO_DF: "no block-level degrees of freedom yet",
    Structural.STEP: "the blocks so far cannot tell a level step from an effect (A/B/B/A after an odd round)",
}


def look_words(j: dict | str | None) -> str:
    """How one comparison stood at a look of an adaptive design (bracket.stats.sequential.judge's record, as
    stats.json's `sequential.comparisons[].look` and an undetermined comparison's `undetermined.look` hold
    it): "the repeated CI 1.050-1.120 lies above the 1.0% noise band", "open: ...", "budget spent: ..."."""
    if j is None:
        return "not looked at yet"
    if isinstance(j, str):
        return j
    outcome, band, margin = j.get("outcome"), j.get("noise_band"), j.get("margin")
    stage = "open" if j.get("status") == "open" else "budget spent"
    if outcome == Outcome.STRUCTURAL:
        why = j.get("structural")
        return f"{stage}: {STRUCTURAL.get(why, why)}"
    lo, hi = j["rci_low"], j["rci_high"]
    if outcome == Outcome.CLEARS:
        text = (
            f"the repeated CI {_r(lo)}-{_r(hi)} lies {'above' if j['verdict'] == FASTER else 'below'} the "
            f"{band:.1%} noise band"
        )
        if j.get("interval_look") is not None and j.get("interval_look") != j.get("look"):
            text += (
                f" (the interval of the look after round {j['interval_round']}, judged again at the level "
                f"{j['level']:.4g} recycled to it)"
            )
        return text
    if outcome == Outcome.EQUIVALENT:
        return f"equivalent within +/-{margin:.1%}: the repeated CI {_r(lo)}-{_r(hi)} lies inside it"
    eq = f" (at the equivalence level {_r(j['eq_low'])}-{_r(j['eq_high'])})" if j.get("eq_low") is not None else ""
    return (
        f"{stage}: the repeated CI {_r(lo)}-{_r(hi)} neither clears the {band:.1%} band nor lies within "
        f"+/-{margin:.1%}{eq}"
    )


def significance_words(t: SignificanceTest | dict | str | None) -> str:
    """The test a verdict rests on: "t test on log block medians (arm + drift), 3 df (pooled)", or none."""
    if t is None or isinstance(t, str):
        return t or ""
    t = SignificanceTest.model_validate(t) if isinstance(t, dict) else t
    if t.kind != "t":
        return "none: a test needs two blocks per arm"
    return (
        f"t test on {_summary(t.center)} ({'arm + drift' if t.drift_term else 'arm'}), "
        f"{t.df:g} df{' (pooled)' if t.pooled else ''}"
    )


def plan_words(power: float | None, effect: float | None, goal: str | None) -> str:
    """A plan in words: "80 % power to call a +5.0 % effect faster", "80 % power to settle ... as no measurable
    effect"; "" for an older file without power."""
    if power is None or effect is None:
        return ""
    if goal == Goal.WITHIN:
        return f"{power:.0%} power to settle as no measurable effect if the effect is {effect - 1:+.1%}"
    return f"{power:.0%} power to call a {effect - 1:+.1%} effect {'faster' if effect > 1 else 'slower'}"


def _rounds(u: Undetermined) -> str:
    """What to run instead: the A/B/A/B rounds of the plan, with its power and the effect it is for, where that
    is news (an older file's: the rounds for a CI of +/- half_width)."""
    if u.rounds_now is None:
        return ""
    plan = plan_words(u.power, u.effect, u.goal)
    if plan:
        if u.rounds_needed is None:
            return f"; more than {u.max_rounds_searched} rounds of A/B/A/B would be needed for {plan}"
        if u.rounds_needed > u.rounds_now:
            return f"; {u.rounds_needed} rounds of A/B/A/B would have {plan}"
        return ""
    target = f"+/-{u.half_width:.1%}" if u.half_width is not None else "the width that decides"
    if u.rounds_needed is None:
        return f"; more than {u.max_rounds_searched} rounds would be needed for a CI of {target}"
    if u.rounds_needed > u.rounds_now:
        return f"; about {u.rounds_needed} rounds of A/B/A/B would give a CI of {target}"
    return ""


def undetermined_words(u: Undetermined | dict | str | None) -> str:
    """Why a comparison has no verdict, and what would give one (a comparison's `undetermined`)."""
    if u is None or isinstance(u, str):
        return u or ""
    u = Undetermined.model_validate(u) if isinstance(u, dict) else u  # the command line's records, typed here
    why = u.why
    if why == Why.FEW_BLOCKS:
        return (
            f"{'one block' if u.blocks == 1 else 'no block'} for {'each arm' if u.arms_short == 2 else 'one arm'}: "
            f"how much fresh servers differ is not measured, and arm is confounded with time; run the arms "
            f"interleaved (design.kind: abab) for at least {u.rounds_needed} rounds"
        )
    if why == Why.CONFOUNDED:
        text = (
            f"arm is confounded with time (the drift term inflates the arm's variance {u.vif:.1f}-fold, as in a "
            f"sequential design): interleave the arms (design.kind: abab)"
        )
    elif why == Why.THIN:
        text = (
            f"{u.blocks} blocks leave {u.df:g} degree of freedom for block-to-block noise, too few to tell an "
            f"effect from it"
        )
    elif why == Why.WIDE:
        edge = 1 + u.wide * u.band
        text = (
            f"the CI {u.ci_low:.3f}-{u.ci_high:.3f} neither clears the {u.band:.1%} noise band nor stays "
            f"within {u.wide:g} x it ({1 / edge:.3f}-{edge:.3f}): too few blocks for their noise"
        )
    elif why == Why.STEP:
        step = f"{u.step_ci_low:.3f}-{u.step_ci_high:.3f}" if u.step_ci_high is not None else "no interval"
        text = (
            f"a level step before schedule position {u.at:g} (the machine changing speed once) would move the "
            f"arm while the drift line takes it for a slope: with the step in the line's place the CI is {step}, "
            f"with the line {u.ci_low:.3f}-{u.ci_high:.3f}, and the two do not agree on a verdict against the "
            f"{u.band:.1%} noise band. This order of blocks cannot tell a step there from an effect, as A/B/B/A "
            f"with an odd number of rounds cannot; an even number of A/B/B/A rounds, or A/B/A/B, can"
        )
    elif why == Why.SEQUENTIAL:
        look = look_words(u.look)
        text = (
            look
            if u.status == "settled"
            else f"still open after {u.rounds_run} of at most {u.max_rounds} rounds ({look})"
        )
        return f"{text}; raise design.max_rounds or state the smallest difference that matters as design.margin"
    else:
        return str(u.text or why or "")
    return text + _rounds(u)
