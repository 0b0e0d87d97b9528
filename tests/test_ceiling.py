"""Decode ceilings and precision hypotheses, checked against seeds 000 and 003 by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from bracket.experiment import config
from bracket.physics import ceiling, weights
from hypothesis import given
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location(
    "physics_checkpoints", Path(__file__).parent / "data" / "physics" / "checkpoints.py"
)
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)

GB = 1e9


def by_name(rows):
    return {r["name"]: r for r in rows}


def test_seed000_arithmetic_from_its_own_inputs():
    # Seed 000: 18.77 GB read as 4-bit values on a 273 GB/s GB10, 12.32 tok/s measured.
    #   as stored  273 / 18.77 = 14.54 tok/s, 12.32 / 14.54 = 85%
    #   FP8        18.77 x 8/4 = 37.54 GB, 273 / 37.54 = 7.27 (the seed rounds 37.5 first: 7.28), 169%
    #   BF16       18.77 x 16/4 = 75.08 GB, 273 / 75.08 = 3.64, 12.32 / 3.636 = 339% (seed: 338%)
    seed = {"bytes_per_token": 18.77 * GB, "bits_per_weight": {"backbone": 4}}
    rows = by_name(ceiling.hypotheses(seed, 273, 12.32))
    stored, fp8, bf16 = rows["as stored"], rows["dequantised to FP8"], rows["dequantised to BF16"]
    assert round(stored["ceiling_tok_s"], 2) == 14.54
    assert round(stored["efficiency"], 2) == 0.85 and stored["possible"] is True
    assert round(fp8["bytes_per_token"] / GB, 1) == 37.5
    assert fp8["ceiling_tok_s"] == pytest.approx(7.28, abs=0.01)
    assert round(fp8["efficiency"], 2) == 1.69 and fp8["possible"] is False
    assert round(bf16["bytes_per_token"] / GB, 1) == 75.1
    assert round(bf16["ceiling_tok_s"], 2) == 3.64
    assert bf16["efficiency"] == pytest.approx(3.38, abs=0.01) and bf16["possible"] is False


@pytest.fixture(scope="module")
def unsloth(tmp_path_factory):
    tensors, config = ck.qwen38_27b_unsloth_nvfp4()
    return weights.account(ck.write(tmp_path_factory.mktemp("unsloth"), tensors, config, shards=3))


def test_seed003_ceiling_and_efficiency_from_headers(unsloth):
    # Seed 003: 273 / 19.10 = 14.3 tok/s (70.0 ms per token); 11.4 measured = 80%, which needs
    # 11.4 x 19.10 = 217.7 GB/s ("plain decoding achieves 217 GB/s").
    stored = by_name(ceiling.hypotheses(unsloth, 273, 11.4))["as stored"]
    assert round(stored["ceiling_tok_s"], 1) == 14.3
    assert round(stored["ms_per_token"], 1) == 70.0
    assert round(stored["efficiency"], 2) == 0.80
    assert stored["implied_gbps"] == pytest.approx(217.7, abs=0.1)


def test_seed003_hypotheses_from_headers(unsloth):
    # Widening each format by hand: NVFP4 MLPs 14.97e9 weights, FP8 parts 9.38e9 + output 1.27e9,
    # BF16/F32 small parts 0.068 GB. FP8: 14.97 + 10.63 + 0.07 = 25.65 GB (8 bits only widens NVFP4).
    # BF16: 2 x (14.97 + 10.63) + 0.07 = 51.25 GB; seed 003 says "about 53 GB" (2 bytes x ~26.5e9).
    rows = by_name(ceiling.hypotheses(unsloth, 273, 11.4))
    assert round(rows["dequantised to FP8"]["bytes_per_token"] / GB, 2) == 25.65
    assert round(rows["dequantised to BF16"]["bytes_per_token"] / GB, 2) == 51.25
    assert rows["dequantised to FP8"]["possible"] is False  # 273 / 25.65 = 10.6 < 11.4
    # 273 / 51.25 = 5.3 tok/s; the seed's rounder 53 GB gives 5.2 ("could not exceed 5").
    assert round(rows["dequantised to BF16"]["ceiling_tok_s"], 1) == 5.3


def test_bf16_checkpoint_has_three_equal_hypotheses(tmp_path):
    tensors, config = ck.embedded_qwen3()
    acct = weights.account(ck.write(tmp_path, tensors, config))
    rows = ceiling.hypotheses(acct, 25, 500)
    assert {r["bytes_per_token"] for r in rows} == {acct["bytes_per_token"]}


def test_with_measured_recomputes_efficiency(unsloth):
    c = ceiling.build(unsloth, 273, {"kind": "user"})
    assert all(h["efficiency"] is None for h in c["hypotheses"])
    filled = ceiling.with_measured(c, 11.4)
    assert filled["measured_tok_s"] == 11.4
    assert round(filled["hypotheses"][0]["efficiency"], 2) == 0.80
    assert c["hypotheses"][0]["efficiency"] is None  # the input is left as it was


def _exp(**keys):
    """A validated experiment of one arm with these top-level keys (hardware, engine, hosts)."""
    return config.validate({"arms": {"a": {}}, **keys})


def test_write_json_resolves_bandwidth_from_table_and_user(unsloth, tmp_path):
    wj = tmp_path / "weights.json"
    wj.write_text(json.dumps({**unsloth, "arms": {"mtp3": {"bytes_per_step": weights.mtp_step_bytes(unsloth, 3)}}}))
    c = ceiling.write_json(wj, _exp(hardware={"device": "GB10", "steadiness_s": 0}), tmp_path / "ceiling.json")
    assert c["bandwidth_gbps"] == 273 and c["bandwidth_source"]["kind"] == "table"
    assert "DGX Spark" in c["bandwidth_source"]["citation"]
    # Seed 003: an MTP step of 25.5 GB at 217 GB/s takes 117 ms; at 273 GB/s 93 ms (10.7 steps/s).
    assert c["arms"]["mtp3"]["steps_per_s_ceiling"] == pytest.approx(273 / 25.46, abs=0.01)
    u = ceiling.write_json(
        wj, _exp(hardware={"device": "GB10", "bandwidth_gbps": 217, "steadiness_s": 0}), tmp_path / "c2.json"
    )
    assert u["bandwidth_gbps"] == 217 and u["bandwidth_source"]["kind"] == "user"
    assert json.loads((tmp_path / "c2.json").read_text())["ceiling_tok_s"] == pytest.approx(
        217e9 / unsloth["bytes_per_token"]
    )
    with pytest.raises(ValueError, match="not in the bandwidth table"):
        ceiling.write_json(wj, _exp(hardware={"device": "Z80"}), tmp_path / "c3.json")


def test_the_machine_steadiness_probe_runs_only_for_a_local_server_without_a_gpu(unsloth, tmp_path, monkeypatch):
    from bracket.physics import bandwidth, steadiness

    wj = tmp_path / "weights.json"
    wj.write_text(json.dumps(unsloth))
    calls = []
    monkeypatch.setattr(
        steadiness, "probe", lambda seconds, window_s: calls.append((seconds, window_s)) or {"spread": 0.2}
    )
    monkeypatch.setattr(bandwidth, "detect_device_name", lambda: None)
    hw = {"device": "GB10"}
    assert ceiling.write_json(wj, _exp(hardware=hw), tmp_path / "c.json")["machine_steadiness"] == {"spread": 0.2}
    assert json.loads((tmp_path / "c.json").read_text())["machine_steadiness"] == {"spread": 0.2}
    assert calls == [(10, 0.5)]  # the default: ten seconds in half-second windows
    ceiling.write_json(wj, _exp(hardware={**hw, "steadiness_s": 1}), tmp_path / "c.json")
    assert calls[-1] == (1, 0.25)  # a short probe still has four windows
    attach = {"launch": "attach", "kind": "openai", "embedded": False, "base_url": "http://127.0.0.1:9"}
    for cfg in (
        _exp(hardware={**hw, "steadiness_s": 0}),  # turned off
        _exp(hardware=hw, engine=attach),  # the server is elsewhere
        _exp(hardware=hw, hosts=["box1", "box2"]),
    ):  # several machines
        assert "machine_steadiness" not in ceiling.write_json(wj, cfg, tmp_path / "c.json")
    monkeypatch.setattr(bandwidth, "detect_device_name", lambda: "NVIDIA H200")  # decoding reads HBM
    assert "machine_steadiness" not in ceiling.write_json(wj, _exp(hardware=hw), tmp_path / "c.json")
    assert len(calls) == 2
    with pytest.raises(ValueError, match="hardware.steadiness_s is 0.5: give 0"):
        ceiling.write_json(wj, _exp(hardware={**hw, "steadiness_s": 0.5}), tmp_path / "c.json")


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        ceiling.ceiling_tok_s(0, 1e9)
    with pytest.raises(ValueError, match="measured rate must be positive"):
        ceiling.hypotheses({"bytes_per_token": 1e9}, 100, -1)


@given(b=st.floats(1e6, 1e12), w=st.floats(1, 1e4), m=st.floats(0.01, 1e4))
def test_efficiency_is_measured_times_bytes_over_bandwidth(b, w, m):
    # efficiency = m / (w / b) = m x b / w, and possible exactly when that is at most 1;
    # widening never makes a hypothesis cheaper than the weights as stored.
    rows = ceiling.hypotheses({"bytes_per_token": b, "bits_per_weight": {"backbone": 4}}, w, m)
    assert rows[0]["efficiency"] == pytest.approx(m * b / (w * 1e9), rel=1e-9)
    assert rows[0]["possible"] == (rows[0]["efficiency"] <= 1)
    assert rows[0]["bytes_per_token"] <= rows[1]["bytes_per_token"] <= rows[2]["bytes_per_token"]
