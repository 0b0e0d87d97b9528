"""NVML telemetry: skipped cleanly without a GPU, sampled and summarised with one (or a fake)."""

from __future__ import annotations

import logging
import time
import types

import pytest
from bracket.measure import telemetry
from bracket.measure.telemetry import Telemetry, summarize, throttle_names


def _fake_nvml(clock=1980):
    class NotSupported(Exception):
        pass

    def unsupported(*a):
        raise NotSupported("Not Supported")

    return types.SimpleNamespace(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_CLOCK_GRAPHICS=0,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: "h",
        nvmlDeviceGetName=lambda h: "NVIDIA GB10",
        nvmlDeviceGetClockInfo=lambda h, kind: {1: clock, 2: 4266, 0: clock}[kind],
        nvmlDeviceGetTemperature=lambda h, kind: 61,
        nvmlDeviceGetPowerUsage=lambda h: 45_500,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 140_000,
        nvmlDeviceGetMemoryInfo=unsupported,  # unified memory on GB10: NVML cannot say
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=97, memory=80),
        nvmlDeviceGetPerformanceState=lambda h: 0,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | 0x20,
    )


def test_throttle_mask_is_decoded():
    assert throttle_names(0x4 | 0x20) == ["sw_power_cap", "sw_thermal_slowdown"]
    assert throttle_names(0) == [] and throttle_names(None) is None


def test_read_sample_keeps_unsupported_fields_null():
    s = telemetry.read_sample(_fake_nvml(), "h")
    assert s["sm_clock_mhz"] == 1980 and s["mem_clock_mhz"] == 4266 and s["temp_c"] == 61
    assert s["power_w"] == pytest.approx(45.5) and s["power_limit_w"] == pytest.approx(140)
    assert s["mem_used_bytes"] is None and s["mem_total_bytes"] is None
    assert s["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]


@pytest.mark.integration
@pytest.mark.serial
def test_sampler_collects_during_a_block(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    with Telemetry(interval_s=0.01) as tel:
        time.sleep(0.08)
    assert tel.device_name == "NVIDIA GB10"
    assert len(tel.samples) >= 3
    assert {s["sm_clock_mhz"] for s in tel.samples} == {1980}
    summary = summarize(tel.samples)
    assert summary["sm_clock_mhz"] == {"median": 1980, "min": 1980, "max": 1980}
    assert summary["mem_used_bytes"] is None
    assert summary["throttle_reasons_seen"] == ["sw_power_cap", "sw_thermal_slowdown"]


def test_summary_reports_drift_between_samples():
    # Seed 003: a recipe published at a 2,000 MHz cap ran at about 2,490 MHz here.
    samples = [{"t": i, "sm_clock_mhz": c} for i, c in enumerate((2490, 2480, 2000, 2495))]
    s = summarize(samples)
    assert s["sm_clock_mhz"] == {"median": 2485.0, "min": 2000, "max": 2495}
    assert s["duration_s"] == 3 and summarize([]) is None and summarize(None) is None


def test_without_nvml_start_logs_one_line_and_stop_returns_none(monkeypatch, caplog):
    import sys

    def broken():
        raise OSError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=broken))
    monkeypatch.setattr(telemetry, "_skip_logged", False)
    with caplog.at_level(logging.WARNING, logger="bracket.measure.telemetry"):
        for _ in range(2):
            tel = Telemetry()
            assert tel.start() is False
            assert tel.stop() is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "telemetry skipped" in lines[0]


def _has_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(
    not _has_gpu(), reason="no NVML/GPU on this machine; telemetry was sampled on an H200 (see issue 4)"
)
def test_real_nvml_samples_clocks_and_power():
    with Telemetry(interval_s=0.05) as tel:
        time.sleep(0.3)
    s = tel.samples[0]
    assert s["sm_clock_mhz"] > 0 and s["temp_c"] > 0
