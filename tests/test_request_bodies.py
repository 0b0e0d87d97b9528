"""What bracket asks each engine for: greedy, deterministic, and no costlier than a plain client's request.

A plain OpenAI client's greedy request is model, prompt, max_tokens, temperature 0 and stream. Every
field bracket adds is pinned here with the reason it is there (the code says the same beside the
field; the costs measured are in bench/results/request_cost.md). A field that changes here changes
what the server does for every request of every experiment: bench/request_cost.py measures it.
"""

from __future__ import annotations

import pytest
from bracket import engines
from bracket.engines.base import greedy, neutral_sampling
from bracket.experiment import config

EXPERIMENT = config.validate(
    {
        "engine": {"kind": "vllm", "embedded": False, "model": "/models/m"},
        "arms": {
            "plain": {},
            "prefix-caching": {"server": {"prefix_caching": True}},
            "ngram": {"speculative": {"method": "ngram", "draft_tokens": 4}},
            "draft-context": {
                "speculative": {"method": "draft_model", "draft_tokens": 4, "model": "/models/draft"},
                "server": {"context_length": 4096},
            },
        },
        "request": {"max_tokens": 64, "temperature": 0, "seed": 1234, "timeout_s": 10.0},
    }
)
GREEDY = EXPERIMENT.request
SAMPLED = GREEDY.model_copy(update={"temperature": 0.7})
ARMS = list(EXPERIMENT.arms.values())
PLAIN_ARM = EXPERIMENT.arms["plain"]

# Beyond the plain body, at temperature 0, and why (the adapters' request_body says the same).
EXTRA = {
    "llamacpp": {
        "repeat_penalty": 1.0,  # a GGUF's general.sampling.penalty_repeat would change the tokens
        "ignore_eos": True,  # the output length is part of the workload
        "cache_prompt": False,  # the slot's KV would be reused across prompts (the cache guard)
        "stream_options": {"include_usage": True},  # usage and timings on the final chunk
    },
    "vllm": {
        "repetition_penalty": 1.0,  # a generation_config's penalty under --generation-config auto
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    },
    "openai": {
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    },
}


def plain() -> dict:
    return {"model": "bracket-model", "prompt": "def add", "max_tokens": 64, "temperature": 0, "stream": True}


def extra(body: dict, base: dict) -> dict:
    return {k: v for k, v in body.items() if k not in base or base[k] != v}


@pytest.mark.parametrize("kind", sorted(EXTRA))
def test_each_openai_style_body_is_the_plain_one_plus_fields_with_reasons(kind):
    body = engines.get(kind).request_body("bracket-model", "def add", GREEDY, seed=1234, arm=PLAIN_ARM)
    assert {k: body[k] for k in plain()} == plain()
    assert extra(body, plain()) == EXTRA[kind]


def test_sglang_greedy_parameters_leave_top_k_to_sglang_and_send_no_seed():
    body = engines.get("sglang").request_body("m", "def add", GREEDY, seed=1234, arm=PLAIN_ARM)
    # SamplingParams turns temperature 0 into top_k 1 (its argmax path); old releases reject sampling_seed.
    assert body == {
        "text": "def add",
        "stream": True,
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "repetition_penalty": 1.0, "temperature": 0.0},
    }


def test_ollama_greedy_options_leave_top_k_to_the_default_and_switch_the_penalty_off():
    body = engines.get("ollama").request_body("qwen3:0.6b", "def add", GREEDY, seed=1234, arm=PLAIN_ARM)
    # Ollama passes every option on to its llama-server; its own default top_k is 40, and a Modelfile's
    # PARAMETER lines (repeat_penalty among them) apply where the request is silent.
    assert body["options"] == {"num_predict": 64, "temperature": 0.0, "repeat_penalty": 1.0}


@pytest.mark.parametrize("arm", ARMS, ids=["plain", "prefix-caching", "ngram", "draft-context"])
@pytest.mark.parametrize("request_", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_llamacpp_and_ollama_are_never_sent_a_top_k_that_walks_the_vocabulary_when_greedy(arm, request_):
    for kind in ("llamacpp", "ollama"):
        body = engines.get(kind).request_body("m", "p", request_, seed=1, arm=arm)
        top_k = (body.get("options") or body).get("top_k")
        if greedy(request_):
            assert top_k is None, kind  # the server's default chain, as a plain client gets it
        else:
            assert top_k == 0, kind  # sampling over the whole vocabulary: the distribution every engine draws alike


@pytest.mark.parametrize("kind", ["llamacpp", "vllm", "sglang", "ollama", "openai"])
def test_a_greedy_body_does_not_depend_on_the_seed_and_carries_no_sampler_that_cannot_change_a_token(kind):
    adapter = engines.get(kind)
    a = adapter.request_body("m", "p", GREEDY, seed=1, arm=PLAIN_ARM)
    b = adapter.request_body("m", "p", GREEDY, seed=2, arm=PLAIN_ARM)
    assert a == b
    flat = {**a, **a.get("options", {}), **a.get("sampling_params", {})}
    assert not {"seed", "sampling_seed", "top_p", "min_p"} & set(flat)


@pytest.mark.parametrize(
    "kind,top_k_off,seed_key",
    [
        ("llamacpp", 0, "seed"),
        ("vllm", -1, "seed"),
        ("sglang", -1, "sampling_seed"),
        ("ollama", 0, "seed"),
        ("openai", None, "seed"),
    ],
)
def test_sampled_bodies_draw_from_the_whole_distribution_alike_and_are_seeded(kind, top_k_off, seed_key):
    body = engines.get(kind).request_body("m", "p", SAMPLED, seed=99, arm=PLAIN_ARM)
    flat = {**body, **body.get("options", {}), **body.get("sampling_params", {})}
    assert (flat["temperature"], flat["top_p"], flat["min_p"], flat[seed_key]) == (0.7, 1.0, 0.0, 99)
    assert flat.get("top_k") == top_k_off  # each engine's own spelling of "no top-k"; unknown engine: not sent


def test_neutral_sampling_by_hand():
    assert neutral_sampling(GREEDY) == {"temperature": 0.0}
    assert neutral_sampling(GREEDY, top_k_all=0) == {"temperature": 0.0}
    assert neutral_sampling(SAMPLED, top_k_all=-1) == {"temperature": 0.7, "top_p": 1.0, "min_p": 0.0, "top_k": -1}
    assert neutral_sampling(SAMPLED) == {"temperature": 0.7, "top_p": 1.0, "min_p": 0.0}
