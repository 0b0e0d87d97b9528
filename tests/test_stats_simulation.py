"""A light version of bench/design_efficiency.py: the analysis says what is true.

The bench script runs 1,000 repetitions per cell and commits its table; here 60-200 keep the
suite fast, with thresholds set a few binomial standard errors inside the bench's results.
"""

import numpy as np

from bracket.stats.bootstrap import Sample
from bracket.stats.compare import FASTER, NO_EFFECT, compare, comparison_drift
from bracket.stats.drift import round_changes
from bracket.stats.simulate import simulate
from bracket.stats.summary import median_ci


def _verdicts(design, effect, reps, naive=False, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for r in range(reps):
        df = simulate(design, effect=effect, drift=0.01, rng=rng, seed=r)
        a, b = df[df.arm == "A"], df[df.arm == "B"]
        if naive:
            c = compare(Sample.of(a.value), Sample.of(b.value), drift=0.0, rng=rng, n_resamples=400)
        else:
            rc = round_changes(df)
            c = compare(Sample.of(a.value, a.block, a.position), Sample.of(b.value, b.block, b.position),
                        drift=comparison_drift(rc["A"]["change"], rc["B"]["change"], None),
                        rng=rng, n_resamples=400)
        out.append(c.verdict)
    return np.array(out)


def test_abab_under_drift_without_effect_says_no_measurable_effect():
    assert (_verdicts("abab", 1.0, 60) == NO_EFFECT).mean() >= 0.95


def test_naive_a_then_b_is_fooled_by_the_same_drift():
    assert (_verdicts("sequential", 1.0, 60, naive=True) == FASTER).mean() >= 0.3


def test_abab_finds_a_three_percent_effect_under_drift():
    assert (_verdicts("abab", 1.03, 60, seed=1) == FASTER).mean() >= 0.8


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
