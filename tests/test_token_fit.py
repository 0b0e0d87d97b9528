"""Prompts counted in tokens before any block (issue 33): the model's own tokenizer, or an attached server's
/tokenize, against the context the arm is served with; the byte bound only where neither can count, and then
said. Expected counts are worked out by hand (a word-level tokenizer: one token per word) or by the
`tokenizers` library on the embedded model's own tokenizer.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest
from bracket.engines.reference_server import ReferenceServer
from bracket.experiment import config, preflight, prompts, tokencount
from bracket.typed.experiment import Workload
from test_attach import Replay, read

from tests.support import ROOT


def word_model(folder: Path, context: int = 4096) -> Path:
    """A real tokenizer.json (tokenizers' WordLevel over whitespace, [UNK] for any other word): one token per
    word or run of punctuation, so counts are hand-calculable; its longest entry is 16 bytes."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{chr(97 + i): i + 1 for i in range(26)}, "p" * 16: 27}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": context}))
    return folder


def experiment(tmp: Path, prompt_lines: list[dict], **extra) -> dict:
    path = tmp / "long.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompt_lines))
    return config.validate(
        {
            "arms": {"baseline": {}},
            "workloads": {"code": {"prompts": str(path)}},
            "request": {"max_tokens": 64},
            **extra,
        }
    )


def test_a_12_kb_prompt_under_the_byte_bound_but_over_the_context_in_tokens_is_refused_with_its_count(tmp_path):
    model = word_model(tmp_path / "model")
    text = " ".join("abcdef"[i % 6] for i in range(6000))  # 6,000 one-letter words: 11,999 bytes
    cfg = experiment(tmp_path, [{"id": "short", "prompt": "a b c"}, {"id": "long", "prompt": text}])
    # the byte bound alone lets it through: ceil((11,999 + 13) / 16) + 64 = 815 <= 2,048
    assert math.ceil((len(text) + prompts.PREFIX_BYTES) / 16) + 64 <= 2048
    with pytest.raises(prompts.PromptError) as err:
        prompts.check(cfg, tmp_path, model_dir=model, source="experiments/x.yaml")
    said = str(err.value)
    # 6,000 words + the unique prefix "# <10 hex>\n" (Whitespace splits it into "#" and the hex: 2 tokens)
    assert said.startswith("experiments/x.yaml: workloads.code: prompt 'long' of " + str(tmp_path / "long.jsonl"))
    assert "is 6,002 tokens with its unique prefix" in said
    assert f"counted by the model's tokenizer, {model / 'tokenizer.json'}" in said
    assert "with request.max_tokens 64 it needs 6,066, over the 2,048-token context of arm 'baseline'" in said
    # the embedded vLLM's own --max-model-len 2048, smaller than the model's 4,096
    assert "(the vllm command bracket launches for arm 'baseline')" in said
    assert "Shorten the prompt, lower request.max_tokens, or serve a longer context" in said
    assert "'short'" not in said
    # the same prompt fits an arm served with a longer context, named where it is set
    cfg = experiment(
        tmp_path, [{"id": "long", "prompt": text}], arms={"baseline": {"server": {"context_length": 8192}}}
    )
    assert prompts.check(cfg, tmp_path, model_dir=model) == []


def test_the_count_is_exact_at_the_edge_of_the_context(tmp_path):
    model = word_model(tmp_path / "model")
    # 2,048 - 64 max_tokens - 2 prefix tokens = 1,982 words fit exactly; one more does not
    cfg = experiment(tmp_path, [{"id": "edge", "prompt": " ".join(["a"] * 1982)}])
    assert prompts.check(cfg, tmp_path, model_dir=model) == []
    cfg = experiment(tmp_path, [{"id": "edge", "prompt": " ".join(["a"] * 1983)}])
    with pytest.raises(prompts.PromptError, match="is 1,985 tokens .* it needs 2,049, over the 2,048-token"):
        prompts.check(cfg, tmp_path, model_dir=model)


def test_where_no_tokenizer_can_count_the_byte_bound_stays_and_says_so(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 100}))
    (model / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a" * 16: 0}}}))
    cfg = experiment(tmp_path, [{"id": "p0", "prompt": "x" * 100}], request={"max_tokens": 8})
    notes = prompts.check(cfg, tmp_path, model_dir=model)
    assert len(notes) == 1 and "prompt tokens not counted before the first block" in notes[0]
    assert "could not be read by the tokenizers library" in notes[0] and "longest token is 16 bytes" in notes[0]
    # (100 - 8) tokens of 16 bytes at most: 1,472 bytes with the 13-byte prefix fit; one more does not
    cfg = experiment(tmp_path, [{"id": "p0", "prompt": "x" * (92 * 16 - 13 + 1)}], request={"max_tokens": 8})
    with pytest.raises(
        prompts.PromptError,
        match=r"at least 93 tokens \(the model's longest token is 16 bytes; its "
        r"tokens could not be counted: .*tokenizers library",
    ):
        prompts.check(cfg, tmp_path, model_dir=model)


def attached(url: str, tmp: Path, lines: list[dict], **request) -> dict:
    path = tmp / "long.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in lines))
    return config.validate(
        {
            "engine": {"kind": "auto", "launch": "attach", "embedded": False, "base_url": url},
            "arms": {"a": {}},
            "workloads": {"code": {"prompts": str(path)}},
            "request": {"max_tokens": 8, **request},
        }
    )


def test_an_attached_servers_own_tokenize_counts_the_prompts_against_the_context_it_reports(tmp_path):
    words = ("the quick brown fox " * 250).split()
    lines = [{"id": "fits", "prompt": " ".join(words[:200])}, {"id": "long", "prompt": " ".join(words[:995])}]
    with ReferenceServer(rate=20000, ttft=0.0, max_model_len=1000) as srv:
        cfg = attached(srv.url, tmp_path, lines)
        problems = preflight.attach_problems(cfg, tmp_path)
        # 995 words + 2 of the prefix = 997 tokens, + 8 = 1,005 > 1,000
        assert problems == [
            f"workloads.code: prompt 'long' of {tmp_path / 'long.jsonl'} is 997 tokens with its unique prefix "
            f"(counted by vLLM's own tokenizer, {srv.url}/tokenize); with request.max_tokens 8 it needs 1,005, over "
            f"the 1,000-token context of arm 'a' ({srv.url}/v1/models max_model_len). Shorten the prompt, lower "
            f"request.max_tokens, or serve a longer context (arms.a.server.context_length)."
        ]
        assert preflight.attach_problems(attached(srv.url, tmp_path, lines, max_tokens=3), tmp_path) == []
        # and the server agrees at the edge: the same text is refused with 8 tokens asked for, served with 3
        text = prompts.unique_prefix(cfg.design.seed, "code", 1, 0) + lines[1]["prompt"]
        body = {"model": "reference-model", "prompt": text, "stream": False, "ignore_eos": True}
        assert httpx.post(srv.url + "/v1/completions", json={**body, "max_tokens": 8}).status_code == 400
        ok = httpx.post(srv.url + "/v1/completions", json={**body, "max_tokens": 3})
        assert ok.status_code == 200 and ok.json()["usage"]["prompt_tokens"] == 997


def test_a_server_without_a_tokenize_route_leaves_the_byte_bound_and_the_reason(tmp_path):
    with ReferenceServer(rate=20000, ttft=0.0, generic=True) as srv, httpx.Client() as http:
        counter, why = tokencount.server(http, srv.url, "openai", "reference-model", "a generic server")
        assert counter is None and "has no tokenize route" in why
        counter, why = tokencount.server(http, srv.url, "vllm", "reference-model", "vLLM")  # a 404 there
        assert counter is None and why == f"{srv.url}/tokenize answered HTTP 404"
        cfg = attached(srv.url, tmp_path, [{"id": "p0", "prompt": "a b"}])
        notes = prompts.check(cfg, tmp_path, server_context=(1000, "its /v1/models"), why_not=why)
        assert notes == [
            f"workloads.code: prompt tokens not counted before the first block ({srv.url}/tokenize "
            f"answered HTTP 404; the model's files are not on this host); not checked against the context"
        ]


def test_the_context_of_llamacpp_is_read_from_props_and_untrusted_values_are_ignored():
    with Replay({"/props": read("llamacpp-0.3.36-props.json")}) as srv, httpx.Client() as http:
        assert tokencount.server_context(http, srv.url, "llamacpp") == (
            1024,
            f"{srv.url}/props n_ctx (one slot's context)",
        )
    lying = json.dumps(
        {
            "data": [
                {"id": "m", "max_model_len": "9999"},
                {"id": "n", "max_model_len": -1},
                {"id": "o", "max_model_len": True},
            ]
        }
    ).encode()
    with Replay({"/v1/models": lying}) as srv, httpx.Client() as http:
        assert tokencount.server_context(http, srv.url, "vllm", "m") is None


@pytest.mark.engine
def test_the_embedded_models_tokenizer_refuses_a_12_kb_prompt_the_byte_bound_passes(tmp_path, embedded_engine):
    """smoke.yaml on the embedded model: its tokenizer.json, the context of the command bracket launches."""
    from tokenizers import Tokenizer

    _, model = embedded_engine
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    cfg = config.load(ROOT / "experiments" / "smoke.yaml")
    # hex digits with punctuation: what a byte-level BPE trained on Python source splits into short tokens
    text = "".join(f"{i * 2654435761 % 16**6:06x}{'.,;:!?'[i % 6]}" for i in range(1750))  # 12,250 bytes
    path = tmp_path / "hex.jsonl"
    path.write_text(json.dumps({"id": "hex", "prompt": text}) + "\n")
    cfg = cfg.model_copy(update={"workloads": {"code": Workload(prompts=str(path))}})
    longest = prompts.longest_token_bytes(model)
    assert math.ceil((len(text) + prompts.PREFIX_BYTES) / longest) + 64 <= 2048  # under the byte bound
    prefix = max(len(tok.encode(prompts.unique_prefix(1, "code", r), add_special_tokens=False).ids) for r in range(4))
    expected = len(tok.encode(text).ids) + prefix
    assert expected + 64 > 2048
    with pytest.raises(prompts.PromptError) as err:
        prompts.check(cfg, ROOT, model_dir=model)
    said = str(err.value)
    assert f"prompt 'hex' of {path} is {expected:,} tokens with its unique prefix" in said
    assert "over the 2,048-token context of arm 'baseline' (the vllm command bracket launches" in said


@pytest.mark.engine
def test_prefix_and_prompt_add_up_to_what_the_embedded_tokenizer_counts_for_them_together(embedded_engine):
    """The check counts prefix and prompt apart (bracket.experiment.prompts._prefix_tokens): on the embedded model's
    tokenizer the sum is the count of the text the runner sends, for every shipped prompt and many prefixes."""
    from tokenizers import Tokenizer

    _, model = embedded_engine
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    texts = [p["prompt"] for f in sorted((ROOT / "experiments" / "prompts").glob("*.jsonl")) for p in prompts.load(f)]
    assert len(texts) >= 10
    for seed in range(3):
        for run, text in enumerate(texts):
            prefix = prompts.unique_prefix(seed, "code", run)
            together = len(tok.encode(prefix + text).ids)
            assert together == len(tok.encode(prefix, add_special_tokens=False).ids) + len(tok.encode(text).ids)
