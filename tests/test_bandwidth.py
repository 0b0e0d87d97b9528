"""Known-device bandwidth table, resolution order, and the probes (GPU parts skip without a GPU)."""

from __future__ import annotations

import pytest
from bracket.physics import bandwidth


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA GB10", "GB10"),
        ("gb10", "GB10"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_lookup_understands_nvml_names(name, expected):
    assert bandwidth.lookup(name).name == expected


def test_table_holds_the_seed_figures_with_citations():
    assert bandwidth.lookup("GB10").gbps == 273  # seeds 000 and 003, NVIDIA spec
    assert bandwidth.lookup("H200").gbps == 4800
    assert all(
        d.citation.startswith(("NVIDIA", "AMD", "Apple")) and "https://" in d.citation for d in bandwidth.KNOWN_DEVICES
    )
    assert bandwidth.lookup("a toaster") is None


def test_resolve_order_user_then_table_then_probe(monkeypatch):
    monkeypatch.setattr(bandwidth, "detect_device_name", lambda: None)
    monkeypatch.setattr(bandwidth, "probe", lambda **k: {"gbps": 12.5, "method": "fake", "seconds": [1]})
    assert bandwidth.resolve(bandwidth_gbps=100, device="H200")[0] == 100
    gbps, src = bandwidth.resolve(device="H200")
    assert gbps == 4800 and src["kind"] == "table" and "h200" in src["citation"]
    gbps, src = bandwidth.resolve()
    assert gbps == 12.5 and src == {"kind": "probe", "gbps": 12.5, "method": "fake"}
    gbps, src = bandwidth.resolve(probe_bandwidth=False)
    assert gbps is None and src["kind"] == "none" and "hardware.bandwidth_gbps" in src["detail"]
    monkeypatch.setattr(bandwidth, "detect_device_name", lambda: "NVIDIA H200")
    gbps, src = bandwidth.resolve()
    assert gbps == 4800 and src["detected"] == "NVIDIA H200"


def test_cpu_probe_reports_a_plausible_bandwidth():
    r = bandwidth.probe_cpu(size_bytes=32 * 2**20, repeats=3)
    assert 0.1 < r["gbps"] < 2000
    assert r["best_gbps"] >= r["gbps"]
    assert "read + write" in r["method"] and len(r["seconds"]) == 3
    with pytest.raises(ValueError, match="at least 1 MiB"):
        bandwidth.probe_cpu(size_bytes=10)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return bandwidth.detect_device_name() is not None


@pytest.mark.skipif(
    not _cuda_available(), reason="no CUDA GPU on this machine; the device probe ran on an H200 (see issue 4)"
)
def test_cuda_probe_measures_a_large_fraction_of_the_datasheet():
    r = bandwidth.probe_cuda(size_bytes=512 * 2**20, repeats=5)
    dev = bandwidth.lookup(r["device"])
    assert r["gbps"] > 0
    if dev is not None:
        assert 0.3 * dev.gbps < r["gbps"] < 1.2 * dev.gbps


def test_cuda_probe_without_a_gpu_returns_none():
    if _cuda_available():
        pytest.skip("a GPU is present")
    assert bandwidth.probe_cuda(size_bytes=2**20, repeats=1) is None
