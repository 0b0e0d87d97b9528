"""The load statistics (bracket.stats.load): hand-calculated cases and a small seeded calibration check."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pydantic
import pytest
from bracket.stats.load import ceiling as ce
from bracket.stats.load import frame as fr
from bracket.stats.load import intervals as iv
from bracket.stats.load import simulate as sim
from bracket.stats.load.analyze import CeilingInput, analyze_load
from bracket.stats.load.slo import FAILS, MEETS, UNDETERMINED, Slo, capacity, level_status
from bracket.stats.load.verdicts import compare_levels
from scipy import stats


def _req(**kw) -> dict:
    base = dict(
        arm="A",
        block=0,
        level=1.0,
        sent_s=0.0,
        first_token_s=0.5,
        end_s=2.0,
        ttft_s=0.5,
        tpot_s=0.1,
        completion_tokens=5,
        load_phase="steady",
        error=None,
        token_times_s=None,
        token_counts=None,
    )
    base.update(kw)
    return base


def _level(**kw) -> dict:
    base = dict(arm="A", block=0, level=1.0, steady_start_s=1.0, steady_end_s=3.0, valid=True)
    base.update(kw)
    return base


# -- tokens in the window ----------------------------------------------------------------------------------------


def test_tokens_in_window_from_token_times_counts_only_arrivals_inside():
    # sent at 1.0; events at 1.5 (1 token), 2.0 (2), 2.5 (1), 3.0 (1): window [1.8, 3.0) holds 2 + 1 = 3
    got, interp = fr.tokens_in_window(
        [1.0], [1.5], [4.0], [5], [[0.5, 1.0, 1.5, 2.0]], [[1, 2, 1, 1]], start=1.8, stop=3.0
    )
    assert got.tolist() == [3.0]
    assert interp.tolist() == [False]


def test_tokens_in_window_interpolates_a_request_without_token_times():
    # 5 tokens: first at 1.0, the rest evenly to 3.0 -> 1.0, 1.5, 2.0, 2.5, 3.0; [1.2, 2.5) holds 1.5 and 2.0
    got, interp = fr.tokens_in_window([0.0], [1.0], [3.0], [5], None, None, start=1.2, stop=2.5)
    assert got.tolist() == [2.0]
    assert interp.tolist() == [True]
    # a bounded (short) list is interpolated too
    got, interp = fr.tokens_in_window([0.0], [1.0], [3.0], [5], [[1.0, 1.5]], [[1, 1]], start=0.0, stop=10.0)
    assert got.tolist() == [5.0] and interp.tolist() == [True]


def test_throughput_counts_tokens_partly_inside_the_window_from_every_phase():
    reqs = pd.DataFrame(
        [
            # ramp request: sent at 0, tokens at 0.5, 1.0, 1.5, 2.0 -> 3 inside [1, 3)
            _req(load_phase="ramp", completion_tokens=4, token_times_s=[0.5, 1.0, 1.5, 2.0], token_counts=[1] * 4),
            # steady request: sent 1.2, tokens 1.4 (x2), 2.2, 3.2 -> 3 inside
            _req(sent_s=1.2, completion_tokens=4, token_times_s=[0.2, 1.0, 2.0], token_counts=[2, 1, 1]),
            # failed request: its tokens do not count
            _req(error="connection reset", completion_tokens=4, token_times_s=[1.5, 1.6], token_counts=[2, 2]),
        ]
    )
    t = fr.block_table(reqs, pd.DataFrame([_level()]))
    assert t.loc[0, "tokens_in_window"] == 6.0
    assert t.loc[0, "throughput_tok_s"] == pytest.approx(6.0 / 2.0)
    assert t.loc[0, "n_steady"] == 1
    assert t.loc[0, "interpolated"] == 0


def test_goodput_counts_requests_that_met_both_limits():
    reqs = pd.DataFrame(
        [
            _req(ttft_s=0.5, tpot_s=0.05, completion_tokens=10),
            _req(ttft_s=1.0, tpot_s=0.20, completion_tokens=20),  # TPOT over
            _req(ttft_s=3.0, tpot_s=0.05, completion_tokens=30),  # TTFT over
            _req(ttft_s=0.2, tpot_s=0.05, completion_tokens=40),
            _req(ttft_s=0.1, tpot_s=0.01, completion_tokens=50, load_phase="drain"),  # not steady
        ]
    )
    t = fr.block_table(reqs, pd.DataFrame([_level(steady_start_s=0.0, steady_end_s=10.0)]), Slo(2.0, 0.1))
    assert t.loc[0, "goodput_req_s"] == pytest.approx(2 / 10)
    assert t.loc[0, "goodput_tok_s"] == pytest.approx(50 / 10)
    assert t.loc[0, "goodput_fraction"] == pytest.approx(0.5)


def test_block_table_refuses_a_frame_without_the_contract_columns():
    with pytest.raises(ValueError, match="tpot_s"):
        fr.block_table(pd.DataFrame([_req()]).drop(columns="tpot_s"), pd.DataFrame([_level()]))


# -- quantiles and intervals -------------------------------------------------------------------------------------


def test_group_quantiles_match_numpy_median_unbiased_and_refuse_thin_tails():
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 3, 700)
    x = rng.lognormal(size=700)
    got = fr.group_quantiles(x, codes, 4, (0.5, 0.9, 0.99))
    for g in range(3):
        n = (codes == g).sum()
        for i, p in enumerate((0.5, 0.9, 0.99)):
            want = np.quantile(x[codes == g], p, method="median_unbiased") if n * (1 - p) >= 1 else np.nan
            np.testing.assert_allclose(got[i, g], want, rtol=1e-12)
    assert np.isnan(got[:, 3]).all()  # an empty group
    # 50 requests: n (1 - 0.99) = 0.5 < MIN_TAIL, no p99
    assert np.isnan(fr.group_quantiles(np.arange(50.0), np.zeros(50, int), 1, (0.99,))[0, 0])


def test_block_interval_on_a_tiny_known_sample():
    # log values 0, 1, 2: mean 1, sample variance 1, se sqrt(1/3), t(2, 0.975) = 4.302652729911275
    b = iv.block_interval([1.0, math.e, math.e**2])
    hw = 4.302652729911275 * math.sqrt(1 / 3)
    assert b.center == pytest.approx(math.e)
    assert b.low == pytest.approx(math.exp(1 - hw))
    assert b.high == pytest.approx(math.exp(1 + hw))
    assert (b.blocks, b.df, b.trend) == (3, 2.0, False)
    # four blocks on an exact drift line: the line is fitted, the centre is at the mean position, no residual
    line = iv.block_interval(np.exp([0.0, 0.1, 0.2, 0.3]), [0, 2, 4, 6])
    assert line.trend and line.df == 2.0
    assert line.center == pytest.approx(math.exp(0.15))
    assert line.low == pytest.approx(line.center) and line.high == pytest.approx(line.center)
    one = iv.block_interval([5.0])
    assert one.low is None and one.center == pytest.approx(5.0)
    # goodput on the raw scale: 0 is a value, the lower end stops at 0
    g = iv.block_interval([0.0, 0.0, 3.0], scale="raw")
    assert g.center == pytest.approx(1.0) and g.low == 0.0


def test_p99_interval_covers_at_its_nominal_level_seeded():
    """2000 simulated experiments, 6 blocks of 200 requests: coverage of the nominal-95 % p99 interval 93-97 %; with
    50 requests a block (n(1-p) = 0.5, below MIN_TAIL) and 10 blocks it falls short, which is why MIN_TAIL is 1."""
    rng = np.random.default_rng(20261203)
    t = stats.t.ppf(0.975, 4)
    q, pos, truth = sim.block_quantiles(
        rng, sims=2000, blocks=6, requests=200, p=0.99, shape="slow_tail", tau=0.05, drift=0.01, level_drift=0.01
    )
    c, se, df = iv.t_fit(np.log(q), pos, iv.uses_trend(6, pos))
    assert df == 4
    cover = np.mean(np.abs(c - math.log(truth)) <= t * se)
    assert 0.93 <= cover <= 0.97
    q, pos, truth = sim.block_quantiles(
        rng, sims=2000, blocks=10, requests=50, p=0.99, shape="slow_tail", tau=0.05, drift=0.0
    )
    c, se, df = iv.t_fit(np.log(q), pos, iv.uses_trend(10, pos))
    assert np.mean(np.abs(c - math.log(truth)) <= stats.t.ppf(0.975, df) * se) < 0.90


# -- capacity ----------------------------------------------------------------------------------------------------


def _intervals(tpot: dict, ttft_high: float = 0.5) -> pd.DataFrame:
    rows = []
    for level, (lo, c, hi) in tpot.items():
        rows.append(dict(arm="A", level=float(level), metric="tpot_p99", center=c, low=lo, high=hi))
        rows.append(dict(arm="A", level=float(level), metric="ttft_p99", center=0.3, low=0.2, high=ttft_high))
    return pd.DataFrame(rows)


def test_capacity_determined_when_the_first_failing_level_follows_the_last_meeting_one():
    d = _intervals({1: (0.02, 0.03, 0.04), 2: (0.04, 0.05, 0.06), 4: (0.07, 0.08, 0.09), 8: (0.14, 0.16, 0.18)})
    cap = capacity(d, Slo(2.0, 0.1), "A")
    assert [s.status for s in cap.levels] == [MEETS, MEETS, MEETS, FAILS]
    assert (cap.capacity, cap.determined, cap.low, cap.high) == (4.0, True, 4.0, 8.0)
    # tpot centres 0.08 at 4 and 0.16 at 8 cross 0.1 at 4 x 1.25 = 5 on log-log
    assert cap.crossing == pytest.approx(5.0)
    assert cap.levels[-1].limiting == "tpot_p99"


def test_capacity_undetermined_where_an_interval_straddles_the_limit():
    d = _intervals({1: (0.02, 0.03, 0.04), 2: (0.04, 0.05, 0.06), 4: (0.08, 0.095, 0.11), 8: (0.14, 0.16, 0.18)})
    cap = capacity(d, Slo(2.0, 0.1), "A")
    assert cap.levels[2].status == UNDETERMINED
    assert (cap.capacity, cap.determined, cap.low, cap.high) == (None, False, 2.0, 8.0)


def test_capacity_below_the_lowest_level_and_beyond_the_highest():
    fails = _intervals({1: (0.2, 0.3, 0.4), 2: (0.4, 0.5, 0.6)})
    cap = capacity(fails, Slo(2.0, 0.1), "A")
    assert (cap.capacity, cap.determined, cap.low, cap.high) == (None, True, None, 1.0)
    meets = _intervals({1: (0.01, 0.02, 0.03), 2: (0.02, 0.03, 0.04)})
    cap = capacity(meets, Slo(2.0, 0.1), "A")
    assert (cap.capacity, cap.determined, cap.low, cap.high, cap.crossing) == (2.0, True, 2.0, None, None)
    # a TTFT interval above its limit fails the level whatever TPOT does
    st = level_status(_intervals({1: (0.01, 0.02, 0.03)}, ttft_high=0.5), Slo(0.1, 0.1))
    assert st[0].status == FAILS and st[0].limiting == "ttft_p99"


# -- verdicts, ceiling, the whole analysis -----------------------------------------------------------------------


def _blocks(effect: float, rng) -> pd.DataFrame:
    rows = []
    for b in range(8):
        arm = "A" if b % 2 == 0 else "B"
        for level in (1, 4):
            x = 100 * level * math.exp(0.01 * rng.standard_normal()) * (effect if arm == "B" else 1.0)
            rows.append(
                dict(
                    arm=arm,
                    block=b,
                    level=level,
                    round=b // 2,
                    position=b,
                    valid=True,
                    throughput_tok_s=x,
                    tpot_p99=1 / x,
                )
            )
    return pd.DataFrame(rows)


def test_level_verdicts_read_a_latency_as_its_reciprocal():
    rng = np.random.default_rng(1)
    faster = compare_levels(_blocks(1.25, rng), "A", "B", "tpot_p99")
    assert [lv for lv, _ in faster] == [1.0, 4.0]
    assert all(c["verdict"] == "faster" and c["ratio"] == pytest.approx(1.25, rel=0.05) for _, c in faster)
    assert all(c["multiplicity"]["comparisons"] == 2 for _, c in faster)
    same = compare_levels(_blocks(1.0, rng), "A", "B", "throughput_tok_s")
    assert all(c["verdict"] not in ("faster", "slower") for _, c in same)


def test_batch_ceiling():
    # seed 000: 273 GB/s over 18.77 GB a token is 14.54 tok/s at batch 1
    assert ce.batch_ceiling_tok_s(273, 18.77e9, 1) == pytest.approx(14.544, abs=1e-3)
    # 16 GB of weights + 8 sequences x 1000 tokens x 100 kB of KV = 16.8 GB a step; 8 x 4800 / 16.8 tok/s
    b = ce.step_bytes(16e9, 1e5, 1000, 8)
    assert b == 16.8e9
    assert ce.batch_ceiling_tok_s(4800, b, 8) == pytest.approx(8 * 4800 / 16.8)
    assert ce.step_time_s(4800, b) == pytest.approx(16.8 / 4800)
    with pytest.raises(ValueError, match="batch"):
        ce.batch_ceiling_tok_s(4800, b, 0)


def test_analyze_load_leaves_out_an_invalid_level_and_freezes_its_results():
    rng = np.random.default_rng(2)
    server = sim.BatchServer()
    req, lv, _ = sim.bracketed_experiment(rng, server, levels=(1, 4), blocks=4, window_s=40.0)
    lv["invalid_reason"] = None
    lv.loc[0, "valid"] = False
    lv.at[0, "invalid_reason"] = {"code": "client_behind", "send_lag_p99_s": 0.31, "tolerance_s": 0.05}
    out = analyze_load(
        req,
        lv,
        slo=Slo(2.0, float(server.true_tpot(2))),
        comparisons=[("A", "B")],
        speculation=[("A", "B")],
        ceiling=CeilingInput(100.0, 1e9),
        seed=7,
    )
    assert len(out.invalid_levels) == 1 and out.invalid_levels[0].invalid_reason["code"] == "client_behind"
    a1 = [i for i in out.intervals if i.arm == lv.loc[0, "arm"] and i.level == lv.loc[0, "level"]]
    assert {i.blocks for i in a1 if i.metric == "throughput_tok_s"} == {3}
    assert {c.capacity for c in out.capacity} == {1.0}
    assert {v.level for v in out.verdicts} == {1.0, 4.0}
    assert {g.metric for g in out.gains} == {"decode_rate_p50", "throughput_tok_s"}
    assert all(c.ceiling_tok_s == pytest.approx(100.0 * c.level) for c in out.ceilings)
    with pytest.raises(pydantic.ValidationError):
        out.seed = 8
    assert isinstance(out.model_dump(mode="json")["intervals"], list)
    with pytest.raises(ValueError, match="arm 'C'"):
        analyze_load(req, lv, comparisons=[("A", "C")])


def test_block_table_takes_round_and_position_from_the_requests_and_one_workload_at_a_time():
    reqs = pd.DataFrame([_req(block=0, round=1, position=5), _req(block=1, round=1, position=6)])
    lv = pd.DataFrame([_level(block=0), _level(block=1)])
    t = fr.block_table(reqs, lv)
    assert t["position"].tolist() == [5, 6] and t["round"].tolist() == [1, 1]
    two = pd.DataFrame([_req(workload="chat"), _req(workload="rag")])
    with pytest.raises(ValueError, match="one at a time"):
        fr.block_table(two, pd.DataFrame([_level()]))


def test_a_level_without_enough_requests_for_p99_is_undetermined_for_capacity():
    # 40 steady requests: n (1 - 0.99) = 0.4 < MIN_TAIL, so no p99 and the level cannot be said to meet the SLO
    reqs = pd.DataFrame([_req(block=b, ttft_s=0.1, tpot_s=0.01) for b in range(3) for _ in range(40)])
    lv = pd.DataFrame([_level(block=b, steady_start_s=0.0, steady_end_s=10.0) for b in range(3)])
    t = fr.block_table(reqs, lv, Slo(2.0, 0.1))
    assert t["tpot_p99"].isna().all() and t["tpot_p90"].notna().all()
    cap = capacity(iv.arm_level_intervals(t), Slo(2.0, 0.1), "A")
    assert cap.levels[0].status == UNDETERMINED and cap.capacity is None
    assert capacity(iv.arm_level_intervals(t), Slo(2.0, 0.1, quantile=0.9), "A").capacity == 1.0


def test_comparison_records_become_plain_json():
    from bracket.stats.load.analyze import _json

    assert _json({"a": np.bool_(True), "b": np.float64("nan"), "c": (np.int64(2), UNDETERMINED)}) == {
        "a": True,
        "b": None,
        "c": [2, "undetermined"],
    }


def test_itl_and_decode_rate_by_hand():
    # events at 0.1, 0.2, 0.4, 0.7 s after sending: gaps 0.1, 0.2, 0.3 -> median-unbiased p50 of three = 0.2
    reqs = pd.DataFrame(
        [
            _req(token_times_s=[0.1, 0.2, 0.4, 0.7], token_counts=[1, 1, 1, 1], completion_tokens=4, tpot_s=0.2),
            _req(tpot_s=0.05),
            _req(tpot_s=0.1),
        ]
    )
    t = fr.block_table(reqs, pd.DataFrame([_level()]))
    assert t.loc[0, "itl_p50"] == pytest.approx(0.2)
    assert np.isnan(t.loc[0, "itl_p90"])  # 3 gaps: n (1 - 0.9) = 0.3 < MIN_TAIL
    # 1 / TPOT: 5, 20, 10 tokens/s -> median 10
    assert t.loc[0, "decode_rate_p50"] == pytest.approx(10.0)


def test_block_table_matches_requests_to_levels_whatever_the_number_types():
    reqs = pd.DataFrame([_req(block=0, level=4, completion_tokens=3, first_token_s=1.0, end_s=2.0)])
    lv = pd.DataFrame([_level(block=0.0, level=4.0, steady_start_s=0.0, steady_end_s=3.0)])
    t = fr.block_table(reqs, lv)
    assert t.loc[0, "tokens_in_window"] == 3.0 and t.loc[0, "n_steady"] == 1


def test_from_records_splits_requests_from_level_summaries():
    recs = [_req(), {**_level(), "kind": "load_level"}, {**_req(), "control": "neutrality"}]
    reqs, lv = fr.from_records(recs)
    assert len(reqs) == 1 and len(lv) == 1
    assert fr.block_table(reqs, lv).loc[0, "n_steady"] == 1
    with pytest.raises(ValueError, match="load_level"):
        fr.from_records([_req()])


def test_slo_from_the_level_summaries_and_with_one_limit():
    lv = pd.DataFrame([{**_level(), "slo": {"ttft_s": 2.0, "tpot_s": None}}])
    slo = Slo.from_levels(lv)
    assert (slo.ttft_s, slo.tpot_s) == (2.0, None)
    assert slo.metrics() == (("ttft_p99", 2.0),)
    assert slo.met([1.0, 3.0], [9.0, 0.01]).tolist() == [True, False]
    assert Slo.from_levels(pd.DataFrame([{**_level(), "slo": {"ttft_s": None, "tpot_s": None}}])) is None
    two = pd.DataFrame([{**_level(), "slo": {"ttft_s": 2.0}}, {**_level(block=1), "slo": {"ttft_s": 1.0}}])
    with pytest.raises(ValueError, match="2 SLOs"):
        Slo.from_levels(two)
    with pytest.raises(ValueError, match="at least one positive limit"):
        Slo(None, None)
