"""TTFT apart from decode (bracket.stats.phases): synthetic runs whose TTFT and decode phase are known.

Each arm has a TTFT t0 and a decode-phase rate g0. Within a block the three requests scale TTFT
by m and the decode phase's time by m (m = 1/1.02, 1, 1.02), so wall = m * (t0 + 31 / g0) and
every block median is exactly t0, g0 and 32 / (t0 + 31 / g0) (a cell's median pools its requests,
within 1e-4 of them); the two blocks of an arm are 1.01
and 1 / 1.01 of it, so the block-level ratios (exp of the mean log block median difference) are
exactly the ratios of t0, g0 and the decode rates. Hand-computed for the reference a
(t0 = 0.020 s, g0 = 100 tok/s, wall 0.33 s, decode rate 96.97 tok/s):

- b, TTFT x20 (0.400 s), tg x0.95 (95 tok/s): |ln 20| = 3.00 > |ln 0.95| + ln 1.1 = 0.147: fires;
  its decode rate is 32 / (0.4 + 31/95) = 44.06 tok/s, x0.4543 the reference's.
- c, TTFT x1.05, tg x0.80: 0.049 < 0.223 + 0.095: a decode effect, does not fire.
- d, TTFT x1.30, tg x1.10: 0.262 > 0.095 + 0.095 = 0.191 at margin 0.1 (fires), < 0.095 + 0.182
  = 0.278 at margin 0.2 (does not): the margin is the threshold it is said to be.
"""

import math

import pandas as pd
import pytest
from bracket.article.findings import group, texts
from bracket.experiment import config, schema
from bracket.stats import analyze
from bracket.stats.findings import Finding
from bracket.stats.phases import lives_in_ttft, phases

ARMS = {"a": (0.020, 100.0), "b": (0.400, 95.0), "c": (0.021, 80.0), "d": (0.026, 110.0)}
N = 32


def _runs(arms=ARMS):
    rows, pos = [], 0
    for rnd, block_mult in ((1, 1.01), (2, 1 / 1.01)):
        for arm, (t0, g0) in arms.items():
            for run, m in enumerate((1 / 1.02, 1.0, 1.02)):
                k = m * block_mult
                ttft, tg = t0 * k, g0 / k
                wall = ttft + (N - 1) / tg
                rows.append(
                    {
                        "experiment": "x",
                        "arm": arm,
                        "workload": "w",
                        "block": pos,
                        "round": rnd,
                        "position": pos,
                        "run": run,
                        "valid": True,
                        "ttft_s": ttft,
                        "tg_tok_s": tg,
                        "wall_s": wall,
                        "decode_tok_s": N / wall,
                        "completion_tokens": N,
                    }
                )
            pos += 1
    return pd.DataFrame(rows)


def test_the_rows_carry_the_hand_computed_medians_and_ratios():
    rows = {r.arm: r for r in phases(_runs(), "a", n_resamples=200)}
    a, b = rows["a"], rows["b"]
    # A cell's median pools its six requests: the middle two are 1.01/1.02 and 1.02/1.01 of t0 (mean 1.00005 t0).
    assert a.ttft_s == pytest.approx(0.020, rel=1e-4) and a.tg_tok_s == pytest.approx(100.0, rel=1e-4)
    assert a.decode_tok_s == pytest.approx(96.9697, rel=1e-4) and a.ttft_ratio is None and a.in_ttft is None
    assert a.ttft_share == pytest.approx(0.02 / 0.33)
    assert b.ttft_ratio == pytest.approx(20.0) and b.tg_ratio == pytest.approx(0.95)
    assert b.decode_ratio == pytest.approx(0.33 / (0.4 + 31 / 95)) == pytest.approx(0.4543, abs=1e-4)
    assert b.ttft_ratio_ci_low > 1 and b.ttft_ci_low < 0.4 < b.ttft_ci_high
    assert rows["c"].ttft_ratio == pytest.approx(1.05) and rows["c"].tg_ratio == pytest.approx(0.8)
    assert rows["d"].ttft_ratio == pytest.approx(1.3) and rows["d"].tg_ratio == pytest.approx(1.1)


def test_the_finding_fires_where_ttft_moved_further_than_decode_and_nowhere_else():
    rows = {r.arm: r.in_ttft for r in phases(_runs(), "a", n_resamples=200, margin=0.1)}
    assert rows == {"a": None, "b": True, "c": False, "d": True}
    # At margin 0.2 d's TTFT (x1.30) is no longer 20 % further from 1 than its tg (x1.10).
    rows = {r.arm: r.in_ttft for r in phases(_runs(), "a", n_resamples=200, margin=0.2)}
    assert rows == {"a": None, "b": True, "c": False, "d": False}


def test_swapping_the_reference_inverts_the_ratios_and_keeps_the_verdict():
    ab = {r.arm: r for r in phases(_runs({k: ARMS[k] for k in "ab"}), "a", n_resamples=200)}["b"]
    ba = {r.arm: r for r in phases(_runs({k: ARMS[k] for k in "ab"}), "b", n_resamples=200)}["a"]
    assert ba.ttft_ratio == pytest.approx(1 / ab.ttft_ratio) and ba.tg_ratio == pytest.approx(1 / ab.tg_ratio)
    assert ab.in_ttft is ba.in_ttft is True


def test_the_rule_by_hand_and_what_it_cannot_decide():
    assert lives_in_ttft(1.3, (1.2, 1.4), 1.1, 0.1) is True
    assert lives_in_ttft(1.3, (1.2, 1.4), 1.1, 0.2) is False
    assert lives_in_ttft(1 / 1.3, (1 / 1.4, 1 / 1.2), 1 / 1.1, 0.1) is True  # symmetric in the log
    assert lives_in_ttft(1.3, (0.9, 1.8), 1.0, 0.1) is False  # not measured: its CI holds 1
    assert lives_in_ttft(1.3, (None, None), 1.0) is None
    assert lives_in_ttft(None, (1.2, 1.4), 1.0) is None and lives_in_ttft(1.3, (1.2, 1.4), None) is None
    with pytest.raises(ValueError, match="margin must be at least 0"):
        lives_in_ttft(1.3, (1.2, 1.4), 1.1, -0.1)


def test_analyze_puts_the_table_in_stats_and_names_the_arm_in_a_typed_finding():
    cfg = config.validate(
        {
            "arms": {k: {} for k in ARMS},
            "workloads": {"w": {"prompts": "p.jsonl"}},
            "design": {"kind": "abab", "rounds": 2},
            "analysis": {"bootstrap_resamples": 200},
        }
    )
    out = analyze(_runs(), cfg).data()
    ph = out["phases"]
    assert ph["margin"] == 0.1 == schema.schema_of("analysis", "phase_margin")["default"]
    assert [(r["arm"], r["in_ttft"]) for r in ph["rows"]] == [("a", None), ("b", True), ("c", False), ("d", True)]
    state = [f for f in out["findings"] if f["kind"] == "server state"]
    assert [(f["arm"], f["vs"], f["workload"]) for f in state] == [("b", "a", "w"), ("d", "a", "w")]
    assert (
        state[0]["payload"]["ttft_ratio"] == pytest.approx(20.0)
        and state[0]["payload"]["tg_ratio"] == pytest.approx(0.95)
        and state[0]["payload"]["margin"] == 0.1
    )
    assert any(t.startswith("b vs a / w: TTFT x20.00") for t in texts(out["findings"]))
    group(out["findings"])  # the records, payloads included, read back as Findings
    assert Finding.of(state[0]).payload.decode_ratio == pytest.approx(0.4543, abs=1e-4)
    # The margin is the experiment's.
    cfg = cfg.model_copy(update={"analysis": cfg.analysis.model_copy(update={"phase_margin": 0.2})})
    out = analyze(_runs(), cfg).data()
    assert [r["arm"] for r in out["phases"]["rows"] if r["in_ttft"]] == ["b"]


def test_a_table_without_ttft_has_no_phases():
    cfg = config.validate(
        {
            "arms": {"a": {}, "b": {}},
            "workloads": {"w": {"prompts": "p.jsonl"}},
            "analysis": {"bootstrap_resamples": 200},
        }
    )
    runs = _runs({k: ARMS[k] for k in "ab"}).drop(columns=["ttft_s", "tg_tok_s"])
    out = analyze(runs, cfg).data()
    assert out["phases"] is None and not [f for f in out["findings"] if f["kind"] == "server state"]
    assert math.isfinite(out["cells"][0]["median"])


def test_one_block_per_arm_leaves_the_question_open():
    """The block is the unit: with one block per arm the TTFT ratio has no CI that counts, so no verdict."""
    runs = _runs({k: ARMS[k] for k in "ab"})
    runs = runs[runs["round"] == 1]
    b = {r.arm: r for r in phases(runs, "a", n_resamples=200)}["b"]
    assert b.ttft_ratio == pytest.approx(20.0) and b.ttft_ratio_ci_low is None and b.in_ttft is None
