"""The machine-steadiness probe (bracket.physics.steadiness): its record, its reading and where they land."""

from __future__ import annotations

import math

import pytest
from bracket.article.ceiling import machine_steadiness
from bracket.article.findings import message, texts
from bracket.experiment import config
from bracket.physics import steadiness
from bracket.stats.analyze import _machine
from bracket.stats.findings import Finding, FindingKind


def test_the_record_of_four_windows_worked_by_hand():
    s = steadiness.summary([10.0, 12.0, 8.0, 11.0], seconds=2, window_s=0.5, nbytes=32 * 2**20)
    # median of 8, 10, 11, 12 is 10.5; spread (12 - 8) / 10.5 = 0.381
    assert s["median_gbps"] == 10.5 and s["low_gbps"] == 8 and s["high_gbps"] == 12
    assert s["spread"] == pytest.approx(4 / 10.5)
    assert "32 MiB" in s["method"] and "0.5 s window" in s["method"]


def test_the_real_probe_reads_consecutive_windows():
    s = steadiness.probe(seconds=0.6, size_bytes=2**20, window_s=0.15)
    assert 3 <= len(s["windows_gbps"]) <= 5 and all(w > 0 for w in s["windows_gbps"])
    w = sorted(s["windows_gbps"])
    assert s["low_gbps"] == pytest.approx(w[0], abs=1e-3) and s["high_gbps"] == pytest.approx(w[-1], abs=1e-3)
    assert s["spread"] == pytest.approx((s["high_gbps"] - s["low_gbps"]) / s["median_gbps"])


@pytest.mark.integration
@pytest.mark.serial  # two rates of this machine's memory, read one after the other
def test_the_steadiness_windows_and_the_ceilings_bandwidth_are_one_measurement():
    """The article prints both: the bandwidth probe's rate (the ceiling's numerator) and the steadiness
    windows' range. With a 128 MiB buffer the windows read 14.6-16.3 GB/s beside a probe of 26.5 on the
    project's machine (the copy's store path changes with its size); with the probe's own buffer they agree."""
    from bracket.physics import bandwidth

    rate = bandwidth.probe_cpu(repeats=10)["gbps"]
    windows = steadiness.probe(seconds=2.0, window_s=0.5)
    assert windows["method"].startswith(f"numpy.copyto of {bandwidth.CPU_PROBE_BYTES // 2**20} MiB")
    assert windows["median_gbps"] == pytest.approx(rate, rel=0.2), (rate, windows["windows_gbps"])


@pytest.mark.parametrize("kw", [{"seconds": 0.1}, {"seconds": 1, "window_s": 0.6}, {"size_bytes": 1000}])
def test_a_probe_too_short_or_too_small_is_refused_with_the_reason(kw):
    with pytest.raises(ValueError, match="at least two windows"):
        steadiness.probe(**{"seconds": 1, "window_s": 0.25, **kw})


def test_the_warning_names_a_machine_that_moved_as_much_as_the_spread_warning():
    moved = steadiness.summary([10.0, 12.0, 8.0, 11.0], seconds=10, window_s=0.5, nbytes=2**25)
    (finding,) = _machine(moved, 0.15)
    assert finding.payload.spread == pytest.approx(4 / 10.5) and finding.payload.threshold == 0.15
    text = message(finding)
    assert text.startswith("this machine is not steady") and "moved 38% between 0.5 s windows over 10 s" in text
    assert "(8.0-12.0 GB/s)" in text
    steady = steadiness.summary([10.0, 10.4, 10.2, 10.1], seconds=10, window_s=0.5, nbytes=2**25)  # 3.9 %
    assert _machine(steady, 0.15) == [] and _machine(None, 0.15) == []
    # the article's ceiling section: a warning beside the bandwidth, or a plain sentence
    para = machine_steadiness(moved, 0.15, True)
    assert para.kind == "warn" and "ranged 8.0–12.0 GB/s" in para.text and "(38.1% of its median)" in para.text
    assert machine_steadiness(steady, 0.15, False).kind == "" and machine_steadiness(None, 0.15, False) is None
    assert machine_steadiness(steady, 0.15, False).text.endswith(
        "(3.9% of its median), under the 15% at which bracket warns."
    )


def test_bandwidths_are_written_with_four_significant_figures():
    from bracket.article.ceiling import gbps

    assert [gbps(b) for b in (27.929224, 217.5, 273, 4800, 13000.4)] == ["27.93", "217.5", "273", "4800", "13,000"]


def test_analyze_lists_the_machine_among_the_warnings():
    import pandas as pd
    from bracket.stats.analyze import analyze

    rows = [
        {
            "experiment": "x",
            "arm": arm,
            "workload": "w",
            "block": b,
            "round": b // 2 + 1,
            "run": r,
            "decode_tok_s": (100 if arm == "a" else 110) * (1 + 0.01 * r),
            "warmup": False,
            "invalid": "",
        }
        for b, arm in enumerate(["a", "b", "b", "a"])
        for r in range(3)
    ]
    wl = {"prompts": "experiments/prompts/code.jsonl"}
    cfg = config.validate(
        {"arms": {"a": {}, "b": {}}, "reference": "a", "workloads": {"w": wl}, "design": {"kind": "abba"}},
        source="test",
    )
    moved = {"machine_steadiness": steadiness.summary([10.0, 12.0, 8.0, 11.0], seconds=10, window_s=0.5, nbytes=2**25)}
    out = analyze(pd.DataFrame(rows), cfg, moved).data()
    assert [f for f in out["findings"] if f["kind"] == "machine"]
    assert any(w.startswith("this machine is not steady") for w in texts(out["findings"]))
    quiet = {"machine_steadiness": steadiness.summary([10.0, 10.1], seconds=1, window_s=0.5, nbytes=2**25)}
    assert not [f for f in analyze(pd.DataFrame(rows), cfg, quiet).data()["findings"] if f["kind"] == "machine"]
    with pytest.raises(TypeError, match="Machine payload"):
        Finding(FindingKind.MACHINE)


def test_the_bench_summary_of_units_worked_by_hand():
    from studies.quiet_engine.cpu_steadiness import summary

    # durations 1, 1, 0.5, 1 | 2, 2, 2, 1 s: rates 1, 1, 2, 1 | 0.5, 0.5, 0.5, 1 in two pseudo-blocks of four
    s = summary([1, 1, 0.5, 1, 2, 2, 2, 1], runs=4)
    assert s["blocks"] == 2 and s["spread_median"] == pytest.approx(1.0) and s["spread_max"] == pytest.approx(1.0)
    # block medians 1 and 0.5: sd of their logs = ln 2 / sqrt 2; the slowest unit (0.5) against the median (1)
    assert s["between_blocks"] == pytest.approx(math.log(2) / math.sqrt(2)) and s["slowest_vs_median"] == -0.5
    # successive differences of log rates: four of +-ln 2 and three zeros, mean 0: sd ln 2 * sqrt(4/6), over sqrt 2
    assert s["sd_log_run_to_run"] == pytest.approx(math.log(2) / math.sqrt(3))
