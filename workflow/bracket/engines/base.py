"""The interface every engine adapter implements, and what adapters share.

An adapter knows one engine: how an arm becomes its launch command, what "ready" means for it,
how one request is sent and timed, where per-request acceptance is read, how its prefix cache
is flushed, and where it states its version and arguments. It never starts processes itself
(engines/launch.py does, natively, in docker, or not at all under attach).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from bracket.client import Measurement, get_text, stream_completion

# Names sent as the model in requests, for servers we launch (--served-model-name, -a).
SERVED_NAME = "bracket-model"


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative speculative-decoding counters of a server at one instant.

    drafts: verify steps; draft_tokens: tokens proposed; accepted: proposals accepted (the
    target's own bonus token excluded). Per-request values are deltas between two readings.
    """

    drafts: float
    draft_tokens: float
    accepted: float


@dataclass(frozen=True)
class SpecFields:
    """Per-request speculative values, as the raw record names them; None where the engine is silent.

    acceptance_length = 1 + accepted_tokens / verify_steps: tokens produced per verify step,
    the target's own token included (DESIGN.md, "Definitions").
    """

    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    verify_steps: int | None = None
    acceptance_length: float | None = None
    source: str | None = None  # where the values came from, for the block's provenance

    @classmethod
    def from_counts(cls, *, verify_steps, accepted, draft_tokens=None, source=None) -> "SpecFields":
        verify_steps = None if verify_steps is None else int(verify_steps)
        accepted = None if accepted is None else int(accepted)
        al = 1 + accepted / verify_steps if verify_steps and accepted is not None else None
        return cls(draft_tokens=None if draft_tokens is None else int(draft_tokens), accepted_tokens=accepted,
                   verify_steps=verify_steps, acceptance_length=al, source=source)

    def fields(self) -> dict:
        return {"draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted_tokens,
                "verify_steps": self.verify_steps, "acceptance_length": self.acceptance_length}


@dataclass
class Measured:
    """One request as measured: the client's timings and the engine's per-request speculative values."""

    measurement: Measurement
    spec: SpecFields = field(default_factory=SpecFields)
    # How cached_tokens was known: "reported" (the response said), "metrics" (the server's prefix-cache
    # counters read before and after the request), or None (the engine said nothing).
    cache_check: str | None = None


class Engine:
    kind = "base"
    health_path = "/health"
    request_path = "/v1/completions"
    # Environment variable the server reads its API key from (keys on argv would be recorded).
    api_key_env: str | None = None
    # Generic method name (arms.X.speculative.method) -> the engine's own name for it.
    spec_methods: dict[str, str] = {}
    # arms.X.speculative keys beyond method/draft_tokens/model that the engine honours.
    spec_keys: frozenset[str] = frozenset()
    # arms.X.server keys the engine can honour; any other one set is a validation error.
    server_keys: frozenset[str] = frozenset()
    # Whether the engine can be launched by the workflow (False: attach only).
    launchable = True
    # Set on the adapter of an attached server (bracket.engines.for_server): the model name comes from
    # /v1/models, and prefix-cache counters are read where the response does not report cached tokens.
    attached = False

    # ---- launch ---------------------------------------------------------------------------------------
    def launch_argv(self, cfg: dict, arm: dict, model: str, python: str) -> list[str]:
        raise NotImplementedError

    def launch_env(self, cfg: dict, arm: dict) -> dict[str, str]:
        env = {k: str(v) for k, v in cfg["engine"]["env"].items()}
        env.update({k: str(v) for k, v in arm.get("env", {}).items()})
        return env

    def check_arm(self, name: str, arm: dict) -> list[str]:
        """What this engine cannot do of an arm's settings, one sentence each (empty: all fine)."""
        out = []
        spec = arm.get("speculative")
        if spec:
            if not spec.get("engine_method") and spec["method"] not in self.spec_methods:
                out.append(f"arms.{name}.speculative.method {spec['method']!r} is not available on {self.kind}; "
                           f"it offers {', '.join(sorted(self.spec_methods)) or 'no speculative decoding'}"
                           + (" (or name the engine's own method in speculative.engine_method)"
                              if self.spec_methods else ""))
            for key in ("steps", "topk"):
                if spec.get(key) is not None and key not in self.spec_keys:
                    out.append(f"arms.{name}.speculative.{key} has no {self.kind} equivalent; remove it "
                               f"(it is an SGLang setting)")
        for key, value in (arm.get("server") or {}).items():
            if value is not None and key not in self.server_keys:
                out.append(f"arms.{name}.server.{key} has no {self.kind} switch; remove it or pass the "
                           f"engine's own flag in arms.{name}.args")
        return out

    # ---- readiness ------------------------------------------------------------------------------------
    def ready(self, http: httpx.Client, base: str) -> bool:
        """One readiness probe: True when the engine serves requests now."""
        try:
            return http.get(base + self.health_path, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False  # refused or reset while loading

    def after_ready(self, http: httpx.Client, base: str, model_name: str, timeout_s: float = 600.0) -> dict | None:
        """Work the engine needs once it answers, before the first timed request (Ollama's preload)."""
        return None

    def request_model(self, cfg: dict, http: httpx.Client | None = None, base: str | None = None) -> str:
        """The model name requests carry: engine.served_model, else, on a server bracket did not start, the
        first one /v1/models lists, else the name bracket gives the servers it launches."""
        if cfg["engine"].get("served_model"):
            return cfg["engine"]["served_model"]
        if cfg["engine"]["launch"] == "attach" and http is not None and base:
            listed = listed_models(http, base)
            if listed:
                return listed[0]
        return SERVED_NAME

    # ---- requests -------------------------------------------------------------------------------------
    def request_body(self, model_name: str, prompt: str, request: dict, seed: int, arm: dict | None = None) -> dict:
        raise NotImplementedError

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        return None

    def cache_hits(self, metrics_text: str) -> float | None:
        """Cumulative prefix-cache hits in tokens on /metrics; None where the engine has no such counter."""
        return None

    def spec_from_stream(self, events: list[dict]) -> SpecFields | None:
        """Per-request speculative values carried by the response's own events; None when absent."""
        return None

    def measure(self, http: httpx.Client, base: str, model_name: str, prompt: str, request: dict, seed: int,
                arm: dict | None = None) -> Measured:
        """Send one streamed request of `arm` and time it.

        OpenAI-style engines: /v1/completions through the shared client. Per-request acceptance
        comes from the response when the engine puts it there (spec_from_stream), else from the
        difference of /metrics counters read just before and after the request (single stream, so
        the difference is this request's).
        """
        arm = arm or {}
        speculative = bool(arm.get("speculative"))
        body = self.request_body(model_name, prompt, request, seed=seed, arm=arm)
        kept: list[dict] = []

        def keep(event: dict) -> None:
            if not event.get("choices") or event.get("usage") or event.get("timings") or event.get("metrics"):
                kept.append(event)

        # The cache counters only where the response may not say (a server bracket did not start).
        counters = speculative or (self.attached and type(self).cache_hits is not Engine.cache_hits)
        text0 = get_text(http, base + "/metrics") or "" if counters else ""
        m = stream_completion(http, base + self.request_path, body, request["timeout_s"], on_event=keep)
        text1 = get_text(http, base + "/metrics") or "" if counters else ""
        before = self.spec_counters(text0) if speculative else None
        after = self.spec_counters(text1) if speculative else None
        self.adjust(m, kept)
        cache_check = "reported" if m.cached_tokens is not None else None
        if cache_check is None and counters and not m.error:
            # Single stream: the difference is this request's hits (vLLM counts them in tokens).
            h0, h1 = self.cache_hits(text0), self.cache_hits(text1)
            if h0 is not None and h1 is not None:
                m.cached_tokens, cache_check = int(round(h1 - h0)), "metrics"
        spec = self.spec_from_stream(kept) if speculative else None
        if spec is not None and before is not None and after is not None:
            spec = self.reconcile(spec, before, after)
        if spec is None and before is not None and after is not None:
            spec = SpecFields.from_counts(verify_steps=after.drafts - before.drafts,
                                          accepted=after.accepted - before.accepted,
                                          draft_tokens=after.draft_tokens - before.draft_tokens,
                                          source="/metrics counters, before and after the request")
        return Measured(m, spec or SpecFields(), cache_check)

    def adjust(self, m: Measurement, events: list[dict]) -> None:
        """Fill what the shared client could not read from an engine's extras (llama.cpp's cache_n)."""

    def reconcile(self, spec: SpecFields, before: SpecCounters, after: SpecCounters) -> SpecFields:
        """Check the response's own speculative values against the /metrics deltas of the same request."""
        return spec

    # ---- cache and provenance -------------------------------------------------------------------------
    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        """Empty the prefix cache; return what happened, in words, for the block's provenance."""
        return "no cache flush is known for this engine"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        """{"engine_version": str|None, "server_info": dict|None, ...} from the running server."""
        return {"engine_version": None, "server_info": None}


_PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def prometheus_sums(text: str, names: set[str]) -> dict[str, float]:
    """Sum each named Prometheus sample over all its label sets (e.g. several engines)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if m and m.group(1) in names:
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + float(m.group(3))
    return sums


def listed_models(http: httpx.Client, base: str) -> list[str]:
    """The model ids GET /v1/models lists (empty when the route is absent or says nothing usable)."""
    models = get_json(http, base + "/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return []
    return [str(d["id"])[:200] for d in data if isinstance(d, dict) and isinstance(d.get("id"), (str, int))]


def get_json(http: httpx.Client, url: str, timeout_s: float = 5.0, method: str = "GET",
             body: dict | None = None) -> dict | list | None:
    """A JSON answer, or None when the route is absent, fails or is not JSON."""
    try:
        r = http.request(method, url, json=body, timeout=timeout_s)
        if r.status_code != 200:
            return None
        return r.json()
    except (httpx.HTTPError, ValueError):
        return None


def server_settings(arm: dict) -> dict:
    """The parts of an arm that are server launch settings (what attach mode cannot change)."""
    return {k: arm.get(k) or None for k in ("speculative", "server", "args", "env")}


def as_int(v) -> int | None:
    """An engine's count as int, or None when absent or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def neutral_sampling(request: dict) -> dict:
    """Sampling parameters sent explicitly: engines' own defaults differ (engine-apis.md section 6.7)."""
    return {"temperature": request["temperature"], "top_p": 1.0, "min_p": 0.0}
