"""How many tokens a prompt is, counted as the server will count it, before any block.

A prompt over the context in tokens fails every request of its block with HTTP 400, a minute after
the server started. Bytes only bound tokens from below (bracket.experiment.prompts), and a 12 KB prompt can be
4,000 tokens of a 2,048-token context, so the count comes from the model's own tokenizer:

- the model's `tokenizer.json` on this host, read with the `tokenizers` library (the file vLLM and
  SGLang load for the model; special tokens added as a completion request adds them);
- an attached server's own tokenizer, through its tokenize route: vLLM `POST /tokenize` {model,
  prompt, add_special_tokens} -> {count, max_model_len, tokens}; llama.cpp `POST /tokenize`
  {content, add_special} -> {tokens} (docs/engine-apis.md, 2.8 and 3.6);
- neither: `None`, with the reason, and the caller keeps the byte bound and says so.

The context the server holds comes from what it reports, where the engine reports it: vLLM's
/v1/models `max_model_len`, llama.cpp's /props `default_generation_settings.n_ctx` (one slot's).
Everything a server sends is untrusted: only an integer in a sane range is read.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import httpx

from bracket.engines.base import get_json

# No prompt or context of a real model is this long; a larger "count" is a server's mistake or a lie.
MAX_SANE = 100_000_000


class CountError(RuntimeError):
    """A counter that answered once and then failed; the check falls back to the byte bound."""


def _sane(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_SANE else None


@dataclass(frozen=True)
class LocalCounter:
    """The model's tokenizer.json, through the `tokenizers` library."""

    path: Path

    @property
    def source(self) -> str:
        return f"the model's tokenizer, {self.path}"

    def count(self, text: str, special: bool = True) -> int:
        return len(_load(str(self.path)).encode(text, add_special_tokens=special).ids)


@functools.lru_cache(maxsize=4)
def _load(path: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def local(model_dir: Path | None) -> tuple[LocalCounter | None, str]:
    """A counter from the model's tokenizer.json, or None and why not (in words for the user)."""
    if model_dir is None:
        return None, "the model's files are not on this host"
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None, f"{model_dir} has no tokenizer.json"
    try:
        _load(str(path))
    except ImportError:
        return None, "the tokenizers package is not installed (pip install tokenizers)"
    except Exception as exc:  # noqa: BLE001 (the library raises its own Exception for a file it cannot read)
        return None, f"{path} could not be read by the tokenizers library ({str(exc)[:120]})"
    return LocalCounter(path), ""


class ServerCounter:
    """An attached server's own tokenizer, through its tokenize route (vLLM's or llama.cpp's shape)."""

    def __init__(self, http: httpx.Client, base: str, kind: str, model: str, name: str, timeout_s: float = 10.0):
        self.http, self.base, self.kind, self.model, self.name = http, base, kind, model, name
        self.timeout_s = timeout_s

    @property
    def source(self) -> str:
        return f"{self.name}'s own tokenizer, {self.base}/tokenize"

    def body(self, text: str, special: bool) -> dict:
        if self.kind == "llamacpp":  # its completions add BOS (tokenize_mixed(..., true, true)); /tokenize does not
            return {"content": text, "add_special": special}
        return {"model": self.model, "prompt": text, "add_special_tokens": special}

    def count(self, text: str, special: bool = True) -> int:
        try:
            r = self.http.post(self.base + "/tokenize", json=self.body(text, special), timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise CountError(f"{self.base}/tokenize did not answer ({type(exc).__name__})") from None
        if r.status_code != 200:
            raise CountError(f"{self.base}/tokenize answered HTTP {r.status_code}")
        try:
            doc = r.json()
        except ValueError:
            raise CountError(f"{self.base}/tokenize did not answer JSON") from None
        doc = doc if isinstance(doc, dict) else {}
        tokens = doc.get("tokens")
        n = _sane(doc.get("count")) if self.kind != "llamacpp" else None
        if n is None and isinstance(tokens, list):
            n = _sane(len(tokens))
        if n is None:
            raise CountError(f"{self.base}/tokenize answered without a token count")
        return n


TOKENIZE_KINDS = ("vllm", "llamacpp")


def server(http: httpx.Client, base: str, kind: str, model: str, name: str) -> tuple[ServerCounter | None, str]:
    """The attached server's tokenize route, tried once on a short text; None and why not."""
    if kind not in TOKENIZE_KINDS:
        return None, f"{name} has no tokenize route bracket knows (vLLM and llama.cpp have one)"
    counter = ServerCounter(http, base, kind, model, name)
    try:
        counter.count("bracket")
    except CountError as exc:
        return None, str(exc)
    return counter, ""


def server_context(
    http: httpx.Client, base: str, kind: str, model: str | None = None, timeout_s: float = 5.0
) -> tuple[int, str] | None:
    """(context in tokens, where it was read) as the attached server reports it, or None."""
    models = get_json(http, base + "/v1/models", timeout_s)
    data = models.get("data") if isinstance(models, dict) else None
    entries = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
    entries.sort(key=lambda d: d.get("id") != model)  # the served model's entry first
    for d in entries:
        n = _sane(d.get("max_model_len"))
        if n:
            return n, f"{base}/v1/models max_model_len"
    if kind == "llamacpp":
        props = get_json(http, base + "/props", timeout_s)
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n = _sane(settings.get("n_ctx")) if isinstance(settings, dict) else None
        if n:
            return n, f"{base}/props n_ctx (one slot's context)"
        for d in entries:
            meta = d.get("meta")
            n = _sane(meta.get("n_ctx")) if isinstance(meta, dict) else None
            if n:
                return n, f"{base}/v1/models meta.n_ctx"
    return None
