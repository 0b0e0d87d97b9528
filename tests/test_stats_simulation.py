"""A light version of bench/design_efficiency.py: the analysis says what is true.

The bench script runs 200 repetitions per cell through the CLI and commits its table; here 60
keep the suite fast, with thresholds set a few binomial standard errors inside the bench's
results. The done-when cases of issue 17 are in test_stats_blocks.py.
"""

import numpy as np
import pytest
from bracket.stats.bootstrap import Sample, ratio_of_medians
from bracket.stats.compare import FASTER, SLOWER, compare, comparison_drift, verdict
from bracket.stats.drift import round_changes
from bracket.stats.simulate import simulate
from bracket.stats.summary import median_ci
from scipy import stats


def _naive(a, b, rng):
    """Requests as the unit: pooled runs, independent bootstrap and Mann-Whitney U (what bracket did before)."""
    r = ratio_of_medians(Sample.of(a.value), Sample.of(b.value), rng=rng, n_resamples=400)
    p = stats.mannwhitneyu(b.value, a.value, alternative="two-sided").pvalue
    return verdict(r.ci_low, r.ci_high, p, 0.01, 0.05)


def _verdicts(design, effect, reps, naive=False, seed=0, rounds=2):
    rng = np.random.default_rng(seed)
    out = []
    for r in range(reps):
        df = simulate(design, effect=effect, drift=0.01, rng=rng, seed=r, rounds=rounds)
        a, b = df[df.arm == "A"], df[df.arm == "B"]
        if naive:
            out.append(_naive(a, b, rng))
            continue
        rc = round_changes(df)
        c = compare(
            Sample.of(a.value, a.block, a.position),
            Sample.of(b.value, b.block, b.position),
            drift=comparison_drift(rc["A"]["change"], rc["B"]["change"], None),
            rng=rng,
            n_resamples=400,
        )
        out.append(c.verdict)
    return np.array(out)


@pytest.mark.parametrize("rounds", [2, 3])
def test_abab_under_drift_without_effect_is_never_faster_or_slower(rounds):
    assert np.isin(_verdicts("abab", 1.0, 60, rounds=rounds), [FASTER, SLOWER]).mean() <= 0.05


def test_requests_as_the_unit_are_fooled_by_the_same_drift_and_blocks_are_not():
    assert (_verdicts("sequential", 1.0, 60, naive=True) == FASTER).mean() >= 0.3
    assert not np.isin(_verdicts("sequential", 1.0, 60), [FASTER, SLOWER]).any()


def test_abab_finds_a_three_percent_effect_under_drift_at_three_rounds():
    assert (_verdicts("abab", 1.03, 60, seed=1, rounds=3) == FASTER).mean() >= 0.8


def test_median_ci_covers_the_true_median():
    rng = np.random.default_rng(5)
    hits = 0
    reps = 200
    for _ in range(reps):
        lo, hi = median_ci(rng.lognormal(np.log(50), 0.05, 10), n_resamples=500, rng=rng)
        hits += lo <= 50 <= hi
    assert abs(hits / reps - 0.95) <= 0.05


def test_simulation_is_reproducible():
    a = simulate("random", effect=1.03, drift=0.01, rng=np.random.default_rng(3), seed=9)
    b = simulate("random", effect=1.03, drift=0.01, rng=np.random.default_rng(3), seed=9)
    assert a.equals(b)


def test_round_changes_and_first_vs_last_by_hand():
    """Medians per round, a row without a round left out, and the change ln(last / first) of the medians."""
    import pandas as pd
    from bracket.stats.drift import first_vs_last

    df = pd.DataFrame(
        {
            "arm": ["B", "A", "A", "A", "A", "A", "B"],
            "round": [1, 1, 1, 2, 2, np.nan, 2],
            "position": [1, 0, 0, 2, 2, 9, 3],
            "value": [50.0, 10.0, 12.0, 11.0, 13.0, 99.0, 55.0],
        }
    )
    rc = round_changes(df)
    assert list(rc) == ["A", "B"]
    assert rc["A"]["medians"] == {1: 11.0, 2: 12.0} and rc["A"]["change"] == pytest.approx(np.log(12 / 11))
    assert rc["B"] == {"medians": {1: 50.0, 2: 55.0}, "change": pytest.approx(np.log(55 / 50))}
    # positions 0 (10, 12) and 9 (99): the row without a round still has a time
    f = first_vs_last(df, "A")
    assert (f["first_position"], f["last_position"], f["first_median"], f["last_median"]) == (0, 9, 11.0, 99.0)
    assert f["change"] == pytest.approx(np.log(99 / 11))
    assert first_vs_last(df[df["arm"] == "B"].iloc[:1], "B") is None
