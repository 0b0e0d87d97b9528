"""Where an interval gets its width (bracket.stats.conservatism) and the method section's sentence on it:
factors checked against hand calculation and Hojo's (1931) variance of a normal sample's median."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from bracket import article
from bracket.article.method import conservatism_sentence, section_method
from bracket.stats.cells import compare_arms
from bracket.stats.conservatism import median_factor, summary
from bracket.stats.io import from_table
from bracket.stats.simulate import simulate
from scipy import stats

FIXTURE = Path(__file__).resolve().parent / "data" / "report" / "probe"


def test_median_factor_against_the_exact_variance_of_a_median():
    # n = 1: the median is the value, variance 1, so the factor is pi / 2 itself.
    assert median_factor(1) == pytest.approx(math.pi / 2, rel=0.01)
    # n = 5: Var(median) = 0.2868 (Hojo 1931), so (pi / 2) / (5 x 0.2868) = 1.095.
    assert median_factor(5) == pytest.approx(math.pi / 2 / (5 * 0.2868), rel=0.01)
    # large n: the asymptotic formula holds
    assert median_factor(41) == pytest.approx(1.0, abs=0.05)


def _row(df, **kw):
    c = compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200, **kw)
    return dataclasses.asdict(c)


def test_textbook_fit_at_three_rounds_by_hand():
    """A/B/A/B, 3 rounds, drift fitted, never pooled: 6 blocks - 3 parameters = 3 df, so the t quantile is
    t_3(0.975) / z(0.975) = 3.182 / 1.960 = 1.624; arm and position (0..5) have r^2 = 1.5^2 / (1.5 x 17.5),
    so the drift term inflates the arm's variance by 1 / (1 - 3/35) = 35/32 and its width by sqrt(35/32)."""
    row = _row(simulate("abab", rounds=3, block_sd=0.03, rng=np.random.default_rng(1), seed=1), pool=False)
    s = summary([row], 0.95, 0.01)
    assert s["comparisons"] == 1 and s["df"] == [3.0, 3.0]
    assert s["df_factor"][0] == pytest.approx(stats.t.ppf(0.975, 3) / stats.norm.ppf(0.975))
    assert s["df_factor"][0] == pytest.approx(1.624, abs=1e-3)
    assert s["drift_factor"][0] == pytest.approx(math.sqrt(35 / 32)) and s["drift_fits"] == 1
    assert s["level_factor"] == [1.0, 1.0] and s["pooled"] == 0 and s["median_factor"] is None
    assert s["total"][0] == pytest.approx(1.624 * math.sqrt(35 / 32), abs=2e-3)


def test_a_holm_level_and_a_pooled_gpu_fit():
    """The GPU regime (block sd 0.2 %, request sd 1.1 %, 6 runs): blocks agree within request noise, the fit
    pools, and request noise enters as (pi/2) sigma^2 / 6, 1.22x a median of 6's variance; an interval drawn
    at 99 % (a Holm step) is t_df(0.995) / t_df(0.975) wider."""
    rng = np.random.default_rng(5)
    rows = []
    while not rows:
        r = _row(simulate("abab", rounds=3, runs=6, block_sd=0.002, run_sd=0.011, rng=rng, seed=1))
        rows = [r] if r["pooled"] else []
    row = {**rows[0], "ci_level": 0.99}
    s = summary([row], 0.95, 0.01)
    assert s["pooled"] == 1 and s["runs_per_block"] == [6.0, 6.0]
    assert s["median_factor"][0] == pytest.approx(median_factor(6)) and 1.15 < median_factor(6) < 1.3
    df = row["df"]
    assert s["level_factor"][0] == pytest.approx(stats.t.ppf(0.995, df) / stats.t.ppf(0.975, df))
    assert summary([{**row, "se": None}], 0.95, 0.01) is None


@pytest.fixture(scope="module")
def fixture_data(tmp_path_factory):
    return article.load(
        FIXTURE / "runs.csv",
        FIXTURE / "stats.json",
        FIXTURE / "raw",
        FIXTURE / "probe.corrections.yaml",
        tmp_path_factory.mktemp("cons"),
    )


def test_the_method_section_states_the_factors_that_ran(fixture_data):
    row = _row(simulate("abab", rounds=3, block_sd=0.03, drift=0.03, rng=np.random.default_rng(1), seed=1), pool=False)
    cons = summary([{**row, "ci_level": 0.99}], 0.95, 0.01)
    holm = {**fixture_data.stats["multiplicity"], "method": "holm", "comparisons": 3}  # as stats.json holds it
    d = article.Data(
        **{
            **fixture_data.__dict__,
            "stats": {**fixture_data.stats, "conservatism": cons, "multiplicity": holm},
        }
    )
    text = conservatism_sentence(d)
    assert "3 degrees of freedom" in text and f"x{cons['df_factor'][0]:.2f}" in text
    assert f"x{cons['drift_factor'][0]:.2f}" in text and "99.00%" in text and "3 comparisons (Holm)" in text
    assert f"x{cons['total'][0]:.2f} as wide" in text
    if row["noise_band"] > 0.01:
        assert f"to {100 * row['noise_band']:.1f}%" in text
    # a file without the section (written before it) says nothing rather than something made up
    assert conservatism_sentence(fixture_data) is None
    assert text in [getattr(x, "text", None) for x in section_method(d).items]
