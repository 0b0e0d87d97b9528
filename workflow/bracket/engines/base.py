"""The interface every engine adapter implements, and what adapters share.

An adapter knows one engine: how an arm becomes its launch command, what "ready" means for it,
how one request is sent and timed, where per-request acceptance is read, how its prefix cache
is flushed, and where it states its version and arguments. It never starts processes itself
(engines/launch.py does, natively, in docker, or not at all under attach).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import httpx

from bracket.typed.experiment import Arm, Experiment, Request, ServerSettings, Speculative
from bracket.wire.client import GET_LIMIT, Measurement, fetch_text, stream_completion, tokens_per_event_bound

# Names sent as the model in requests, for servers we launch (--served-model-name, -a).
SERVED_NAME = "bracket-model"
# An arm without a `server` block: every key unset, so each engine keeps its own defaults (and bracket's
# fresh-cache one for prefix_caching).
NO_SERVER_SETTINGS = ServerSettings(**dict.fromkeys(ServerSettings.model_fields))


def spec_of(arm: Arm | None) -> Speculative | None:
    """The arm's speculative settings; None for an arm without speculation, or no arm at all."""
    return arm.speculative if arm else None


def server_of(arm: Arm | None) -> ServerSettings:
    """The arm's server settings; NO_SERVER_SETTINGS (each engine's defaults) where it sets none."""
    return (arm.server if arm else None) or NO_SERVER_SETTINGS


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
        return cls(
            draft_tokens=None if draft_tokens is None else int(draft_tokens),
            accepted_tokens=accepted,
            verify_steps=verify_steps,
            acceptance_length=al,
            source=source,
        )

    def fields(self) -> dict:
        return {
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "verify_steps": self.verify_steps,
            "acceptance_length": self.acceptance_length,
        }


@dataclass(frozen=True)
class ServerTiming:
    """The server's own account of one request's decode: `seconds` spent producing `tokens` tokens.

    per_token_s = seconds / tokens. What counts as the decode differs by engine (`source` says
    which), but it is the same for two bodies on one server, which is what the neutrality control
    compares.
    """

    seconds: float
    tokens: int
    source: str

    @property
    def per_token_s(self) -> float:
        return self.seconds / self.tokens


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
    # Where a plain OpenAI client sends its request (the neutrality control's plain body).
    plain_path = "/v1/completions"
    # Whether the server's own timing of a request is read from /metrics before and after it.
    timing_from_metrics = False
    # Set on the adapter of an attached server (bracket.engines.for_server): the model name comes from
    # /v1/models, and prefix-cache counters are read where the response does not report cached tokens.
    attached = False

    # ---- launch ---------------------------------------------------------------------------------------
    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        raise NotImplementedError

    def launch_env(self, exp: Experiment, arm: Arm) -> dict[str, str]:
        env = {k: str(v) for k, v in exp.engine.env.items()}
        env.update({k: str(v) for k, v in arm.env.items()})
        return env

    def check_drafts(self, name: str, arm: Arm) -> list[str]:
        """Speculative settings this engine accepts but would never draft with, one sentence each.

        Checked before an experiment runs, not when its records are re-rendered (config.validate's
        `measured`), where the analysis's "never drafted" finding reads the same from the counters."""
        return []

    def check_arm(self, name: str, arm: Arm) -> list[str]:
        """What this engine cannot do of an arm's settings, one sentence each (empty: all fine)."""
        out = []
        spec = arm.speculative
        if spec is not None:
            if not spec.engine_method and spec.method not in self.spec_methods:
                out.append(
                    f"arms.{name}.speculative.method {spec.method!r} is not available on {self.kind}; "
                    f"it offers {', '.join(sorted(self.spec_methods)) or 'no speculative decoding'}"
                    + (" (or name the engine's own method in speculative.engine_method)" if self.spec_methods else "")
                )
            for key in ("steps", "topk"):
                if getattr(spec, key) is not None and key not in self.spec_keys:
                    out.append(
                        f"arms.{name}.speculative.{key} has no {self.kind} equivalent; remove it "
                        f"(it is an SGLang setting)"
                    )
        server = server_of(arm)
        for key in ServerSettings.model_fields:
            if getattr(server, key) is not None and key not in self.server_keys:
                out.append(
                    f"arms.{name}.server.{key} has no {self.kind} switch; remove it or pass the "
                    f"engine's own flag in arms.{name}.args"
                )
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

    def request_model(self, exp: Experiment, http: httpx.Client | None = None, base: str | None = None) -> str:
        """The model name requests carry: engine.served_model, else, on a server bracket did not start, the
        first one /v1/models lists, else the name bracket gives the servers it launches."""
        if exp.engine.served_model:
            return exp.engine.served_model
        if exp.engine.launch == "attach" and http is not None and base:
            listed = listed_models(http, base)
            if listed:
                return listed[0]
        return SERVED_NAME

    # ---- requests -------------------------------------------------------------------------------------
    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        raise NotImplementedError

    def plain_body(self, model_name: str, prompt: str, request: Request) -> dict:
        """The plainest request that yields bracket's tokens: what llama-benchy or a bare OpenAI client sends.

        model, prompt, max_tokens, temperature (0: greedy), stream with usage; and ignore_eos, the one
        field beyond them that pins the token count. No seed, no top_k/top_p/min_p, no cache switch:
        the neutrality control measures what bracket's own additions cost the server.
        """
        return {
            "model": model_name,
            "prompt": prompt,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        """The server's own decode time of one request, from its events or /metrics read around it; None: none."""
        return None

    def control_stream(self, http: httpx.Client, url: str, body: dict, timeout_s: float, on_event) -> Measurement:
        """Send one control request (bracket's body or the plain one) and time it; OpenAI-style streams here."""
        return stream_completion(http, url, body, timeout_s, on_event=on_event)

    def control(
        self,
        http: httpx.Client,
        base: str,
        model_name: str,
        prompt: str,
        request: Request,
        seed: int,
        arm: Arm | None,
        body: str,
    ) -> tuple[Measurement, ServerTiming | None]:
        """One request of the neutrality control: `body` "bracket" (request_body) or "plain" (plain_body).

        Both go through the same client and the same timing; only the body (and, where the engine's own
        route is not OpenAI's, the route) differs. Single stream, so /metrics deltas are this request's.
        """
        if body == "plain":
            url, payload = base + self.plain_path, self.plain_body(model_name, prompt, request)
        elif body == "bracket":
            url, payload = base + self.request_path, self.request_body(model_name, prompt, request, seed=seed, arm=arm)
        else:
            raise ValueError(f"control body must be 'bracket' or 'plain', got {body!r}")
        kept: list[dict] = []

        def keep(event: dict) -> None:
            if not event.get("choices") or event.get("usage") or event.get("timings") or event.get("done"):
                kept.append(event)

        unread: list[str] = []  # why /metrics could not be read
        before = metrics_text(http, base, unread) if self.timing_from_metrics else None
        m = self.control_stream(http, url, payload, request.timeout_s, keep)
        after = metrics_text(http, base, unread) if self.timing_from_metrics and not unread else before
        metrics_error(m, unread, "the server's own timing of this request")
        self.adjust(m, kept)
        timing = None if m.error else self.server_timing(kept, before, after)
        for _ in range(5 if self.timing_from_metrics and timing is None and not m.error else 0):
            # The server may record a finished request just after its last byte: read again, briefly.
            time.sleep(0.05)
            timing = self.server_timing(kept, before, metrics_text(http, base, unread))
            if timing is not None or unread:
                break
        metrics_error(m, unread, "the server's own timing of this request")
        return m, timing

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        return None

    def cache_hits(self, metrics_text: str) -> float | None:
        """Cumulative prefix-cache hits in tokens on /metrics; None where the engine has no such counter."""
        return None

    def spec_from_stream(self, events: list[dict]) -> SpecFields | None:
        """Per-request speculative values carried by the response's own events; None when absent."""
        return None

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
        """Send one streamed request of `arm` and time it.

        OpenAI-style engines: /v1/completions through the shared client. Per-request acceptance
        comes from the response when the engine puts it there (spec_from_stream), else from the
        difference of /metrics counters read just before and after the request (single stream, so
        the difference is this request's).
        """
        spec_settings = spec_of(arm)
        speculative = spec_settings is not None
        body = self.request_body(model_name, prompt, request, seed=seed, arm=arm)
        kept: list[dict] = []

        def keep(event: dict) -> None:
            if not event.get("choices") or event.get("usage") or event.get("timings") or event.get("metrics"):
                kept.append(event)

        # The cache counters only where the response may not say (a server bracket did not start).
        counters = speculative or (self.attached and type(self).cache_hits is not Engine.cache_hits)
        unread: list[str] = []  # why /metrics could not be read
        text0 = metrics_text(http, base, unread) if counters else ""
        bound = tokens_per_event_bound(speculative, spec_settings.draft_tokens if speculative else None)
        m = stream_completion(
            http, base + self.request_path, body, request.timeout_s, on_event=keep, max_tokens_per_event=bound
        )
        text1 = metrics_text(http, base, unread) if counters and not unread else text0
        metrics_error(m, unread, "the request's speculative and prefix-cache counters")
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
            spec = SpecFields.from_counts(
                verify_steps=after.drafts - before.drafts,
                accepted=after.accepted - before.accepted,
                draft_tokens=after.draft_tokens - before.draft_tokens,
                source="/metrics counters, before and after the request",
            )
        return Measured(m, spec or SpecFields(), cache_check)

    def adjust(self, m: Measurement, events: list[dict]) -> None:
        """Fill what the shared client could not read from an engine's extras (llama.cpp's cache_n)."""

    def reconcile(self, spec: SpecFields, before: SpecCounters, after: SpecCounters) -> SpecFields:
        """Check the response's own speculative values against the /metrics deltas of the same request."""
        return spec

    # ---- cache and provenance -------------------------------------------------------------------------
    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        """The state this server keeps between requests, as launched (`argv` and `env` are the block's own).

        Read from what ran, not from the experiment, so a flag in arms.X.args that overrides
        bracket's default is reported as it took effect. Keys: prefix_cache ("off", "on" or
        "unknown"), how (the flags, variables and request fields that set it), graphs (CUDA graphs:
        "off" or "captured at start-up", None where the engine has no such switch or we cannot tell).
        """
        return state_record("unknown", ["not known for this engine"])

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


def metrics_text(http: httpx.Client, base: str, unread: list[str]) -> str:
    """The server's /metrics page ("" where it has none); a page the client's limits stopped (over
    client.GET_LIMIT, or not ended within its time) is "" too, and why is added to `unread`."""
    got = fetch_text(http, base + "/metrics")
    if got.problem is not None:
        unread.append(got.problem)
    return got.text or ""


def metrics_error(m: Measurement, unread: list[str], what: str) -> None:
    """Make `m` an error record (if it is not one) when /metrics could not be read: `what` is unknown."""
    if unread and m.error is None:
        m.error = (
            f"/metrics could not be read, so {what} is unknown: {unread[0]}. The server's /metrics must be a "
            f"Prometheus page that ends, under {GET_LIMIT >> 20} MiB, within 5 s"
        )


def get_json(
    http: httpx.Client, url: str, timeout_s: float = 5.0, method: str = "GET", body: dict | None = None
) -> dict | list | None:
    """A JSON answer, or None when the route is absent, fails or is not JSON."""
    try:
        r = http.request(method, url, json=body, timeout=timeout_s)
        if r.status_code != 200:
            return None
        return r.json()
    except (httpx.HTTPError, ValueError):
        return None


def server_settings(arm: Arm) -> dict:
    """The parts of an arm that are server launch settings (what attach mode cannot change); None where unset."""
    return {k: getattr(arm, k) or None for k in ("speculative", "server", "args", "env")}


def as_int(v) -> int | None:
    """An engine's count as int, or None when absent or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def greedy(request: Request) -> bool:
    """Whether the request decodes greedily (temperature 0, the schema's default)."""
    return request.temperature == 0


def neutral_sampling(request: Request, top_k_all: int | None = None) -> dict:
    """The sampling fields every engine is sent; each adapter adds its own (ARCHITECTURE.md, "What a request asks").

    Greedy (temperature 0): ``{"temperature": 0.0}`` and nothing else. Each engine here decodes the
    argmax at temperature 0 whatever top_p, min_p and seed say (vLLM resets them in
    ``SamplingParams.__post_init__``, SGLang sets top_k 1, llama.cpp's temperature sampler keeps the one
    largest logit, and top_p/min_p always keep it), so sending them changes no token; some fields cost
    the server work (llama.cpp walks the whole vocabulary per token when top_k <= 0:
    bench/results/request_cost.md), so none is sent.

    Sampling (temperature > 0): top_p 1, min_p 0 and, where ``top_k_all`` gives the engine's spelling
    of "no top-k", that: pure temperature sampling over the whole vocabulary, the one distribution
    every engine draws alike; their own defaults differ (docs/engine-apis.md section 6.7: llama.cpp top_k
    40, top_p 0.95, min_p 0.05; vLLM and SGLang the model's generation_config). Walking the vocabulary
    is then the work the user asked for.
    """
    if greedy(request):
        return {"temperature": 0.0}
    out = {"temperature": request.temperature, "top_p": 1.0, "min_p": 0.0}
    if top_k_all is not None:
        out["top_k"] = top_k_all
    return out


def state_record(prefix_cache: str, how: list[str], graphs: str | None = None) -> dict:
    """One server's state between requests, as `Engine.server_state` reports it (and the block's meta keeps it)."""
    return {"prefix_cache": prefix_cache, "how": list(how), "graphs": graphs}


def last_flag(argv: list[str], names: tuple[str, ...]) -> tuple[str, str | None] | None:
    """The last of `names` on `argv` with its value ("--x v" or "--x=v"), or None when none is there.

    Engines parse their arguments in order, so the last occurrence is the one that took effect.
    The value is None for a switch that is last on the line or followed by another flag.
    """
    found = None
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in names:
            if eq:
                found = (flag, value)
            else:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                found = (flag, nxt if nxt is not None and not (nxt.startswith("-") and not _number(nxt)) else None)
    return found


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
