"""The Spark Arena cell: llama-benchy's window rate, worked by hand, and the depth calibration."""

import pytest

from bracket import arena, article


def user(started, ttft, n, tg, **kw):
    return {"started_at": started, "ttft_s": ttft, "completion_tokens": n, "tg_tok_s": tg, "error": None, **kw}


def test_window_rate_by_hand():
    # user 1: first token at 100.5, 127 more tokens at 100 tok/s -> last at 101.77
    # user 2: first token at 100.8, 127 more at 127 tok/s -> last at 101.8
    # window 101.8 - 100.5 = 1.3 s, decode tokens 127 + 127 = 254 -> 195.38 tok/s
    w = arena.window_rate([user(100.0, 0.5, 128, 100.0), user(100.0, 0.8, 128, 127.0)])
    assert w["window_s"] == pytest.approx(1.3)
    assert w["decode_tokens"] == 254
    assert w["window_tok_s"] == pytest.approx(254 / 1.3)


def test_window_rate_is_unknown_when_a_user_failed():
    w = arena.window_rate([user(100.0, 0.5, 128, 100.0), user(100.0, None, None, None, error="HTTP 500")])
    assert w["window_tok_s"] is None


def test_calibration_reaches_the_depth_as_the_server_counts():
    prompts = [{"id": "a", "prompt": "def f(x):\n    return x + 1\n"}]
    count = lambda text: len(text) // 3 + 7  # a server with 3 characters per token and 7 template tokens
    chars = arena.calibrate(count, prompts, 1024)
    assert abs(count(arena.context(prompts, chars)) - 1024) <= 5
    assert len(arena.context(prompts, 500)) == 500


def test_spec_defaults_are_the_leaderboard_cell():
    assert arena.spec({"prompts": "p", "kind": "arena"}) == {"depth": 16384, "users": 2, "tokens": 128}
    assert arena.spec({"kind": "arena", "depth": 1024}) == {"depth": 1024, "users": 2, "tokens": 128}
    assert arena.is_arena({"kind": "arena"}) and not arena.is_arena({"prompts": "p"})


def test_summary_and_section():
    cfg = {"workloads": {"arena": {"kind": "arena", "depth": 1024, "prompts": "p"}}, "arms": {"b": {}},
           "analysis": {"confidence": 0.95, "bootstrap_resamples": 200, "seed": 1, "spread_warning": 0.15}}
    raw = []
    for run, tg in enumerate([100.0, 110.0, 120.0]):
        for ttft in (0.5, 0.6):
            raw.append(user(10.0 * run, ttft, 128, tg, arm="b", workload="arena", block=0, run=run, warmup=False,
                            cached_tokens=0, finish_reason="length", max_tokens=128, wall_s=2.0,
                            prompt_tokens=1024))
    s = arena.summarize(raw, cfg)
    (c,) = s["cells"]
    assert c["depth_measured"] == 1024 and len(c["runs"]) == 3 and all(r["valid"] for r in c["runs"])
    # run 0: window from 0.5 to 0.6 + 1.27 = 1.37 s for 254 tokens
    assert c["runs"][0]["window_tok_s"] == pytest.approx(254 / 1.37)
    md = article.section_arena(None, article.Controls([], None, None, s))._repr_markdown_()
    assert "1024 / 1024" in md
