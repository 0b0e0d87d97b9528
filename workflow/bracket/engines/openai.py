"""Any OpenAI-compatible server that is already running: attached to, never launched.

Requests go to /v1/completions with the usual streaming usage chunk. Acceptance is read where a
server of a known kind puts it: vLLM's per-request `metrics.speculative_decoding` or llama.cpp's
`timings` in the response, else vLLM- or llama.cpp-named counters on /metrics, else null. The
model name is engine.served_model, or the first model /v1/models lists. `ignore_eos` is sent, as
vLLM, SGLang and llama.cpp honour it; a server that rejects it needs its own adapter.
"""

from __future__ import annotations

import httpx

from bracket.engines import llamacpp, vllm
from bracket.engines.base import (
    Engine,
    ServerTiming,
    SpecCounters,
    SpecFields,
    get_json,
    greedy,
    neutral_sampling,
    state_record,
)
from bracket.typed.experiment import Arm, Experiment, Request
from bracket.wire.client import Measurement


class OpenAI(Engine):
    kind = "openai"
    launchable = False
    api_key_env = "OPENAI_API_KEY"  # only the Bearer header matters: nothing is launched
    spec_methods = {m: m for m in ("ngram", "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "suffix")}
    spec_keys = frozenset({"steps", "topk"})
    server_keys = frozenset(
        {"memory_fraction", "context_length", "kv_cache_dtype", "prefix_caching", "chunked_prefill"}
    )  # declarations only: the server was started by hand

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        raise ValueError(
            "engine.kind openai attaches to a running server and launches nothing; "
            "set engine.launch: attach and engine.base_url"
        )

    def ready(self, http: httpx.Client, base: str) -> bool:
        for path in ("/health", "/v1/models"):
            try:
                if http.get(base + path, timeout=2.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                return False
        return False

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """An attached server keeps the state it was started with: bracket can only flush its cache per block."""
        return state_record(
            "unknown",
            [
                "as the server was started by hand; its prefix cache flushed before each "
                "block where the engine allows it"
            ],
        )

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        # The server's kind is unknown: only fields every OpenAI-compatible engine reads alike. Greedy:
        # temperature 0 alone (no top_k: its cheap value and its spelling differ by engine). A seed
        # only where something is drawn; ignore_eos and the usage chunk as for every engine.
        body = {"model": model_name, "prompt": prompt, "max_tokens": request.max_tokens, **neutral_sampling(request)}
        if not greedy(request):
            body["seed"] = seed
        return {**body, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}

    timing_from_metrics = True  # a vLLM behind the gateway times requests in /metrics

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        return llamacpp.LlamaCpp().server_timing(events, before, after) or vllm.decode_from_metrics(before, after)

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        return vllm.VLLM().spec_counters(metrics_text) or llamacpp.LlamaCpp().spec_counters(metrics_text)

    def cache_hits(self, metrics_text: str) -> float | None:
        return vllm.VLLM().cache_hits(metrics_text)

    def spec_from_stream(self, events: list[dict]) -> SpecFields | None:
        return vllm.VLLM().spec_from_stream(events) or llamacpp.LlamaCpp().spec_from_stream(events)

    def adjust(self, m: Measurement, events: list[dict]) -> None:
        llamacpp.LlamaCpp().adjust(m, events)

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        ver = get_json(http, base + "/version")
        models = get_json(http, base + "/v1/models")
        return {
            "engine_version": ver.get("version") if isinstance(ver, dict) else None,
            "server_info": {"models": models} if models is not None else None,
        }
