"""A load level's plan and reading, without a server: the seeded schedule, the drawn lengths, each request's phase,
the level's verdict, the levels' rotation, the batching law's truth, and the load workload's validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bracket.engines.reference_batching import batch_truth, knee
from bracket.experiment import config, design, load_workload
from bracket.experiment.config import ExperimentError
from bracket.measure import load_plan


def test_a_poisson_schedule_is_its_seed_and_its_gaps_are_exponential():
    """Rate 50/s over 400 s: about 20,000 gaps. An exponential gap of mean m has variance m^2, so the sample mean's
    standard error is m / sqrt(n) and the sample variance's about m^2 sqrt(8 / n) (its fourth moment is 9 m^4);
    each is held within 4 standard errors. Counts in 1 s bins of a Poisson process have variance = mean."""
    rate, span = 50.0, 400.0
    a = load_plan.arrival_schedule(rate, span, "poisson", 7)
    assert np.array_equal(a, load_plan.arrival_schedule(rate, span, "poisson", 7))  # reproducible from its seed
    assert not np.array_equal(a[:100], load_plan.arrival_schedule(rate, span, "poisson", 8)[:100])
    assert np.all(np.diff(a) > 0) and a[0] >= 0 and a[-1] < span
    gaps = np.diff(np.concatenate([[0.0], a]))
    n, m = gaps.size, 1 / rate
    assert abs(n - rate * span) < 4 * math.sqrt(rate * span)
    assert abs(gaps.mean() - m) < 4 * m / math.sqrt(n)
    assert abs(gaps.var() - m * m) < 4 * m * m * math.sqrt(8 / n)
    counts = np.histogram(a, bins=int(span), range=(0, span))[0]
    # The index of dispersion of k bins is about 1 with standard error sqrt(2 / (k - 1)).
    assert abs(counts.var(ddof=1) / counts.mean() - 1) < 4 * math.sqrt(2 / (span - 1))


def test_a_constant_schedule_sends_every_one_over_rate():
    a = load_plan.arrival_schedule(4.0, 2.0, "constant", 1)
    assert np.allclose(a, [0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])
    with pytest.raises(ValueError, match="poisson"):
        load_plan.arrival_schedule(4.0, 2.0, "gamma", 1)


def test_the_level_seed_is_the_same_for_every_arm_and_differs_by_round_and_level():
    s = load_plan.level_seed(1, "busy", 2.0, 0)
    assert s == load_plan.level_seed(1, "busy", 2.0, 0)
    assert len({s, load_plan.level_seed(1, "busy", 2.0, 1), load_plan.level_seed(1, "busy", 4.0, 0)}) == 3


def test_drawn_lengths_are_seeded_and_within_their_bounds():
    a = load_plan.draw_lengths((10, 20), 5000, 3, 1)
    assert np.array_equal(a, load_plan.draw_lengths((10, 20), 5000, 3, 1))
    assert a.min() == 10 and a.max() == 20  # both ends drawn (each has odds 1/11 per draw)
    assert abs(a.mean() - 15) < 4 * math.sqrt(10 / 5000)  # uniform on 10..20: variance (11^2 - 1) / 12 = 10
    assert (load_plan.draw_lengths((64, 64), 3, 3, 1) == 64).all()
    assert load_plan.draw_lengths(None, 3, 3, 1) is None
    assert load_plan.sized_prompt("a b c", 7) == "a b c a b c a"
    assert load_plan.sized_prompt("a b c", 2) == "a b"


@pytest.mark.parametrize(
    "sent,end,expected",
    [
        (0.5, 0.9, "warmup"),
        (0.5, 1.5, "ramp"),
        (0.5, None, "ramp"),
        (1.2, 2.5, "steady"),
        (1.2, 3.5, "drain"),
        (1.2, None, "drain"),
    ],
)
def test_each_request_has_its_phase(sent, end, expected):
    assert load_plan.phase(sent, end, 1.0, 3.0) == expected


def test_a_level_whose_client_fell_behind_is_invalid_with_its_code():
    lag = load_plan.lag_stats([0, 1, 2, 3], [0.001, 1.001, 2.2, 3.001])
    assert lag["send_lag_max_s"] == pytest.approx(0.2)
    v = load_plan.verdict(lag, cpu_s=0.1, wall_s=10, n_steady=5, tolerance_s=0.05, cpu_limit=0.9)
    assert v["valid"] is False and v["invalid_reason"]["code"] == load_plan.CLIENT_BEHIND
    calm = load_plan.lag_stats([0, 1], [0.001, 1.002])
    v = load_plan.verdict(calm, cpu_s=9.5, wall_s=10, n_steady=5, tolerance_s=0.05, cpu_limit=0.9)
    assert v["invalid_reason"] == {"code": load_plan.CLIENT_CPU, "cpu_per_wall_s": 0.95, "limit": 0.9}
    assert load_plan.verdict(calm, 1.0, 10, 5, 0.05, 0.9) == {"valid": True, "invalid_reason": None}


def test_levels_rotate_by_round_so_each_runs_once_at_every_position():
    orders = [design.level_order(5, r) for r in range(5)]
    assert orders[0] == [0, 1, 2, 3, 4] and orders[1] == [1, 2, 3, 4, 0]
    for position in range(5):
        assert sorted(o[position] for o in orders) == [0, 1, 2, 3, 4]
    assert design.level_order(5, 7) == orders[2]


def test_the_batching_law_gives_rate_capacity_and_knee():
    t = batch_truth(0.010, 0.002, 8)
    assert t.step_s == pytest.approx(0.026) and t.per_user_tok_s == pytest.approx(1 / 0.026)
    assert t.aggregate_tok_s == pytest.approx(8 / 0.026)
    assert batch_truth(0.010, 0.002, 32, max_batch=16).aggregate_tok_s == pytest.approx(16 / 0.042)
    assert knee(0.010, 0.002, 0.026) == 8 and knee(0.010, 0.002, 0.0259) == 7 and knee(0.010, 0.002, 0.005) == 0


def _exp(load, kind="load"):
    wl = {"prompts": "experiments/prompts/chat.jsonl", "kind": kind, **({"load": load} if load is not None else {})}
    return {"engine": {"kind": "reference"}, "arms": {"a": {}}, "workloads": {"busy": wl}}


@pytest.mark.parametrize(
    "load,says",
    [
        (None, "workloads.busy.kind is load without workloads.busy.load"),
        ({"users": [1], "rate": [1]}, "gives both users and rate"),
        ({"users": [1, 2, 1]}, "lists [1] more than once"),
        ({"users": [1], "arrivals": "constant"}, "remove arrivals"),
        ({"rate": [1], "think_s": 2}, "remove think_s"),
        ({"rate": [1], "output_tokens": [9, 3]}, "write [3, 9]"),
        ({"users": [1025]}, "at most 1024"),
        ({"rate": [2000]}, "at most 1000"),
        ({"users": [1, 2, 4, 8], "warmup_s": 3000, "steady_s": 3000}, "6 h"),
        ({"users": [1], "slo": {"ttft_s": 0}}, "slo.ttft_s"),
    ],
)
def test_a_load_workload_that_cannot_run_is_refused_naming_the_key_and_the_fix(load, says):
    with pytest.raises(ExperimentError) as err:
        config.validate(_exp(load))
    assert says in str(err.value)


def test_load_settings_on_another_kind_are_refused():
    with pytest.raises(ExperimentError, match="set workloads.busy.kind: load"):
        config.validate(_exp({"users": [1]}, kind="single"))


def test_a_load_workload_reads_with_its_defaults(monkeypatch):
    monkeypatch.setattr(load_workload, "RUN_BY_BLOCKS", True)
    exp = config.validate(_exp({"rate": [0.5, 2], "slo": {"ttft_s": 2, "tpot_s": 0.1}}))
    s = load_workload.spec(exp, "busy")
    assert (s.level_kind, s.levels, s.arrivals, s.seed) == ("rate", (0.5, 2.0), "poisson", exp.design.seed)
    assert s.output_tokens == (exp.request.max_tokens,) * 2 and s.drain_s == exp.request.timeout_s
    assert (s.warmup_s, s.steady_s, s.lag_tolerance_s, s.cpu_limit) == (5.0, 30.0, 0.05, 0.9)
    assert (s.slo_ttft_s, s.slo_tpot_s) == (2.0, 0.1)
