"""Which engine serves an attached URL, told from what it serves (engine.kind: auto).

Each engine has routes the others lack (read in their sources; docs/engine-apis.md):

- llama.cpp's llama-server: GET /props, a JSON object with `default_generation_settings` and
  `build_info` (also `total_slots`, `chat_template`).
- SGLang: GET /server_info (older: /get_server_info), its server arguments (`model_path`, ...)
  plus `internal_states` (a list, one per data-parallel rank) and `version`.
- Ollama: GET /api/version, `{"version": "0.x.y"}` (its own HTTP server; it runs llama-server
  children on other ports, so /props is not on Ollama's).
- vLLM: GET /version, `{"version": "0.32.0"}`, and a Prometheus /metrics whose samples are named
  `vllm:...` (vllm:num_requests_running, vllm:prefix_cache_queries, ...).
- anything else that answers GET /v1/models is a generic OpenAI-compatible server.

Probes are GETs with a short timeout; an answer is untrusted, so only its shape is read and the
version is kept as a short string. A URL where nothing can be reached stops the first probe with the
cause and its fix (`unreachable`): a refused connection, a TCP handshake that never completes (within
CONNECT_TIMEOUT_S, not after a timeout per route), a TLS certificate this host does not trust, a host
name that does not resolve.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import asdict, dataclass

import httpx

from bracket.wire.client import get_bounded

KNOWN = ("vllm", "llamacpp", "sglang", "ollama")
NAMES = {
    "vllm": "vLLM",
    "llamacpp": "llama.cpp (llama-server)",
    "sglang": "SGLang",
    "ollama": "Ollama",
    "openai": "a generic OpenAI-compatible server",
    "reference": "bracket's reference server",
}


# A TCP handshake takes milliseconds; 4 s outlasts two lost SYNs (Linux sends one again after 1 s and 3 s)
# and keeps the preflight of a `snakemake` run, its start included, within 10 s.
CONNECT_TIMEOUT_S = 4.0
CAUSES = ("refused", "handshake", "tls", "name", "network")


class Unreachable(RuntimeError):
    """Nothing can be reached at the URL; the message names the cause and its fix, `cause` is one of CAUSES."""

    def __init__(self, message: str, cause: str = "refused"):
        super().__init__(message)
        self.cause = cause


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from (httpx's, httpcore's, the socket's or ssl's own)."""
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _where(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.host}:{u.port or (443 if u.scheme == 'https' else 80)}"


def unreachable(exc: httpx.HTTPError, url: str, connect_s: float = CONNECT_TIMEOUT_S) -> Unreachable | None:
    """Why a request to `url` reached no server, with the fix; None when `exc` is not a failure to connect
    (a server that answered late, or not in HTTP, was reached)."""
    where, chain = _where(url), _chain(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return Unreachable(
            f"the TCP handshake with {where} never completed: no answer to the connection request within "
            f"{connect_s:.0f} s. A firewall that drops the packets, a wrong host or port, or a server too "
            f"overloaded to accept connections (its queue of pending connections full) does this; check that "
            f"`curl -m 5 {httpx.URL(url).scheme}://{where}/v1/models` answers from this host, then open the port, "
            f"fix engine.base_url, or restart the server",
            "handshake",
        )
    cert = next((e for e in chain if isinstance(e, ssl.SSLCertVerificationError)), None)
    if cert is not None:
        said = cert.verify_message or cert.reason or str(cert)
        return Unreachable(
            f"the TLS certificate of {where} failed verification ({said}), so bracket sends it nothing. bracket "
            f"trusts the certificate authorities of its Python (certifi's) or those of the file SSL_CERT_FILE "
            f"names: export SSL_CERT_FILE=/path/to/ca.pem (the authority that signed the server's certificate, or "
            f"a self-signed certificate itself) before running"
            + (", or set engine.base_url to the host name the certificate is issued for" if "mismatch" in said else "")
            + ", or set engine.base_url to the server's plain http:// address",
            "tls",
        )
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None:
        return Unreachable(
            f"the TLS handshake with {where} failed ({tls.reason or tls}); if the server speaks plain HTTP there, "
            f"set engine.base_url to http://{where}",
            "tls",
        )
    if any(isinstance(e, socket.gaierror) for e in chain):
        return Unreachable(
            f"the host name {httpx.URL(url).host!r} does not resolve on this host ({exc}); fix engine.base_url's host",
            "name",
        )
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return Unreachable(f"connection refused: nothing listens at {where} ({exc})", "refused")
    if isinstance(exc, httpx.ConnectError):
        return Unreachable(f"no connection to {where} ({exc}): check the network route to it", "network")
    return None


@dataclass(frozen=True)
class Identity:
    """What an attached server is: the adapter's kind, its version as it states it, and the evidence."""

    kind: str  # vllm, llamacpp, sglang, ollama, or openai (none of them)
    version: str | None
    evidence: str  # the route and the field that told it, in words

    @property
    def name(self) -> str:
        return NAMES.get(self.kind, self.kind)

    def record(self) -> dict:
        return asdict(self)


def _get(http: httpx.Client, url: str, timeout_s: float) -> httpx.Response | None:
    # Read within a size and a time limit (get_bounded): an endless /metrics ends here as no answer.
    try:
        return get_bounded(http, url, httpx.Timeout(timeout_s, connect=max(timeout_s, CONNECT_TIMEOUT_S)))
    except httpx.HTTPError as exc:
        why = unreachable(exc, url)
        if why is not None:
            raise why from None
        return None  # reached, but no answer in time or not in HTTP: this route tells nothing


def _json(r: httpx.Response | None):
    if r is None or r.status_code != 200:
        return None
    try:
        return r.json()
    except ValueError:
        return None


def _short(v) -> str | None:
    return None if v is None else str(v)[:80]


def identify(http: httpx.Client, base: str, timeout_s: float = 3.0) -> Identity:
    """Ask `base` which engine it is; raises Unreachable, naming the cause, when no server can be reached."""
    base = base.rstrip("/")
    props = _json(_get(http, base + "/props", timeout_s))
    if isinstance(props, dict) and ("default_generation_settings" in props or "build_info" in props):
        return Identity(
            "llamacpp",
            _short(props.get("build_info")),
            "GET /props answered with build_info and default_generation_settings",
        )
    for path in ("/server_info", "/get_server_info"):
        info = _json(_get(http, base + path, timeout_s))
        if isinstance(info, dict) and isinstance(info.get("internal_states"), list) and "version" in info:
            return Identity("sglang", _short(info.get("version")), f"GET {path} answered with internal_states")
    ollama = _json(_get(http, base + "/api/version", timeout_s))
    if isinstance(ollama, dict) and isinstance(ollama.get("version"), str):
        return Identity("ollama", _short(ollama["version"]), "GET /api/version answered with a version")
    ver = _json(_get(http, base + "/version", timeout_s))
    metrics = _get(http, base + "/metrics", timeout_s)
    text = metrics.text if metrics is not None and metrics.status_code == 200 else ""
    if isinstance(ver, dict) and ver.get("version") is not None and "\nvllm:" in "\n" + text:
        return Identity(
            "vllm", _short(ver["version"]), "GET /version answered with a version and /metrics names its samples vllm:"
        )
    return Identity(
        "openai",
        _short(ver.get("version")) if isinstance(ver, dict) else None,
        "none of /props, /server_info, /api/version, /version with vllm: metrics answered as an engine bracket knows",
    )


def contradiction(declared: str, found: Identity, base: str) -> str | None:
    """Why engine.kind `declared` cannot be used on what answers at `base` (None: it can).

    auto takes what is found; openai treats any server as a generic one; a named engine must be that one.
    """
    if declared in ("auto", "openai") or declared == found.kind:
        return None
    if declared == "reference" and (found.version or "").startswith("bracket-reference-server"):
        return None  # it answers as vLLM does (its routes and metrics), and says what it is in /version
    if found.kind == "openai":
        return (
            f"engine.kind is {declared}, but the server at {base} does not answer as {NAMES[declared]} "
            f"({found.evidence}); set engine.kind: auto (or openai) to measure it as a generic "
            f"OpenAI-compatible server, or set engine.base_url to where {NAMES[declared]} listens."
        )
    return (
        f"engine.kind is {declared}, but the server at {base} is {found.name}"
        f"{f' {found.version}' if found.version else ''} ({found.evidence}); set engine.kind: {found.kind} "
        f"(or auto), or set engine.base_url to where {NAMES[declared]} listens."
    )
