"""The neutrality control's parts, one function at a time: plain bodies, server timings, the cost and its CI."""

from __future__ import annotations

import math

import pytest
from bracket import records
from bracket.article import neutrality as words
from bracket.article.findings import message
from bracket.controls.neutrality import plan
from bracket.engines import get, llamacpp, vllm
from bracket.experiment import config
from bracket.experiment.config import ExperimentError
from bracket.stats import neutrality as neutral
from bracket.stats.neutrality import findings, instrument_cost
from bracket.stats.results import Neutrality
from conftest import ROOT

# what every timed request asks for, as validated (bracket.typed.experiment.Request), and an arm of no speculation
_EXP = config.validate({"arms": {"a": {}}, "request": {"max_tokens": 64, "temperature": 0, "seed": 7, "timeout_s": 10}})
REQ, ARM = _EXP.request, _EXP.arms["a"]
PLAIN = {"model", "prompt", "max_tokens", "temperature", "stream", "stream_options", "ignore_eos"}


@pytest.mark.parametrize("kind", ["vllm", "llamacpp", "sglang", "openai"])
def test_the_plain_body_is_what_a_bare_openai_client_sends_plus_ignore_eos(kind):
    body = get(kind).plain_body("m", "hello", REQ)
    assert set(body) == PLAIN
    assert body["temperature"] == 0 and body["max_tokens"] == 64 and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_what_bracket_adds_to_the_plain_body_per_engine():
    # Greedy: no seed anywhere (nothing is drawn). What is left is each engine's reasoned fields
    # (engines' request_body docstrings); a generic OpenAI server gets the plain body itself.
    want = {"vllm": {"repetition_penalty"}, "llamacpp": {"repeat_penalty", "cache_prompt"}, "openai": set()}
    for kind, fields in want.items():
        a = get(kind)
        extra = set(a.request_body("m", "hello", REQ, seed=7, arm=ARM)) - set(a.plain_body("m", "hello", REQ))
        assert extra == fields, kind


def test_ollamas_plain_body_is_its_own_route_with_length_and_temperature_only():
    a = get("ollama")
    body = a.plain_body("m", "hello", REQ)
    assert a.plain_path == "/api/generate" and body["options"] == {"num_predict": 64, "temperature": 0}
    t = a.server_timing([{"response": "x"}, {"done": True, "eval_count": 64, "eval_duration": 320_000_000}], None, None)
    assert t.seconds == pytest.approx(0.32) and t.tokens == 64 and t.per_token_s == pytest.approx(0.005)


def test_llamacpp_server_timing_is_predicted_ms_over_predicted_n_of_a_real_capture():
    text = (ROOT / "tests/data/engines/llamacpp-0.3.36-completions-nospec.sse").read_text()
    import json

    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    t = get("llamacpp").server_timing(events, None, None)
    assert t.seconds == pytest.approx(0.008699) and t.tokens == 24  # "predicted_ms":8.699, "predicted_n":24
    assert llamacpp.timing_from_timings({"predicted_ms": 0, "predicted_n": 3}) is None


def metrics(decode_s, decode_n, gen, gen_n):
    return (
        f'vllm:request_decode_time_seconds_sum{{engine="0"}} {decode_s}\n'
        f'vllm:request_decode_time_seconds_count{{engine="0"}} {decode_n}\n'
        f'vllm:request_generation_tokens_sum{{engine="0"}} {gen}\n'
        f'vllm:request_generation_tokens_count{{engine="0"}} {gen_n}\n'
    )


def test_vllm_server_timing_is_the_decode_histograms_delta_over_tokens_after_the_first():
    t = vllm.decode_from_metrics(metrics(1.5, 3, 192, 3), metrics(2.13, 4, 256, 4))
    # 0.63 s for 64 - 1 tokens after the first: 10 ms per token
    assert t.seconds == pytest.approx(0.63) and t.tokens == 63 and t.per_token_s == pytest.approx(0.01)
    assert vllm.decode_from_metrics(metrics(1.5, 3, 192, 3), metrics(2.8, 5, 320, 5)) is None  # two finished
    assert vllm.decode_from_metrics("", metrics(2.13, 4, 256, 4)) is None  # no histograms before


def control_table(pairs):
    """pairs: [(position, pair, bracket_ms_per_token, plain_ms_per_token)] at 100 tokens each."""
    recs = []
    for pos, pair, b, p in pairs:
        for body, ms in (("bracket", b), ("plain", p)):
            recs.append(
                records.new_record(
                    experiment="x",
                    arm="a",
                    block=pos,
                    position=pos,
                    round=0,
                    run=None,
                    warmup=False,
                    workload="code",
                    prompt_id="p0",
                    control="neutrality",
                    body=body,
                    pair=pair,
                    wall_s=ms / 10 + 0.05,
                    completion_tokens=100,
                    max_tokens=100,
                    finish_reason="length",
                    cached_tokens=0,
                    server_decode_s=ms / 10,
                    server_tokens=100,
                    server_timing="t",
                    output_sha256="s",
                )
            )
    return records.control_table(recs)


def test_the_cost_is_the_mean_of_block_log_ratios_with_a_t_interval_on_the_blocks():
    # block ratios 1.10, 1.20, 1.05 (block 1 from two pairs whose log ratios average ln 1.2):
    # logs 0.0953102, 0.1823216, 0.0487902; mean 0.1088073, sd 0.0677812, se 0.0391335,
    # t(0.975, 2) = 4.302653, half-width 0.1683778: ratio exp(0.1088073) = 1.114947,
    # CI exp(0.1088073 -/+ 0.1683778) = 0.942169, 1.319411
    r2 = math.exp(2 * math.log(1.2) - math.log(1.25))
    c = instrument_cost(control_table([(0, 0, 1.10, 1.0), (1, 0, 1.25, 1.0), (1, 1, r2, 1.0), (2, 0, 1.05, 1.0)]))
    assert c["basis"] == "server timing" and c["blocks"] == 3 and c["pairs"] == 4 and c["df"] == 2
    assert c["ratio"] == pytest.approx(1.114947, abs=1e-6) and c["cost"] == pytest.approx(0.114947, abs=1e-6)
    assert c["ci_low"] == pytest.approx(0.942169, abs=1e-6) and c["ci_high"] == pytest.approx(1.319411, abs=1e-6)
    assert [b["ratio"] for b in c["per_block"]] == pytest.approx([1.10, 1.20, 1.05])
    assert findings(c) == []  # the CI reaches below 1 %: not established


def test_a_cost_whose_ci_lies_above_one_percent_is_a_finding_and_swapping_the_bodies_inverts_it():
    rows = [(0, 0, 1.10, 1.0), (1, 0, 1.12, 1.0), (2, 0, 1.11, 1.0)]
    c = instrument_cost(control_table(rows))
    assert c["ci_low"] > 1.01
    f = findings(c)
    assert len(f) == 1 and f[0].kind == "instrument" and f"{c['cost']:+.1%} per token" in message(f[0])
    inv = instrument_cost(control_table([(pos, pair, p, b) for pos, pair, b, p in rows]))
    assert inv["ratio"] == pytest.approx(1 / c["ratio"]) and inv["ci_low"] == pytest.approx(1 / c["ci_high"])
    # cheaper than a plain client's is a finding too: the rates are then faster than a plain client sees
    g = findings(inv)
    assert len(g) == 1 and g[0].payload.direction == "faster" and "faster than under a plain client's" in message(g[0])
    assert f[0].payload.direction == "slower" and "slower than under a plain client's" in message(f[0])
    assert findings({**c, "ci_low": 0.991, "ci_high": 1.009}) == []


def test_one_block_gives_no_interval_and_no_finding_and_wall_time_stands_in_without_server_timing():
    t = control_table([(0, 0, 1.5, 1.0)])
    c = instrument_cost(t)
    assert c["ratio"] == pytest.approx(1.5) and c["ci_low"] is None and findings(c) == []
    t.loc[0, "server_decode_s"] = None  # one request without the server's timing: wall time for all
    c = instrument_cost(t)
    assert c["basis"] == "wall time" and c["ratio"] == pytest.approx((0.15 + 0.05) / (0.1 + 0.05))
    # with TTFT recorded, wall time counts decode only: (wall - ttft) over the tokens after the first, so
    # a second request whose prompt the prefix cache served is not made cheaper per token by it
    t["ttft_s"] = [0.05, 0.01]  # bracket first (prefill 50 ms), plain second (its prompt cached: 10 ms)
    t["wall_s"] = [0.05 + 99 * 1.5e-3, 0.01 + 99 * 1.0e-3]
    c = instrument_cost(t)
    assert c["basis"] == "wall time, after the first token" and c["ratio"] == pytest.approx(1.5)


def test_control_records_never_reach_the_runs_table():
    arm = records.new_record(
        experiment="x",
        arm="a",
        block=0,
        position=0,
        run=0,
        warmup=False,
        workload="code",
        wall_s=1.0,
        completion_tokens=8,
        max_tokens=8,
        finish_reason="length",
        cached_tokens=0,
    )
    ctl = dict(arm, control="neutrality", body="plain", pair=0)
    runs = records.tidy([arm, ctl])
    assert len(runs) == 1 and "control" not in runs
    assert len(records.control_table([arm, ctl])) == 1


def test_the_pairs_alternate_their_order_between_pairs_and_blocks():
    cfg = config.validate(
        {
            "arms": {"a": {}},
            "workloads": {"code": {"prompts": "c.jsonl"}, "chat": {"prompts": "h.jsonl"}},
            "controls": {"neutrality_pairs": 3},
        }
    )
    wl = {"code": [{"id": "c0", "prompt": "C0"}, {"id": "c1", "prompt": "C1"}], "chat": [{"id": "h0", "prompt": "H0"}]}
    reqs = plan(cfg, 1, wl, lambda w, i: f"[{w}:{i}]")
    assert [(r.pair, r.body, r.workload, r.prompt_id) for r in reqs] == [
        (0, "plain", "code", "c1"),
        (0, "bracket", "code", "c1"),
        (1, "bracket", "chat", "h0"),
        (1, "plain", "chat", "h0"),
        (2, "plain", "code", "c1"),
        (2, "bracket", "code", "c1"),
    ]
    # both bodies of a pair get the same prompt (so a greedy engine gives both the same tokens); pairs differ
    assert reqs[0].prompt == reqs[1].prompt == "[code:0]C1" and reqs[4].prompt == "[code:2]C1"


def test_turning_the_control_off_needs_a_reason():
    base = {"arms": {"a": {}}}
    assert config.validate(base).controls.neutrality is True
    with pytest.raises(ExperimentError, match="controls.neutrality is false without a reason.*neutrality_off"):
        config.validate({**base, "controls": {"neutrality": False}})
    assert config.validate({**base, "controls": {"neutrality": False, "neutrality_off": "attached to production"}})


def said(n: dict):
    """The method section's words for a neutrality record as stats.json holds it."""
    return words.instrument_sentence(Neutrality.model_validate(n))


def test_the_method_section_states_the_cost_with_its_interval():
    n = {
        "status": "on",
        "basis": "server timing",
        "timing_sources": ["llama.cpp timings.predicted_ms / predicted_n"],
        "blocks": 12,
        "pairs": 24,
        "ratio": 1.234,
        "cost": 0.234,
        "ci_low": 1.2,
        "ci_high": 1.27,
        "df": 11,
        "confidence": 0.95,
        "bracket_ms_per_token": 6.67,
        "plain_ms_per_token": 5.41,
    }
    text, kind = said(n)
    assert kind == "warn" and "cost the server +23.4% per token (6.670 against 5.410 ms per token" in text
    assert "95% CI +20.0% to +27.0%, 11 degrees of freedom between blocks" in text
    text, kind = said({**n, "ratio": 1.002, "cost": 0.002, "ci_low": 0.995, "ci_high": 1.009})
    assert kind == "" and "within 1 % either way" in text
    # the llama.cpp sweep of 2026-12-01 (top_k 1 body): cheaper than a plain client, a finding either way
    text, kind = said({**n, "ratio": 0.9206, "cost": -0.0794, "ci_low": 0.8920, "ci_high": 0.9501})
    assert kind == "warn" and "-7.9% per token" in text and "faster than a plain client would see" in text
    text, kind = said({**n, "ratio": 0.995, "cost": -0.005, "ci_low": 0.985, "ci_high": 1.004})
    assert kind == "" and "not ruled out" in text
    text, kind = said({"status": "off", "off_reason": "attached to production"})
    assert kind == "warn" and "was off: attached to production" in text
    text, _ = said({"status": "no_records"})
    assert "left no pair to compare (no records: the blocks ran no control pairs" in text
    # the analysis's reading is the one said (bracket.stats.neutrality.reading), not worked out again
    assert neutral.reading(n) == "costs_more" and neutral.reading({**n, "ci_low": None}) == "no_interval"
    text, kind = said({**n, "reading": "within"})
    assert kind == "" and "within 1 % either way" in text
    assert words.instrument_sentence(None) is None


def test_the_method_section_says_whether_both_bodies_gave_the_same_tokens():
    n = {
        "status": "on",
        "basis": "server timing",
        "timing_sources": ["t"],
        "blocks": 3,
        "pairs": 6,
        "ratio": 1.0,
        "cost": 0.0,
        "ci_low": 0.995,
        "ci_high": 1.005,
        "df": 2,
        "confidence": 0.95,
    }
    text, _ = said({**n, "same_output": {"same": 6, "of": 6}})
    assert "on the same prompt" in text and "Both bodies gave the same tokens in all 6 pairs." in text
    text, _ = said({**n, "same_output": {"same": 4, "of": 6}})
    assert "the same tokens in 4 of 6 pairs: in the others bracket's fields changed the output" in text


def test_same_output_counts_pairs_whose_two_outputs_are_identical():
    t = control_table([(0, 0, 1.0, 1.0), (1, 0, 1.0, 1.0), (2, 0, 1.0, 1.0)])
    t.loc[(t["position"] == 2) & (t["body"] == "plain"), "output_sha256"] = "other"
    assert instrument_cost(t)["same_output"] == {"same": 2, "of": 3}
