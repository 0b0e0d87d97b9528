"""SGLang (0.5.x; flags checked against the 0.5.23 wheel, field names across 0.5.x).

Facts used here (docs/engine-apis.md, section 1): the port refuses connections while the
weights load, then /health answers 503 until the warm-up request has finished and 200 after;
requests go to the native POST /generate, whose final `meta_info` carries the per-request
speculative counts (the OpenAI routes of 0.5.23 carry none) and `cached_tokens`; the prefix
(radix) cache is flushed with POST /flush_cache; /server_info (older: /get_server_info) returns
the resolved server arguments and the version.

Draft budget: `draft_tokens` is the number of tokens proposed per verify step, as for vLLM.
SGLang's --speculative-num-draft-tokens counts the verified tree's root too (its
spec_num_proposed_drafts = verify steps x (num_draft_tokens - 1)), so it is draft_tokens + 1;
for a chain (topk 1) --speculative-num-steps defaults to draft_tokens. DFlash and DSpark are the
exception: their checkpoints are trained for a block size, which both SGLang
(--speculative-num-draft-tokens, alias --speculative-dflash-block-size) and vLLM
(num_speculative_tokens) take as is, so draft_tokens is passed unchanged as the block size.
"""

from __future__ import annotations

import httpx

from bracket.engines.base import (
    SERVED_NAME,
    Engine,
    Measured,
    SpecFields,
    as_int,
    get_json,
    greedy,
    neutral_sampling,
    server_of,
    spec_of,
    state_record,
)
from bracket.typed.experiment import Arm, Experiment, Request, ServerSettings, Speculative
from bracket.wire.client import Counts, Measurement, stream_completion, timed_stream

METHODS = {
    "ngram": "NGRAM",
    "draft_model": "STANDALONE",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "dflash": "DFLASH",
    "dspark": "DSPARK",
}
# Algorithms that draft autoregressively: steps and topk apply.
TREE_DRAFTERS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
# Algorithms whose draft is one block of a trained size: draft_tokens is that size.
BLOCK_DRAFTERS = {"DFLASH", "DSPARK"}

# meta_info names of accepted and proposed draft counts, newest first (section 1.4 of docs/engine-apis.md):
# 0.5.23 has spec_num_*; before it spec_accepted_drafts / spec_proposed_drafts; ~0.5.3-0.5.5
# spec_accept_token_num / spec_draft_token_num; the oldest only spec_verify_ct.
ACCEPTED_NAMES = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
PROPOSED_NAMES = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")


def spec_flags(spec: Speculative) -> list[str]:
    algo = spec.engine_method or METHODS[spec.method]
    out = ["--speculative-algorithm", algo]
    if spec.model:
        out += ["--speculative-draft-model-path", spec.model]
    if algo.upper() in TREE_DRAFTERS:
        # SGLang wants steps, topk and draft tokens set together, or none of them.
        out += [
            "--speculative-num-steps",
            str(spec.steps or spec.draft_tokens),
            "--speculative-eagle-topk",
            str(spec.topk or 1),
        ]
    else:
        if spec.steps is not None:
            out += ["--speculative-num-steps", str(spec.steps)]
        if spec.topk is not None:
            out += ["--speculative-eagle-topk", str(spec.topk)]
    block = algo.upper() in BLOCK_DRAFTERS
    out += ["--speculative-num-draft-tokens", str(spec.draft_tokens + (0 if block else 1))]
    return out


def server_flags(s: ServerSettings) -> list[str]:
    """SGLang flags for an arm's `server` block (bracket.engines.base.server_of); unset keys leave SGLang's defaults."""
    out = []
    if s.memory_fraction is not None:
        out += ["--mem-fraction-static", f"{s.memory_fraction:g}"]
    if s.context_length is not None:
        out += ["--context-length", str(s.context_length)]
    if s.kv_cache_dtype is not None:
        out += ["--kv-cache-dtype", s.kv_cache_dtype]
    if s.prefix_caching is not True:
        out += ["--disable-radix-cache"]  # on by default; off unless an arm measures prefix caching
    cp = s.chunked_prefill
    if cp is False:
        out += ["--chunked-prefill-size", "-1"]
    elif cp is not None and cp is not True:
        out += ["--chunked-prefill-size", str(cp)]
    return out


def finish_type(reason) -> str | None:
    """meta_info.finish_reason is {"type": "length", ...}, a bare string in some releases, or null."""
    if isinstance(reason, dict):
        return reason.get("type")
    return reason if isinstance(reason, str) else None


def spec_from_meta(meta: dict) -> SpecFields | None:
    """Per-request acceptance from a finished request's meta_info, whatever the 0.5.x field names.

    acceptance length = 1 + accepted / spec_verify_ct (the cross-engine formula; SGLang's own
    spec_accept_length = completion_tokens / spec_verify_ct also counts the token the prefill
    produced). When the release reports only spec_verify_ct, accepted = completion_tokens - 1 -
    spec_verify_ct: every verify step yields its accepted drafts plus one token of the target's,
    and the prefill yields the first token.
    """
    verify = as_int(meta.get("spec_verify_ct"))
    if verify is None:
        return None
    accepted = next((as_int(meta[k]) for k in ACCEPTED_NAMES if meta.get(k) is not None), None)
    proposed = next((as_int(meta[k]) for k in PROPOSED_NAMES if meta.get(k) is not None), None)
    source = "/generate meta_info"
    if accepted is None:
        n = as_int(meta.get("completion_tokens"))
        if n is None or verify == 0:
            return SpecFields(verify_steps=verify, source=source)
        accepted = max(n - 1 - verify, 0)
        source = "/generate meta_info (accepted = completion_tokens - 1 - spec_verify_ct)"
    return SpecFields.from_counts(verify_steps=verify, accepted=accepted, draft_tokens=proposed, source=source)


class _Text:
    """Turns /generate's cumulative text (the default) or incremental text into increments."""

    def __init__(self):
        self.text = ""

    def __call__(self, event: dict) -> str:
        t = event.get("text") or ""
        if t.startswith(self.text):  # cumulative: each chunk repeats what came before
            new, self.text = t[len(self.text) :], t
        else:  # --incremental-streaming-output
            new, self.text = t, self.text + t
        return new


def counts(events: list[dict]) -> Counts:
    meta = (events[-1].get("meta_info") or {}) if events else {}
    return Counts(
        completion_tokens=as_int(meta.get("completion_tokens")),
        prompt_tokens=as_int(meta.get("prompt_tokens")),
        cached_tokens=as_int(meta.get("cached_tokens")),
        finish_reason=finish_type(meta.get("finish_reason")),
    )


class SGLang(Engine):
    kind = "sglang"
    request_path = "/generate"
    api_key_env = None  # SGLang takes --api-key on argv only, which would be recorded
    spec_methods = METHODS
    spec_keys = frozenset({"steps", "topk"})
    server_keys = frozenset(
        {"memory_fraction", "context_length", "kv_cache_dtype", "prefix_caching", "chunked_prefill"}
    )

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        eng = exp.engine
        argv = [
            python,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--served-model-name",
            SERVED_NAME,
            "--host",
            eng.host,
            "--port",
            str(eng.port),
            "--random-seed",
            str(exp.request.seed),
            "--enable-cache-report",
        ]
        argv += server_flags(server_of(arm))
        if arm.speculative is not None:
            argv += spec_flags(arm.speculative)
        return argv + list(eng.args) + list(arm.args)

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """The radix (prefix) cache (--disable-radix-cache; on by default) and CUDA graphs (--disable-cuda-graph)."""
        if argv is None:
            return state_record("unknown", ["the server was started by hand (attach)"])
        off = "--disable-radix-cache" in argv
        how = ["--disable-radix-cache"] if off else ["no --disable-radix-cache (SGLang's default: on)"]
        graphs = "off (--disable-cuda-graph)" if "--disable-cuda-graph" in argv else "captured at start-up"
        return state_record("off" if off else "on", how, graphs)

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        # Greedy: SamplingParams turns temperature 0 into top_k 1 itself (the argmax path), so no top_k,
        # top_p or min_p is sent. repetition_penalty 1: under --sampling-defaults model (the default)
        # a model's generation_config would supply one, changing the tokens and adding the penalizer
        # (penaltylib's BatchedRepetitionPenalizer is required only where a value is not 1.0).
        # ignore_eos: the output length is part of the workload.
        sp = {
            "max_new_tokens": request.max_tokens,
            "ignore_eos": True,
            "repetition_penalty": 1.0,
            **neutral_sampling(request, top_k_all=-1),
        }
        if not greedy(request):
            # Older releases reject sampling_seed; greedy decoding needs no seed.
            sp["sampling_seed"] = seed
        return {"text": prompt, "sampling_params": sp, "stream": True}

    def measure(
        self,
        http: httpx.Client,
        base: str,
        model_name: str,
        prompt: str,
        request: Request,
        seed: int,
        arm: Arm | None = None,
    ) -> Measured:
        speculative = spec_of(arm) is not None
        body = self.request_body(model_name, prompt, request, seed, arm)
        m, events = timed_stream(
            http,
            base + self.request_path,
            body,
            request.timeout_s,
            framing="sse",
            new_text=_Text(),
            is_last=lambda e: False,
            counts=counts,
        )
        spec = None
        if speculative:
            # 0.5.23 puts the spec fields on the final chunk only; the oldest releases on every chunk.
            for event in reversed(events):
                spec = spec_from_meta(event.get("meta_info") or {})
                if spec is not None:
                    break
        return Measured(m, spec or SpecFields(), "reported" if m.cached_tokens is not None else None)

    def control_stream(self, http: httpx.Client, url: str, body: dict, timeout_s: float, on_event) -> Measurement:
        # bracket's body goes to the native /generate; the plain one to /v1/completions, as a plain client's
        # does. Neither stream carries a decode time of the server's: the control compares wall time.
        if url.endswith(self.request_path):
            m, _ = timed_stream(
                http,
                url,
                body,
                timeout_s,
                framing="sse",
                new_text=_Text(),
                is_last=lambda e: False,
                counts=counts,
                on_event=on_event,
            )
            return m
        return stream_completion(http, url, body, timeout_s, on_event=on_event)

    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        try:
            r = http.post(base + "/flush_cache", timeout=60.0)
        except httpx.HTTPError as exc:
            return f"failed: {type(exc).__name__}"
        return "flushed" if r.status_code == 200 else f"failed: HTTP {r.status_code} {r.text[:200]}"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        info = get_json(http, base + "/server_info") or get_json(http, base + "/get_server_info")
        model = get_json(http, base + "/model_info") or get_json(http, base + "/get_model_info")
        version = info.get("version") if isinstance(info, dict) else None
        return {
            "engine_version": version,
            "server_info": info if isinstance(info, dict) else None,
            "model_info": model if isinstance(model, dict) else None,
        }
