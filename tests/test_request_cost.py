"""bench/request_cost.py's arithmetic: the paired ratio and its interval, worked out by hand."""

from __future__ import annotations

import math

import pytest
import request_cost
from bracket.experiment import config
from scipy import stats


def test_ratio_is_the_geometric_mean_of_the_paired_ratios_with_a_t_interval():
    # log ratios 0 and ln 4: mean ln 2, sd ln 4 / sqrt 2, se ln 2, t(0.975, 1 df) = 12.706
    ratio, lo, hi = request_cost.ratio_ci([(1.0, 1.0), (8.0, 2.0)])
    t = stats.t.ppf(0.975, 1)
    assert ratio == pytest.approx(2.0)
    assert (lo, hi) == (pytest.approx(2 ** (1 - t)), pytest.approx(2 ** (1 + t)))


def test_swapping_body_and_reference_inverts_the_ratio_and_its_interval():
    pairs = [(1.3, 1.0), (1.1, 0.9), (2.0, 1.7), (0.8, 0.75)]
    r, lo, hi = request_cost.ratio_ci(pairs)
    r2, lo2, hi2 = request_cost.ratio_ci([(p, v) for v, p in pairs])
    assert (r * r2, lo * hi2, hi * lo2) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))
    assert lo < r < hi


def test_one_round_gives_no_interval_and_outputs_agree_up_to_the_shorter():
    assert math.isnan(request_cost.ratio_ci([(2.0, 1.0)])[1])
    assert request_cost.same_tokens("abc", "abcdef") and request_cost.same_tokens("abc", "abc")
    assert not request_cost.same_tokens("abd", "abcdef")


def test_the_plain_body_is_what_a_bare_client_sends_and_bracket_now_comes_from_the_adapter():
    from bracket import engines

    bodies = request_cost.variants("llamacpp", engines.get("llamacpp"), "p", 16)
    assert bodies["plain"] == {
        "model": "bracket-model",
        "prompt": "p",
        "max_tokens": 16,
        "temperature": 0,
        "stream": True,
    }
    assert bodies["+ top_k 0"] == {**bodies["plain"], "top_k": 0}
    req = config.validate({"arms": {"a": {}}, "request": {"max_tokens": 16, "temperature": 0, "timeout_s": 120}})
    assert bodies["bracket now"] == engines.get("llamacpp").request_body("bracket-model", "p", req.request, seed=1234)
