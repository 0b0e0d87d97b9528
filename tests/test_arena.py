"""The Spark Arena / llama-benchy cell: both definitions worked by hand, the text, the calibration,
validation per engine, and each adapter's own stream on replayed bodies (tests/data/engines)."""

import math

import pytest
from bracket import article, engines
from bracket.arena import benchy as arena_benchy
from bracket.arena import readings as arena_stats
from bracket.arena import run as arena
from bracket.arena import text as arena_text
from bracket.experiment import arena_workload, config
from bracket.experiment.config import ExperimentError
from bracket.typed.experiment import Workload
from test_engines import Recorded, body


def user(started, ttft, n, tg, **kw):
    return {"started_at": started, "ttft_s": ttft, "completion_tokens": n, "tg_tok_s": tg, "error": None, **kw}


def test_window_rate_by_hand():
    # user 1: first token at 100.5, 127 more tokens at 100 tok/s -> last at 101.77
    # user 2: first token at 100.8, 127 more at 127 tok/s -> last at 101.8
    # window 101.8 - 100.5 = 1.3 s, decode tokens 127 + 127 = 254 -> 195.38 tok/s
    w = arena_stats.window_rate([user(100.0, 0.5, 128, 100.0), user(100.0, 0.8, 128, 127.0)])
    assert w["window_s"] == pytest.approx(1.3)
    assert w["decode_tokens"] == 254
    assert w["window_tok_s"] == pytest.approx(254 / 1.3)


def test_window_rate_is_unknown_when_a_user_failed():
    w = arena_stats.window_rate([user(100.0, 0.5, 128, 100.0), user(100.0, None, None, None, error="HTTP 500")])
    assert w["window_tok_s"] is None


def test_metric_is_mean_and_population_sd():
    m = arena_benchy.metric([100.0, 110.0, 120.0])
    assert m["mean"] == 110.0 and m["std"] == pytest.approx(math.sqrt(200 / 3)) and m["values"] == [100, 110, 120]
    assert arena_benchy.metric([]) is None


def test_the_text_is_deterministic_and_not_repeated():
    a, b = arena_text.built_text(20_000, 7), arena_text.built_text(20_000, 7)
    assert a == b and arena_text.built_text(20_000, 8) != a
    grams = [a[i : i + 8] for i in range(len(a) - 8)]
    assert len(set(grams)) == len(grams)  # no 8-word run occurs twice: nothing for n-gram drafting to copy
    words = arena_text.built_text()
    c1, p1 = arena_text.request_texts(words, 300, 50, 1, "arena", 0, 3, 0, False)
    c2, p2 = arena_text.request_texts(words, 300, 50, 1, "arena", 0, 3, 1, False)
    assert (c1, p1) == arena_text.request_texts(words, 300, 50, 1, "arena", 0, 3, 0, False)
    assert c1 != c2 and len(c1.split()) == 300 and len(p1.split()) == 50
    c4, _ = arena_text.request_texts(words, 300, 50, 1, "arena", 1, 3, 0, False)
    assert c4 != c1  # another block, another slice
    _, p3 = arena_text.request_texts(words, 300, 50, 1, "arena", 0, 3, 0, True)
    assert p3.startswith(p1) and len(p3.split()) == 51  # --no-cache: a unique suffix


def test_slices_are_cut_to_token_counts_when_the_server_can_tokenize():
    words = arena_text.built_text()
    tokens = lambda text: sum(1 + len(w) // 5 for w in text.split())  # noqa: E731 (longer words, more tokens)
    for start in (0, 777, len(words) - 100):  # the last wraps round the end of the text
        w = arena_text.fit(words, start, 300, 200, tokens)
        n = tokens(arena_text.join(arena_text.slice_words(words, w, start)))
        n_next = tokens(arena_text.join(arena_text.slice_words(words, w + 1, start)))
        assert n <= 300 < n_next  # the longest slice not above the target
    c, p = arena_text.request_texts(words, 250, 40, 1, "arena", 0, 0, 0, False, tokens, 300, 50)
    assert 300 - 2 <= tokens(c) <= 300 and 50 - 2 <= tokens(p) <= 50


def test_calibration_hits_depth_plus_prompt_as_the_server_counts():
    words = arena_text.built_text()

    def count(context, prompt):  # 1.3 tokens per word, 9 template tokens, 4 more for a system turn
        return math.ceil(1.3 * len(prompt.split())) + 9 + (math.ceil(1.3 * len(context.split())) + 4 if context else 0)

    ctx, pp = arena.calibrate(count, words, 4096, 512)
    prompt = arena_text.join(words[:pp])
    assert abs(count("", prompt) - 9 - 512) <= 3
    assert abs(count(arena_text.join(words[:ctx]), prompt) - (4096 + 512)) <= 23
    assert arena.calibrate(count, words, 0, 256)[0] == 0


def test_sizes_are_llama_benchys_context_depth_minus_the_templates_tokens():
    def tokens(text):  # 1.3 tokens per word
        return math.ceil(1.3 * len(text.split()))

    def count(context, prompt):  # 9 template tokens around the prompt, 4 more for a system turn
        return tokens(prompt) + 9 + (tokens(context) + 4 if context else 0)

    # delta_context = count(W, ".") - tokens(W) - tokens(".") = (2 + 9 + 13 + 4) - 13 - 2 = 13, W being 10 words
    assert arena.benchy_sizes(count, tokens, 512, 128) == (512 - 13, 128)
    # delta_user = count("", W) - tokens(W) = 13 + 9 - 13 = 9
    assert arena.benchy_sizes(count, tokens, 0, 128) == (0, 128 - 9)
    # a context load is then depth + "." as the server counts: 499 + 2 + 9 + 4 = 514 = 512 + tokens(".")
    ctx, _ = arena.benchy_sizes(count, tokens, 512, 128)
    assert ctx + tokens(".") + 9 + 4 == 512 + tokens(".")


def test_spec_defaults_are_the_leaderboard_cell():
    assert arena_workload.spec(Workload(prompts="p", kind="arena")) == {
        "depth": 16384,
        "users": 2,
        "tokens": 128,
        "prompt_tokens": 2048,
        "api": "chat",
        "cache": "fresh",
        "text": None,
        "tg_exact": True,
        "latency": "none",
        "coherence": True,
    }
    assert arena_workload.spec(Workload(prompts="p", kind="arena", depth=0))["depth"] == 0
    assert arena_workload.is_arena(Workload(prompts="p", kind="arena"))
    assert not arena_workload.is_arena(Workload(prompts="p")) and not arena_workload.is_arena(None)


def arena_cfg(kind, **wl):
    return {
        "engine": {"kind": kind, "embedded": False, "model": "/models/m", "port": 8051},
        "arms": {"a": {}},
        "workloads": {"cell": {"prompts": "p.jsonl", "kind": "arena", **wl}},
    }


def test_validation_refuses_a_chat_cell_on_sglang_and_says_what_to_do():
    with pytest.raises(ExperimentError, match="api: completions"):
        config.validate(arena_cfg("sglang"), source="t")
    config.validate(arena_cfg("sglang", api="completions"), source="t")
    for kind in ("vllm", "llamacpp", "ollama"):
        config.validate(arena_cfg(kind), source="t")
    with pytest.raises(ExperimentError, match="not a file"):
        config.validate(arena_cfg("vllm", text="/no/such/book.txt"), source="t")


def _exp(**arm):
    """A validated experiment of one arm `a` (these keys), its request test_engines.REQ's with max_tokens 8."""
    return config.validate(
        {"arms": {"a": arm}, "request": {"max_tokens": 8, "temperature": 0.0, "seed": 1234, "timeout_s": 10.0}}
    )


REQ_ARENA = _exp().request
ARM = _exp().arms["a"]  # an arm of no speculation and no server settings


def test_ollama_chat_cell_goes_through_api_chat_ndjson():
    rec = Recorded({"POST /api/chat": (200, body("ollama-chat-stream.ndjson"))})
    m, extra = arena_text.send(
        engines.get("ollama"),
        rec.http,
        "http://o",
        "qwen3:0.6b",
        "CONTEXT",
        "PROMPT",
        REQ_ARENA,
        1234,
        ARM,
        "chat",
        False,
    )
    assert m.error is None and m.completion_tokens == 8 and m.prompt_tokens == 300
    assert m.output_text == " The fog lay over the street all night" and m.finish_reason == "length"
    sent = rec.sent("/api/chat")
    assert sent["messages"] == [{"role": "system", "content": "CONTEXT"}, {"role": "user", "content": "PROMPT"}]
    assert "prompt" not in sent and "raw" not in sent and sent["options"]["num_predict"] == 8
    assert extra["ttfr_s"] == pytest.approx(m.ttft_s, abs=1e-3)


def test_vllm_chat_cell_reads_role_chunk_and_token_ids():
    rec = Recorded({"POST /v1/chat/completions": (200, body("vllm-0.32-chat-completions.sse"))})
    m, extra = arena_text.send(
        engines.get("vllm"), rec.http, "http://v", "bracket-model", "CTX", "P", REQ_ARENA, 1234, ARM, "chat", True
    )
    assert m.error is None and m.completion_tokens == 8 and m.prompt_tokens == 300 and m.cached_tokens == 0
    assert m.output_text == " The fog lay over the street all night" and m.stream_events == 3
    assert extra["first_event_tokens"] == 2  # llama-benchy's decode tokens: 8 - 2
    assert extra["ttfr_s"] <= m.ttft_s  # the role chunk came first
    sent = rec.sent("/v1/chat/completions")
    assert sent["return_token_ids"] is True and sent["min_tokens"] == 8 and sent["ignore_eos"] is True
    assert sent["cache_prompt"] is False and sent["stream_options"] == {"include_usage": True}


def test_sglang_completions_cell_goes_through_generate():
    rec = Recorded({"POST /generate": (200, body("sglang-0.5.23-generate-nospec.sse"))})
    m, extra = arena_text.send(
        engines.get("sglang"),
        rec.http,
        "http://s",
        "bracket-model",
        "CTX",
        "PROMPT",
        REQ_ARENA,
        1234,
        ARM,
        "completions",
        False,
    )
    assert m.error is None and m.completion_tokens == 8 and m.prompt_tokens == 12
    assert rec.sent("/generate")["text"] == "CTX\n\nPROMPT"
    assert extra == {"ttfr_s": m.ttft_s, "first_event_tokens": None, "text_chunks": None}


def test_ollama_completions_cell_goes_through_generate_ndjson():
    rec = Recorded({"POST /api/generate": (200, body("ollama-generate-stream.ndjson"))})
    m, _ = arena_text.send(
        engines.get("ollama"),
        rec.http,
        "http://o",
        "qwen3:0.6b",
        "CTX",
        "PROMPT",
        REQ_ARENA,
        1234,
        ARM,
        "completions",
        False,
    )
    assert m.error is None and m.completion_tokens == 8 and rec.sent("/api/generate")["raw"] is True


def test_summary_and_section_show_both_definitions():
    cfg = config.validate(
        {
            "workloads": {"arena": {"kind": "arena", "depth": 1024, "prompt_tokens": 128, "prompts": "p"}},
            "arms": {"b": {}},
            "analysis": {"confidence": 0.95, "bootstrap_resamples": 200, "seed": 1, "spread_warning": 0.15},
        }
    )
    raw = []
    for run, tg in enumerate([100.0, 110.0, 120.0]):
        for ttft in (0.5, 0.6):
            raw.append(
                user(
                    10.0 * run,
                    ttft,
                    128,
                    tg,
                    arm="b",
                    workload="arena",
                    block=0,
                    run=run,
                    warmup=False,
                    cached_tokens=0,
                    finish_reason="length",
                    max_tokens=128,
                    wall_s=2.0,
                    prompt_tokens=1152,
                )
            )
    s = arena_stats.summarize(raw, cfg)
    (c,) = s["cells"]
    assert c["depth_measured"] == 1152 and len(c["runs"]) == 3 and all(r["valid"] for r in c["runs"])
    # run 0: window from 0.5 to 0.6 + 1.27 = 1.37 s for 254 tokens (both definitions: one token per first event)
    assert c["runs"][0]["window_tok_s"] == pytest.approx(254 / 1.37)
    lb = c["llama_benchy"]
    assert lb["prompt_size"] == 128 and lb["context_size"] == 1024 and lb["concurrency"] == 2
    assert lb["tg_throughput"]["values"] == pytest.approx([r["window_tok_s"] for r in c["runs"]])
    assert lb["tg_throughput"]["std"] == pytest.approx(float(__import__("numpy").std(lb["tg_throughput"]["values"])))
    md = article.section_arena(None, article.Controls([], None, None, s))._repr_markdown_()
    assert "± " in md and "first token" in md and "1024 + 128" in md


@pytest.mark.parametrize(
    "kind,name,prompt_tokens,first",
    [
        ("vllm", "vllm-0.32-cpu-chat-completions.sse", 117, 1),
        ("llamacpp", "llamacpp-0.3.36-chat-completions.sse", 159, None),
    ],
)
def test_captured_chat_streams_of_real_servers(kind, name, prompt_tokens, first):
    # Captured from the embedded vLLM CPU engine and the cached llama-server build with the body
    # arena_text.chat_body sends (tests/data/engines/README.md): the role chunk comes first.
    rec = Recorded({"POST /v1/chat/completions": (200, body(name))})
    m, extra = arena_text.send(
        engines.get(kind), rec.http, "http://x", "bracket-model", "CTX", "P", REQ_ARENA, 1234, ARM, "chat", False
    )
    assert m.error is None and m.completion_tokens == 8 and m.finish_reason == "length" and m.cached_tokens == 0
    assert m.stream_events == 8 and extra["first_event_tokens"] == first and extra["ttfr_s"] <= m.ttft_s
    if prompt_tokens:
        assert m.prompt_tokens == prompt_tokens


def test_vllm_chat_cell_keeps_each_text_event_with_its_token_ids():
    rec = Recorded({"POST /v1/chat/completions": (200, body("vllm-0.32-chat-completions.sse"))})
    m, extra = arena_text.send(
        engines.get("vllm"), rec.http, "http://v", "bracket-model", "CTX", "P", REQ_ARENA, 1234, ARM, "chat", False
    )
    chunks = extra["text_chunks"]
    assert len(chunks) == m.stream_events == 3 and sum(k for _, k in chunks) == m.completion_tokens == 8
    assert chunks[0][0] == pytest.approx(m.ttft_s) and [t for t, _ in chunks] == sorted(t for t, _ in chunks)


def test_arena_mode_body_leaves_the_length_free_and_llamacpp_keeps_its_cache():
    _, b, _ = arena_text.chat_body(engines.get("vllm"), "m", "CTX", "P", REQ_ARENA, 1, ARM, False, exact_tg=False)
    assert "min_tokens" not in b and "ignore_eos" not in b  # llama-benchy without --exact-tg
    on = _exp(server={"prefix_caching": True}).arms["a"]  # the server bracket launches for a prefix cell
    _, b, _ = arena_text.chat_body(engines.get("llamacpp"), "m", "CTX", "P", REQ_ARENA, 1, on, False, prefix=True)
    assert b["cache_prompt"] is True and b["min_tokens"] == 8
    # an arm whose cache is off (an attached server): no field, as llama-benchy sends; the server's default
    _, b, _ = arena_text.chat_body(engines.get("llamacpp"), "m", "CTX", "P", REQ_ARENA, 1, ARM, False, prefix=True)
    assert "cache_prompt" not in b
    _, b, _ = arena_text.chat_body(engines.get("llamacpp"), "m", "CTX", "P", REQ_ARENA, 1, ARM, False)
    assert b["cache_prompt"] is False


def test_arena_json_is_written_when_a_cell_carries_findings(tmp_path):
    """A cell whose runs spread past analysis.spread_warning carries a finding; arena.json keeps it as stats.json
    keeps findings (a record: kind, payload), where json.dumps once stopped at the Finding object."""
    cfg = config.validate(
        {
            "workloads": {"arena": {"kind": "arena", "depth": 0, "prompt_tokens": 128, "prompts": "p"}},
            "arms": {"b": {}},
            "analysis": {"bootstrap_resamples": 200, "seed": 1, "spread_warning": 0.15},
        }
    )
    raw = [
        user(
            10.0 * run,
            0.5,
            128,
            tg,
            arm="b",
            workload="arena",
            block=0,
            run=run,
            warmup=False,
            cached_tokens=0,
            finish_reason="length",
            max_tokens=128,
            wall_s=2.0,
            prompt_tokens=128,
        )
        for run, tg in enumerate([60.0, 100.0, 140.0])  # spread (max - min) / median 0.8, past 0.15
        for _ in range(2)
    ]
    s = arena_stats.summarize(raw, cfg)
    warnings = s["cells"][0]["summary"]["warnings"]
    assert warnings and all(isinstance(w, dict) and w["kind"] for w in warnings)
    arena_stats.write_json(s, tmp_path / "arena.json")
    back = __import__("json").loads((tmp_path / "arena.json").read_text())
    assert back["cells"][0]["summary"]["warnings"] == warnings
