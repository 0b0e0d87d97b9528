"""An attached server, asked in seconds before the first block whether a block could measure it.

bracket starts no server under engine.launch: attach, so what the server was started with decides
whether a block's records can be valid. Before any block (bracket.experiment.preflight, run when the workflow
loads the experiment and by `bracket check`) this module:

1. connects: nothing listening, a handshake that never completes, a TLS certificate this host does not
   trust fail here, in seconds and by their cause (bracket.engines.identify.unreachable), not after a
   readiness wait;
2. identifies the engine (bracket.engines.identify) and refuses an engine.kind that contradicts it;
3. lists /v1/models and refuses an engine.served_model the server does not serve;
4. sends one short streamed request, as a block would, with a prefix no block uses: it must
   stream, report usage, and return exactly the tokens asked for (ignore_eos honoured). A server
   still streaming when PROBE_TIMEOUT_S runs out is slow, not broken (a llama-server on a loaded
   machine was refused here while healthy): the console says so and the request is sent again with
   request.timeout_s, the limit a block's requests have; a server that sent nothing is refused;
5. sends the same prompt again, to learn what the cache guard can see: cached tokens in the
   response, the engine's prefix-cache counters, or nothing (then the runs rest on their unique
   prefixes, which request.cache_guard: strict refuses);
6. for a chat workload (an arena cell's `api: chat`), sends one chat request: the server must
   have a chat template.

Each problem names the engine, the cause and the fix (a flag to start the server with, a key to set).
"""

from __future__ import annotations

import os
import secrets as _random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bracket import engines
from bracket.engines import identify
from bracket.engines.base import listed_models
from bracket.engines.launch import base_url
from bracket.experiment import arena_workload, prompts
from bracket.typed.experiment import Experiment

# The probe asks for few tokens: enough that a server ignoring ignore_eos is likely to stop early on a
# short prompt, few enough that the whole probe stays within seconds on a slow server.
PROBE_TOKENS = 16
PROBE_TIMEOUT_S = 8.0
PROBE_PROMPT = "The quick brown fox jumps over the lazy dog. Then"
# Long enough (some hundreds of tokens) to fill whole KV-cache blocks (128 tokens on vLLM's CPU build,
# 16 on GPUs), so the identical repeat can show a hit; short enough to stay well inside any context.
PROBE_CHARS = 1500

FLAGS = {  # how each engine is started so that its responses carry cached tokens
    "vllm": "start vLLM with --enable-prompt-tokens-details",
    "sglang": "start SGLang with --enable-cache-report",
    "llamacpp": "use a llama-server build whose responses carry timings",
    "ollama": "Ollama reports no cached tokens at all",
    "openai": "this server reports no cached tokens",
}


@dataclass
class Report:
    """What the probe found; `problems` empty means a block can measure this server."""

    base: str
    identity: identify.Identity | None = None
    models: list[str] = field(default_factory=list)
    model: str | None = None
    cache_check: str | None = None  # reported, metrics, or None (the server says nothing)
    cache_repeat: int | None = None  # cached tokens the identical second request showed
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    slow: str | None = None  # said when the server streamed too slowly for the first limit and was waited for

    def record(self) -> dict:
        return {
            "base_url": self.base,
            "engine": self.identity.record() if self.identity else None,
            "models": self.models,
            "model": self.model,
            "cache_check": self.cache_check,
            "cache_repeat": self.cache_repeat,
            "seconds": round(self.seconds, 2),
            "slow": self.slow,
        }


def _headers(exp: Experiment) -> tuple[dict, str | None]:
    name = exp.engine.api_key_env
    if not name:
        return {}, None
    key = os.environ.get(name)
    if not key:
        return {}, (
            f"engine.api_key_env names {name!r}, but it is not set (or empty) in this environment; "
            f"export it before running."
        )
    return {"Authorization": f"Bearer {key}"}, None


def _first_prompt(exp: Experiment, root) -> str:
    for wl in exp.workloads.values():
        if arena_workload.is_arena(wl):
            continue
        try:
            texts = prompts.load(Path(root) / wl.prompts)
        except (prompts.PromptError, OSError):
            continue
        if texts:
            text = "\n".join(t["prompt"] for t in texts)
            return (text * (1 + PROBE_CHARS // max(len(text), 1)))[:PROBE_CHARS]
    return (PROBE_PROMPT + " ") * (1 + PROBE_CHARS // len(PROBE_PROMPT))


def _chat_workloads(exp: Experiment) -> list[str]:
    return [n for n, wl in exp.workloads.items() if arena_workload.is_arena(wl) and (wl.api or "chat") == "chat"]


def run(exp: Experiment, root=".", timeout_s: float = PROBE_TIMEOUT_S) -> Report:
    """Probe the server at engine.base_url as a block would use it (see the module's docstring)."""
    t0 = time.monotonic()
    base = base_url(exp)
    rep = Report(base)
    headers, problem = _headers(exp)
    if problem:
        rep.problems.append(problem)
        return rep
    with httpx.Client(headers=headers, timeout=timeout_s) as http:
        _probe(exp, root, http, rep, timeout_s)
    rep.seconds = time.monotonic() - t0
    return rep


def _probe(exp: Experiment, root, http: httpx.Client, rep: Report, timeout_s: float) -> None:
    eng, base = exp.engine, rep.base
    try:
        found = identify.identify(http, base)
    except identify.Unreachable as exc:
        if exc.cause == "refused":
            rep.problems.append(
                f"nothing answers at {base} ({exc}); engine.launch is attach, so bracket starts no "
                f"server: start it there, or set engine.base_url to where it listens."
            )
        else:  # something is there, or may be: the cause says what stands between, and the fix
            rep.problems.append(f"engine.base_url is {base}, and {exc}.")
        return
    rep.identity = found
    clash = identify.contradiction(eng.kind, found, base)
    if clash:
        rep.problems.append(clash)
        return
    name = found.name
    adapter = engines.for_server(eng.kind, found)
    rep.models = listed_models(http, base)
    wanted = eng.served_model
    if wanted and rep.models and wanted not in rep.models:
        rep.problems.append(
            f"{name} at {base} serves {', '.join(repr(m) for m in rep.models[:8])}, not "
            f"engine.served_model {wanted!r}; set engine.served_model to "
            f"{'it' if len(rep.models) == 1 else 'one of them'} (or leave it empty to use the "
            f"first listed)."
        )
        return
    rep.model = adapter.request_model(exp, http, base)
    arm = next(iter(exp.arms.values()))
    req = exp.request.model_copy(
        update={"max_tokens": min(exp.request.max_tokens, PROBE_TOKENS), "timeout_s": timeout_s}
    )
    text = f"# bracket preflight {_random.token_hex(5)}\n" + _first_prompt(exp, root)
    try:
        first = adapter.measure(http, base, rep.model, text, req, req.seed, arm)
        if still_streaming(first.measurement.error) and exp.request.timeout_s > timeout_s:
            # slow but alive: wait as a block would (request.timeout_s), and say so
            rep.slow = slow_note(name, base, first.measurement.stream_events, req.max_tokens, timeout_s, exp)
            print(rep.slow, file=sys.stderr, flush=True)
            req = req.model_copy(update={"timeout_s": exp.request.timeout_s})
            timeout_s = exp.request.timeout_s
            first = adapter.measure(http, base, rep.model, text, req, req.seed, arm)
    except httpx.HTTPError as exc:
        rep.problems.append(
            f"{name} at {base} did not answer the probe request ({type(exc).__name__}: {exc}); "
            f"check that it serves {adapter.request_path}."
        )
        return
    m = first.measurement
    if m.error:
        rep.problems.append(_error_problem(name, base, adapter.request_path, m.error, rep.model, rep.models))
        return
    if not m.stream_events:
        rep.problems.append(
            f"{name} at {base} sent no stream events for a streamed request; bracket times "
            f"tokens as they stream: use a server that streams {adapter.request_path}."
        )
    if m.completion_tokens is None:
        rep.problems.append(
            f"{name} at {base} reported no token usage; every run would be invalid. Start it so "
            f"that a stream ends with usage (stream_options.include_usage)."
        )
    elif m.completion_tokens != req.max_tokens or m.finish_reason != "length":
        rep.problems.append(
            f"{name} at {base} returned {m.completion_tokens} of the {req.max_tokens} tokens asked for "
            f"(finish_reason {m.finish_reason!r}): it does not honour ignore_eos (or an equivalent), so runs "
            f"would stop early and be invalid (early stop). Use an engine that pins the output length (vLLM, "
            f"SGLang and llama.cpp honour ignore_eos), or set engine.kind to the engine's own adapter."
        )
    rep.cache_check = first.cache_check
    if m.cached_tokens:
        rep.problems.append(
            f"{name} at {base} reported {m.cached_tokens} cached tokens for a prompt it had never "
            f"seen (a unique prefix); its cache accounting cannot be trusted by the cache guard."
        )
    again = adapter.measure(http, base, rep.model, text, req, req.seed, arm)
    rep.cache_repeat = again.measurement.cached_tokens
    if rep.cache_check is None and again.measurement.cached_tokens:  # a server that reports hits only
        rep.cache_check = "reported on a hit"
    guard = exp.request.cache_guard
    if rep.cache_check is None:
        if guard == "strict":
            rep.problems.append(
                f"request.cache_guard is strict, but {name} at {base} reports no cached tokens, so every run would "
                f"be invalid (cached_tokens unknown); {FLAGS.get(found.kind, FLAGS['openai'])}, or set "
                f"request.cache_guard: auto to rest on unique prefixes."
            )
        elif not exp.request.unique_prefix:
            rep.problems.append(
                f"{name} at {base} reports no cached tokens and request.unique_prefix is false, so nothing would "
                f"show that the prefix cache did not serve a run; set request.unique_prefix: true."
            )
    for wl in _chat_workloads(exp):
        problem = _chat_problem(http, base, rep.model, name, wl, timeout_s)
        if problem:
            rep.problems.append(problem)
            break


def still_streaming(error: str | None) -> bool:
    """True for a request cut by its time limit while the server was still sending (bracket.wire.client)."""
    return bool(error) and error.startswith("timed out") and "still streaming" in error


def slow_note(name: str, base: str, events: int, tokens: int, waited_s: float, exp: Experiment) -> str:
    """What the console says when the probe waits longer for a slow server that is still streaming."""
    return (
        f"{name} at {base} is slow: {events} stream event{'s' if events != 1 else ''} of {tokens} tokens in "
        f"{waited_s:g} s, still streaming; the probe waits for it up to request.timeout_s "
        f"({exp.request.timeout_s:g} s), as a block would. A server silent that long is refused."
    )


def _error_problem(name: str, base: str, path: str, error: str, model: str, models: list[str]) -> str:
    low = error.lower()
    if "404" in error and ("model" in low or "not found" in low or "does not exist" in low):
        served = f"it serves {', '.join(repr(m) for m in models[:8])}" if models else "it lists no model"
        return (
            f"{name} at {base} does not serve the model {model!r} ({error[:200]}); {served}: set "
            f"engine.served_model to the name it serves."
        )
    if "401" in error or "403" in error:
        return (
            f"{name} at {base} refused the request ({error[:200]}); set engine.api_key_env to the variable "
            f"that holds its API key."
        )
    return f"{name} at {base} failed the probe request to {path}: {error[:300]}"


def _chat_problem(http: httpx.Client, base: str, model: str, name: str, wl: str, timeout_s: float) -> str | None:
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "stream": False}
    try:
        r = http.post(base + "/v1/chat/completions", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{name} at {base} did not answer a chat request ({type(exc).__name__}), which workload {wl} sends."
    if r.status_code == 200:
        return None
    return (
        f"{name} at {base} refused a chat request ({r.status_code}: {r.text[:200]}), which workload {wl} "
        f"sends: start the server with a chat template (vLLM --chat-template, llama.cpp --jinja), or set "
        f"workloads.{wl}.api: completions."
    )
