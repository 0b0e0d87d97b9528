"""llama.cpp's `llama-server` (flags of master after the May 2026 rename; check `llama-server --help`).

Facts used here (docs/engine-apis.md, section 3): the HTTP server starts before the model
loads and /health answers 503 until it has loaded (/v1/models answers 200 even then, so it is not a
readiness signal); the OpenAI routes carry a top-level `timings` object, on the finish chunk or on
the final usage chunk when streaming, with `cache_n` and, only when the slot drafted anything,
`draft_n` and `draft_n_accepted`; a slot's cache is erased with POST /slots/{id}?action=erase;
GET /props gives `build_info` and the server's settings.

Speculative flags: `--spec-type` chooses the method and `--spec-draft-n-max` the budget. Builds
from before the rename take `-md` / `--draft-max` instead: pass those in arms.X.args and leave
`speculative` for the record only on such builds.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import httpx

from bracket.engines.base import (
    SERVED_NAME,
    Engine,
    ServerTiming,
    SpecCounters,
    SpecFields,
    as_int,
    get_json,
    greedy,
    last_flag,
    neutral_sampling,
    prometheus_sums,
    server_of,
    state_record,
)
from bracket.typed.experiment import Arm, Experiment, Request, Speculative
from bracket.wire.client import Measurement

METHODS = {
    "ngram": "ngram-simple",
    "draft_model": "draft-simple",
    "eagle3": "draft-eagle3",
    "mtp": "draft-mtp",
    "dflash": "draft-dflash",
    "dspark": "draft-dspark",
}

DRAFTS = "llamacpp:spec_decode_num_drafts_total"
DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"


def spec_from_timings(timings: dict) -> SpecFields | None:
    """Per-request acceptance from `timings`; None when the build or the request reported no drafts.

    timings has draft_n (proposed) and draft_n_accepted, not the number of verify steps. Every
    target forward after the prefill yields exactly one token of its own plus the drafts it
    accepted, and the prefill yields the first token, so
        verify steps = predicted_n - 1 - draft_n_accepted,
        acceptance length = 1 + draft_n_accepted / verify steps = (predicted_n - 1) / verify steps.
    """
    drafted, accepted, n = (as_int(timings.get(k)) for k in ("draft_n", "draft_n_accepted", "predicted_n"))
    if drafted is None or accepted is None:
        return None
    steps = n - 1 - accepted if n is not None and n - 1 - accepted > 0 else None
    return SpecFields.from_counts(
        verify_steps=steps,
        accepted=accepted,
        draft_tokens=drafted,
        source="response timings (verify steps = predicted_n - 1 - draft_n_accepted)",
    )


def spec_argv(spec: Speculative) -> list[str]:
    """Speculative flags of this llama.cpp (llama-cpp-python 0.3.36's vendored source, docs/llamacpp.md).

    ngram-simple drafts size_m tokens after a match of size_n tokens: draft_tokens and
    prompt_lookup_max. ngram-mod drafts between n-min and n-max tokens; its default n-min (48)
    exceeds any useful n-max, so it would never draft: n-min is set to 1. A draft model drafts
    up to --spec-draft-n-max tokens.
    """
    method = spec.engine_method or METHODS[spec.method]
    n = str(spec.draft_tokens)
    argv = ["--spec-type", method]
    if spec.model:
        argv += ["--spec-draft-model", spec.model]
    if method == "ngram-simple":
        argv += ["--spec-ngram-simple-size-n", str(spec.prompt_lookup_max or 3), "--spec-ngram-simple-size-m", n]
    elif method == "ngram-mod":
        argv += ["--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", n]
    return argv + ["--spec-draft-n-max", n]


def never_drafts(name: str, spec: Speculative | None) -> list[str]:
    """An ngram-simple arm whose draft budget is below its match length: llama.cpp never drafts for it.

    common_ngram_simple_draft (common/ngram-map.cpp) copies at most size_m tokens after a match of
    size_n and returns no draft when that copy is shorter than size_n, so with size_m < size_n every
    lookup comes back empty and the arm is the baseline under another name.
    """
    if spec is None or (spec.engine_method or METHODS.get(spec.method)) != "ngram-simple":
        return []
    size_n = spec.prompt_lookup_max or 3
    if spec.draft_tokens >= size_n:
        return []
    return [
        f"arms.{name}.speculative: ngram-simple drafts only when it can copy at least as many tokens as it "
        f"matched (prompt_lookup_max {size_n}), so a draft budget of {spec.draft_tokens} never drafts and "
        f"the arm would measure the baseline; raise draft_tokens to {size_n} or more, or lower "
        f"prompt_lookup_max to {spec.draft_tokens}"
    ]


def build_record(executable: str | None) -> dict | None:
    """The record the workflow's llama.cpp build left beside its llama-server (build_llamacpp.sh), if any."""
    if not executable:
        return None
    try:
        exe = Path(executable).resolve()
        for parent in list(exe.parents)[:3]:
            f = parent / "build.json"
            if f.is_file():
                return json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return None


def timing_from_timings(timings: dict | None) -> ServerTiming | None:
    """llama-server's own decode time: `timings.predicted_ms` for `predicted_n` tokens (its t_token_generation)."""
    if not isinstance(timings, dict):
        return None
    ms, n = timings.get("predicted_ms"), as_int(timings.get("predicted_n"))
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms <= 0 or not n or n <= 0:
        return None
    return ServerTiming(seconds=float(ms) / 1000.0, tokens=n, source="llama.cpp timings.predicted_ms / predicted_n")


def last_timings(events: list[dict]) -> dict | None:
    for event in reversed(events):
        if isinstance(event.get("timings"), dict):
            return event["timings"]
    return None


class LlamaCpp(Engine):
    kind = "llamacpp"
    api_key_env = "LLAMA_API_KEY"  # llama-server reads --api-key from LLAMA_API_KEY as well
    spec_methods = METHODS
    server_keys = frozenset({"context_length", "kv_cache_dtype", "prefix_caching", "chunked_prefill"})

    def check_arm(self, name: str, arm: Arm) -> list[str]:
        out = super().check_arm(name, arm)
        cp = server_of(arm).chunked_prefill
        if isinstance(cp, bool):
            out.append(
                f"arms.{name}.server.chunked_prefill: llama.cpp always splits prompts into batches; give the "
                f"batch size in tokens (an integer, passed as --batch-size) or remove the key"
            )
        return out

    def check_drafts(self, name: str, arm: Arm) -> list[str]:
        return never_drafts(name, arm.speculative)

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        eng = exp.engine
        s = server_of(arm)
        argv = [
            eng.executable or "llama-server",
            "-m",
            model,
            "--host",
            eng.host,
            "--port",
            str(eng.port),
            "--alias",
            SERVED_NAME,
            "--seed",
            str(exp.request.seed),
            # one slot: the whole context for one stream, and no cross-slot nondeterminism (issue #7052)
            "--parallel",
            "1",
            "--metrics",
        ]
        if s.context_length is not None:
            argv += ["--ctx-size", str(s.context_length)]
        if s.kv_cache_dtype is not None:
            argv += ["--cache-type-k", s.kv_cache_dtype, "--cache-type-v", s.kv_cache_dtype]
        if s.prefix_caching is not True:
            # Fresh-cache measurement (bracket's default): no slot reuse, and no RAM prompt cache, which
            # otherwise saves the previous prompt's state before every new task whatever the request says
            # (0.36-0.45 s of TTFT on a 40-token prompt, flash attention off, on an H200).
            argv += ["--no-cache-prompt", "--cache-ram", "0"]
        if s.chunked_prefill is not None and not isinstance(s.chunked_prefill, bool):
            argv += ["--batch-size", str(s.chunked_prefill)]
        if arm.speculative is not None:
            argv += spec_argv(arm.speculative)
        self.executable = argv[0]
        return argv + list(eng.args) + list(arm.args)

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        """A plain client's greedy body (model, prompt, max_tokens, temperature 0, stream) and, each for a reason:

        No top_k when greedy: the server's default chain (top_k 40, or the GGUF's general.sampling.top_k),
            exactly what a plain client gets, so bracket measures the work a plain client's request costs.
            Never top_k <= 0, which turns the top-k sampler off and makes the samplers walk the whole
            vocabulary per token (151,936 for Qwen). On the H200 (studies/h200/llamacpp/
            body_cost.json, one server, bodies alternated, the server's own timing) top_k 0 cost 1.239x a
            plain client's time per token (CI 1.211-1.268), top_k left out 1.0009x (0.991-1.011), top_k 1
            0.9990x (0.987-1.011). On the CPU build with the embedded model the llama.cpp sweep's
            neutrality control gave, in its no-speculation arm, 0.977x with top_k 1 and 1.022x with top_k
            left out (6 blocks each); its speculative arms read 0.81-0.86x with either body (ngram_3,
            ngram_mod_8), a difference the sampler does not explain (studies/llamacpp_sweep_cpu).
        repeat_penalty 1: a GGUF converted from a model whose generation_config sets
            repetition_penalty carries it as general.sampling.penalty_repeat, llama-server's default;
            the penalty runs before top_k and changes the tokens. 1 switches the sampler off.
        seed (temperature > 0 only): reproducible draws; a greedy request draws nothing.
        ignore_eos: the output length is part of the workload (finish_reason "length"); a logit bias
            on the few end-of-generation tokens, written in place per token.
        cache_prompt false: see below. stream_options.include_usage: the final chunk's usage and
            timings, which the record's token counts and cache check read.
        """
        # One slot keeps the previous prompt's KV: without cache_prompt false, the first token or two
        # that every prompt shares are reused (cached_tokens 1-2, measured on the H200), and the cache
        # guard rightly rejects the run. Prefix caching is measured only when an arm asks for it.
        caching = server_of(arm).prefix_caching is True
        body = {
            "model": model_name,
            "prompt": prompt,
            "max_tokens": request.max_tokens,
            **neutral_sampling(request, top_k_all=0),
            "repeat_penalty": 1.0,
        }
        if not greedy(request):
            body["seed"] = seed
        return {
            **body,
            "ignore_eos": True,
            "cache_prompt": caching,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        return timing_from_timings(last_timings(events))

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        s = prometheus_sums(metrics_text, {DRAFTS, DRAFT_TOKENS, ACCEPTED})
        if DRAFTS not in s:
            return None
        return SpecCounters(drafts=s[DRAFTS], draft_tokens=s.get(DRAFT_TOKENS, 0.0), accepted=s.get(ACCEPTED, 0.0))

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """Slot reuse and the RAM prompt cache, as this llama-server was started (common/arg.cpp of 0.3.36).

        Two caches: the slot's own KV, reused for a request whose `cache_prompt` is true (the request's
        field wins over --[no-]cache-prompt, which only sets its default), and the RAM prompt cache
        (--cache-ram / -cram MiB, env LLAMA_ARG_CACHE_RAM, default 8192, 0 turns it off), into which the
        server saves the previous prompt's state before each new task, whatever the request asks.
        """
        if argv is None:
            return state_record("unknown", ["the server was started by hand (attach)"])
        reuse = server_of(arm).prefix_caching is True
        ram = last_flag(argv, ("--cache-ram", "-cram"))
        ram_mib = ram[1] if ram else (env or {}).get("LLAMA_ARG_CACHE_RAM")
        how = [f"cache_prompt {'true' if reuse else 'false'} in each request"]
        how.append(
            f"{ram[0]} {ram[1]}"
            if ram
            else f"LLAMA_ARG_CACHE_RAM={ram_mib}"
            if ram_mib is not None
            else "--cache-ram not set (8192 MiB)"
        )
        try:
            ram_on = int(ram_mib if ram_mib is not None else 8192) != 0
        except ValueError:
            return state_record("unknown", how)
        if reuse:
            return state_record("on", how)
        return state_record("partly" if ram_on else "off", how)

    def reconcile(self, spec: SpecFields, before: SpecCounters, after: SpecCounters) -> SpecFields:
        """timings' draft_n / draft_n_accepted against the /metrics deltas of the same request.

        Single stream: the deltas are this request's. They must be equal; where they are not, the
        counters win (they are what the server's own monitoring reports) and a warning says so.
        """
        drafted, accepted = after.draft_tokens - before.draft_tokens, after.accepted - before.accepted
        if spec.draft_tokens == drafted and spec.accepted_tokens == accepted:
            return replace(spec, source=f"{spec.source}; /metrics deltas agree")
        warnings.warn(
            f"llama.cpp timings report {spec.draft_tokens} drafted / {spec.accepted_tokens} accepted, "
            f"its /metrics deltas {drafted:.0f} / {accepted:.0f}; the /metrics values are kept",
            stacklevel=2,
        )
        # Every token is a target token or an accepted draft: the steps follow from the accepted count.
        steps = (
            spec.verify_steps + spec.accepted_tokens - accepted
            if spec.verify_steps is not None and spec.accepted_tokens is not None
            else after.drafts - before.drafts
        )
        return SpecFields.from_counts(
            verify_steps=steps, accepted=accepted, draft_tokens=drafted, source="/metrics deltas (timings disagreed)"
        )

    def spec_from_stream(self, events: list[dict]) -> SpecFields | None:
        t = last_timings(events)
        return spec_from_timings(t) if t else None

    def adjust(self, m: Measurement, events: list[dict]) -> None:
        # Builds before prompt_tokens_details report cache reuse in timings.cache_n only.
        t = last_timings(events)
        if t and m.cached_tokens is None and as_int(t.get("cache_n")) is not None:
            m.cached_tokens = as_int(t["cache_n"])

    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        slots = get_json(http, base + "/slots")
        if not isinstance(slots, list):
            return "not available: /slots is off (the server runs with --no-slots)"
        erased = []
        for slot in slots:
            sid = slot.get("id")
            try:
                r = http.post(f"{base}/slots/{sid}?action=erase", timeout=30.0)
            except httpx.HTTPError as exc:
                return f"failed on slot {sid}: {type(exc).__name__}"
            if r.status_code == 501:  # measured: slot actions, erase included, need a save path
                return (
                    "not available: llama-server runs slot actions (erase included) only when started with "
                    "--slot-save-path DIR"
                )
            if r.status_code != 200:
                return f"failed on slot {sid}: HTTP {r.status_code}"
            erased.append(sid)
        return f"flushed (slots {', '.join(map(str, erased))} erased)"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        props = get_json(http, base + "/props")
        build_info = props.get("build_info") if isinstance(props, dict) else None
        out = {"engine_version": build_info, "server_info": props if isinstance(props, dict) else None}
        build = build_record(getattr(self, "executable", None))
        if build:
            # A source tree without git reports b0-unknown: the sdist's version is the version.
            out["engine_version"] = f"llama.cpp from llama-cpp-python {build['version']} sdist ({build['backend']})"
            out["engine_build"] = build
        return out
