"""Ollama (HEAD of August 2026, which runs GGUF models through a child llama-server).

Facts used here (docs/engine-apis.md, section 4): `ollama serve` takes its address and
settings from OLLAMA_* environment variables; there is no /health, GET / answers 200 once the
server is up, and a model loads on its first request, so readiness includes a preload
(POST /api/generate with no prompt and keep_alive -1); /api/generate streams one JSON object per
line and the last (done: true) carries eval_count, prompt_eval_count and done_reason; the prompt
cache cannot be switched off and unloading the model (keep_alive 0) is the only flush; no
per-request speculative counts are exposed, so acceptance stays null.

Speculation comes from the model itself (a Modelfile DRAFT line, or MTP tensors in the GGUF);
an arm's speculative.draft_tokens is sent as options.draft_num_predict.
"""

from __future__ import annotations

import httpx

from bracket.engines.base import (
    Engine,
    Measured,
    ServerTiming,
    SpecFields,
    as_int,
    get_json,
    greedy,
    neutral_sampling,
    server_of,
    spec_of,
    state_record,
)
from bracket.typed.experiment import Arm, Experiment, Request
from bracket.wire.client import Counts, Measurement, timed_stream
from bracket.wire.server import ServerError

METHODS = {"draft_model": "Modelfile DRAFT", "mtp": "draft-mtp", "dflash": "draft-dflash"}
QUANTIZED_KV = {"q8_0", "q4_0"}


def counts(events: list[dict]) -> Counts:
    last = events[-1] if events else {}
    if not last.get("done"):
        return Counts()
    return Counts(
        completion_tokens=as_int(last.get("eval_count")),
        prompt_tokens=as_int(last.get("prompt_eval_count")),
        cached_tokens=None,  # not exposed; prompt_eval_count includes cached tokens (llama-server backend)
        finish_reason=last.get("done_reason"),
    )


class Ollama(Engine):
    kind = "ollama"
    health_path = "/"
    request_path = "/api/generate"
    plain_path = "/api/generate"  # its own route: a plain client of Ollama sends to it too
    spec_methods = METHODS
    server_keys = frozenset({"context_length", "kv_cache_dtype"})

    def check_arm(self, name: str, arm: Arm) -> list[str]:
        out = super().check_arm(name, arm)
        if arm.speculative is not None and arm.speculative.model:
            out.append(
                f"arms.{name}.speculative.model: Ollama takes its draft model from the Modelfile's DRAFT "
                f"line; create the model with it (ollama create) and remove speculative.model"
            )
        return out

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        return [exp.engine.executable or "ollama", "serve"] + list(exp.engine.args) + list(arm.args)

    def launch_env(self, exp: Experiment, arm: Arm) -> dict[str, str]:
        eng = exp.engine
        s = server_of(arm)
        env = {
            "OLLAMA_HOST": f"{eng.host}:{eng.port}",
            "OLLAMA_NUM_PARALLEL": "1",  # one request at a time, batch 1
            "OLLAMA_KEEP_ALIVE": "-1",
            "OLLAMA_NO_CLOUD": "1",
        }
        if s.context_length is not None:
            env["OLLAMA_CONTEXT_LENGTH"] = str(s.context_length)
        if s.kv_cache_dtype is not None:
            env["OLLAMA_KV_CACHE_TYPE"] = s.kv_cache_dtype
            if s.kv_cache_dtype in QUANTIZED_KV:
                env["OLLAMA_FLASH_ATTENTION"] = "1"  # a quantized KV cache needs flash attention
        env.update(super().launch_env(exp, arm))
        return env

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """Ollama's prompt cache has no switch: each block's server is fresh, and within it the cache stays on."""
        return state_record("on", ["Ollama has no switch; a fresh server per block (attach: the model reloaded)"])

    def request_model(self, exp: Experiment, http=None, base=None) -> str:
        model = exp.engine.served_model or exp.engine.model or ""
        return model if model not in ("", "embedded") else super().request_model(exp, http, base)

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        # Ollama sends every sampler setting on to its llama-server (llm/llama_server.go), its own
        # defaults or the Modelfile's PARAMETER lines where a request is silent: top_k 40 (0 makes
        # llama.cpp walk the whole vocabulary per token), repeat_penalty 1 unless the Modelfile sets
        # one. Greedy: no top_k, the default chain a plain client gets (never 0); repeat_penalty 1 keeps
        # a Modelfile's penalty from changing the tokens. A seed only where something is drawn.
        options = {
            "num_predict": request.max_tokens,
            **neutral_sampling(request, top_k_all=0),
            "repeat_penalty": 1.0,
        }
        if not greedy(request):
            options["seed"] = seed
        if server_of(arm).context_length is not None:
            options["num_ctx"] = server_of(arm).context_length
        if spec_of(arm) is not None:
            options["draft_num_predict"] = spec_of(arm).draft_tokens
        # raw: the prompt as given, with no chat template, like /v1/completions elsewhere
        return {
            "model": model_name,
            "prompt": prompt,
            "raw": True,
            "stream": True,
            "keep_alive": -1,
            "options": options,
        }

    def plain_body(self, model_name: str, prompt: str, request: Request) -> dict:
        # A plain client of Ollama's own route: model, prompt, length and temperature. raw keeps bracket's
        # prompt (no chat template) so both bodies yield the same tokens; Ollama has no ignore_eos.
        return {
            "model": model_name,
            "prompt": prompt,
            "raw": True,
            "stream": True,
            "options": {"num_predict": request.max_tokens, "temperature": request.temperature},
        }

    def control_stream(self, http: httpx.Client, url: str, body: dict, timeout_s: float, on_event) -> Measurement:
        m, _ = timed_stream(
            http,
            url,
            body,
            timeout_s,
            framing="ndjson",
            new_text=lambda e: e.get("response") or "",
            is_last=lambda e: e.get("done") is True,
            counts=counts,
            on_event=on_event,
        )
        return m

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        """The final event's eval_duration (ns) for eval_count tokens: Ollama's own decode time."""
        last = next((e for e in reversed(events) if e.get("done") is True), None) or {}
        ns, n = last.get("eval_duration"), as_int(last.get("eval_count"))
        if not isinstance(ns, (int, float)) or isinstance(ns, bool) or ns <= 0 or not n or n <= 0:
            return None
        return ServerTiming(seconds=ns / 1e9, tokens=n, source="Ollama eval_duration / eval_count")

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
        body = self.request_body(model_name, prompt, request, seed, arm)
        m, _ = timed_stream(
            http,
            base + self.request_path,
            body,
            request.timeout_s,
            framing="ndjson",
            new_text=lambda e: e.get("response") or "",
            is_last=lambda e: e.get("done") is True,
            counts=counts,
        )
        return Measured(m, SpecFields())

    def _load(self, http: httpx.Client, base: str, model_name: str, keep_alive: int, timeout_s: float) -> dict:
        r = http.post(base + "/api/generate", json={"model": model_name, "keep_alive": keep_alive}, timeout=timeout_s)
        if r.status_code == 404:
            raise ServerError(
                f"Ollama at {base} has no model {model_name!r}: create it first (ollama create "
                f"{model_name} -f Modelfile, from a local GGUF) or set engine.model to one that "
                f"`ollama list` shows"
            )
        if r.status_code != 200:
            raise ServerError(f"Ollama could not load {model_name!r}: HTTP {r.status_code} {r.text[:300]}")
        return r.json()

    def after_ready(self, http: httpx.Client, base: str, model_name: str, timeout_s: float = 600.0) -> dict:
        """Load the model now, so the first timed request does not pay for it."""
        reply = self._load(http, base, model_name, -1, timeout_s)
        return {"preload": reply.get("done_reason"), "load_duration_s": (reply.get("load_duration") or 0) / 1e9}

    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        try:
            self._load(http, base, model_name, 0, 120.0)
            self._load(http, base, model_name, -1, 600.0)
        except (ServerError, httpx.HTTPError) as exc:
            return f"failed: {exc}"
        return "flushed by unloading and reloading the model (Ollama has no cache switch)"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        ver = get_json(http, base + "/api/version")
        show = get_json(http, base + "/api/show", method="POST", body={"model": model_name})
        if isinstance(show, dict):
            show = {k: v for k, v in show.items() if k not in ("license", "tensors")}
        return {
            "engine_version": ver.get("version") if isinstance(ver, dict) else None,
            "server_info": show if isinstance(show, dict) else None,
        }
