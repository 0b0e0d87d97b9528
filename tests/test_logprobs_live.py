"""Prompt log-probabilities from the real engines: vLLM's CPU build and llama-server, the embedded model.

The embedded model was trained on the first 300 standard-library .py files (sorted) and pydoc's topics
(bracket.embedded.build_model); a slice of one of those files is text it was trained on, a string of
random letters is text it never saw. Teacher-forced, the first must cost fewer nats per token than the
second, and the same text asked twice must cost the same. vLLM serves the safetensors weights and
llama-server the GGUF converted from them (tests/conftest.py's trained_gguf), so the two engines' NLL of
one text agree to the width of their arithmetic.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import httpx
import pandas as pd
import pytest
from bracket import engines
from bracket.engines import launch
from bracket.engines.logprobs import LogprobError, Route, llamacpp_nll, text_nll, vllm_nll
from bracket.experiment import config
from bracket.experiment.tasks import TaskItem, greedy_answers, score
from bracket.stats.quality import margin_from_perplexity_percent, nll_gate
from bracket.stats.results.quality import Verdict
from conftest import ROOT

pytestmark = [pytest.mark.engine, pytest.mark.integration]
VLLM_PORT = 8148
LLAMA_PORT = 8149


def trained_text() -> str:
    """About 1,500 characters of a standard-library file the embedded model trained on."""
    files = sorted(p for p in Path(os.__file__).parent.glob("*.py") if p.is_file())[:300]
    text = next(f.read_text(encoding="utf-8") for f in files if f.name == "bisect.py")
    return text[:1500]


def held_out_docs(count: int = 6, chars: int = 400) -> list[str]:
    """Slices of the standard library's email package: code the model never trained on (it trained on the
    top-level .py files alone, 168 of them in Python 3.11, all within its first 300)."""
    files = sorted(p for p in (Path(os.__file__).parent / "email").glob("*.py") if p.is_file())
    docs = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        if len(text) >= 3 * chars:
            docs.append(text[chars : 2 * chars])  # past the licence header
        if len(docs) == count:
            return docs
    raise AssertionError("fewer standard-library files than the test needs")


def random_text(seed: int = 7) -> str:
    r = random.Random(seed)
    words = ("".join(r.choice("qzxjkvwpyfgb") for _ in range(r.randint(2, 8))) for _ in range(150))
    return " ".join(words)[:1000]


def _server(cfg, kind: str, model: str, python: str, tmp_path, arm_name: str = "plain"):
    adapter = engines.get(kind)
    arm = cfg.arms[arm_name]
    argv = launch.server_argv(cfg, adapter, arm, model, python, name="unused")
    return launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=tmp_path / f"{kind}-{arm_name}.log",
        base_url=launch.base_url(cfg),
        secret_names=[],
    )


def _check_engine(kind: str, http, base: str) -> dict:
    seen, unseen = trained_text(), random_text()
    a = text_nll(kind, http, base, "bracket-model", seen)
    again = text_nll(kind, http, base, "bracket-model", seen)
    b = text_nll(kind, http, base, "bracket-model", unseen)
    assert a.tokens > 200 and b.tokens > 200
    assert a.token_ids == again.token_ids
    assert again.nll == pytest.approx(a.nll, rel=1e-6, abs=1e-6)  # the same text, the same answer
    # trained on against never seen: at least 1 nat per token apart (measured 4.59 against 6.49 on both engines)
    assert b.nll_per_token > a.nll_per_token + 1.0
    print(
        f"{kind}: trained {a.nll_per_token:.4f} nats/token over {a.tokens}, random {b.nll_per_token:.4f} over "
        f"{b.tokens}, repeat equal: {again.nll == a.nll}"
    )
    return {"seen": a, "unseen": b}


def test_vllm_prompt_logprobs_separate_trained_from_random_text(embedded_engine, tmp_path, monkeypatch, request):
    monkeypatch.chdir(ROOT)
    engine, model = embedded_engine
    cfg = config.validate(
        {
            "engine": {"kind": "vllm", "embedded": True, "port": VLLM_PORT, "startup_timeout_s": 600},
            "arms": {"plain": {}},
            "request": {"max_tokens": 8, "timeout_s": 120},
        }
    )
    base = launch.base_url(cfg)
    with _server(cfg, "vllm", str(model), str(engine / "bin" / "python"), tmp_path) as server:
        server.wait_ready(cfg.engine.startup_timeout_s)
        with httpx.Client(timeout=120) as http:
            got = _check_engine("vllm", http, base)
            assert got["seen"].route is Route.VLLM_PROMPT_LOGPROBS
            request.config.cache.set("bracket/logprobs/vllm_seen", got["seen"].nll_per_token)
            # the route is vLLM's: llama-server's /tokenize is not there
            with pytest.raises(LogprobError):
                llamacpp_nll(http, base, "def f(x):\n    return x\n")


def _llama_cfg(llama_server, arms: dict | None = None):
    return config.validate(
        {
            "engine": {
                "kind": "llamacpp",
                "embedded": False,
                "model": "unused",
                "port": LLAMA_PORT,
                "executable": llama_server["llama_server"],
                "startup_timeout_s": 120,
                "args": ["--ctx-size", "2048", "--threads", "2"],
            },
            "arms": arms or {"plain": {}},
            "request": {"max_tokens": 8, "timeout_s": 120},
        }
    )


def test_llamacpp_forced_tokens_separate_trained_from_random_text(llama_server, trained_gguf, tmp_path, request):
    cfg = _llama_cfg(llama_server)
    base = launch.base_url(cfg)
    with _server(cfg, "llamacpp", trained_gguf, "unused", tmp_path) as server:
        server.wait_ready(60)
        with httpx.Client(timeout=300) as http:
            got = _check_engine("llamacpp", http, base)
            assert got["seen"].route is Route.LLAMACPP_FORCED
            # What llama-server itself offers for a prompt: /v1/completions takes echo and logprobs but
            # answers the generated token's log-probability alone, never the prompt's.
            r = http.post(
                base + "/v1/completions",
                json={"prompt": "def f(x):", "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0},
            )
            if r.status_code == 200:
                assert len(r.json()["choices"][0]["logprobs"]["content"]) == 1
            # vLLM's field is not llama-server's: asked of it, no prompt log-probabilities come back
            with pytest.raises(LogprobError):
                vllm_nll(http, base, "bracket-model", "def f(x):\n    return x\n")
    vllm_seen = request.config.cache.get("bracket/logprobs/vllm_seen", None)
    if vllm_seen is not None:  # the same weights on two engines: bf16 safetensors and their GGUF
        print(f"vllm {vllm_seen:.4f} against llama.cpp {got['seen'].nll_per_token:.4f} nats/token")
        assert got["seen"].nll_per_token == pytest.approx(vllm_seen, rel=0.05)


def test_llamacpp_nll_gate_and_greedy_answers_across_a_lossless_speculation_arm(llama_server, trained_gguf, tmp_path):
    """Held-out NLL per token on the baseline and under ngram speculation (lossless: the same model scores the
    same tokens) must not differ; greedy answers at temperature 0 are the same on both, and scored alike."""
    arms = {"plain": {}, "ngram": {"speculative": {"method": "ngram", "engine_method": "ngram-mod", "draft_tokens": 8}}}
    cfg = _llama_cfg(llama_server, arms)
    base = launch.base_url(cfg)
    docs = held_out_docs()
    items = [TaskItem(str(i), d[:120], "return", i + 1) for i, d in enumerate(docs[:4])]
    rows, answers = [], {}
    for arm in arms:
        with _server(cfg, "llamacpp", trained_gguf, "unused", tmp_path, arm) as server:
            server.wait_ready(60)
            with httpx.Client(timeout=300) as http:
                for i, doc in enumerate(docs):
                    got = llamacpp_nll(http, base, doc)
                    rows.append((arm, i, got.nll, got.tokens))
                answers[arm] = greedy_answers("llamacpp", http, base, "bracket-model", items, 24)
    df = pd.DataFrame(rows, columns=["arm", "doc", "nll", "tokens"])
    gate = nll_gate(df, "plain", margin=margin_from_perplexity_percent(1), resamples=2000, rng=41)
    (c,) = gate.comparisons
    print(
        f"held-out NLL/token plain {gate.arms[0].nll_per_token:.5f}, ngram {gate.arms[1].nll_per_token:.5f}, "
        f"difference {c.difference:.2e} ({c.ci_low:.2e} to {c.ci_high:.2e}), {c.verdict}"
    )
    assert not c.differs and c.verdict is Verdict.HELD
    assert gate.arms[0].nll_per_token > 3.0  # held-out code costs more than what it trained on (4.59 measured)
    assert answers["plain"] == answers["ngram"]
    scored = {arm: [s.correct for s in score(items, out, "contains")] for arm, out in answers.items()}
    assert scored["plain"] == scored["ngram"]
