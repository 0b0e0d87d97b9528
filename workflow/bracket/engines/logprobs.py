"""A text's negative log-likelihood per token, from a server's own log-probabilities of its tokens.

The quality gate's held-out perplexity (bracket.stats.quality.nll_gate) needs, for each document, the
log-probability the served model gives each of its tokens after the ones before (teacher forcing). What
each engine offers, read in its source and measured on the embedded model (tests/test_logprobs_live.py):

- **vLLM** (0.32, CPU build): `prompt_logprobs` in `/v1/completions` (not with `stream: true`). With
  `prompt_logprobs: 0` the answer's `choices[0].prompt_logprobs` is a list with one entry per prompt token:
  `null` for the first (nothing precedes it), then `{token_id: {logprob, rank, decoded_token}}` holding the
  prompt's own token alone. `max_tokens` must be at least 1 (0 only with `echo`); one token is generated
  and ignored. A `-inf` log-probability is written as -9999.0 (`clamp_prompt_logprobs`).
- **llama.cpp** (llama-server from the llama-cpp-python 0.3.36 sdist): no prompt log-probabilities.
  `n_probs` (or `logprobs` on `/v1/completions`) reports the *generated* tokens only; `/v1/completions`
  with `echo: true` answers but leaves the prompt out. So the document is generated instead: `/tokenize`
  gives its tokens t0..tn, `/completion` is sent t0 as the prompt with a grammar of token ids
  (`root ::= <[t1]> <[t2]> ...`, grammars/README.md: "Token ID") that admits exactly t1..tn, `n_predict` n,
  temperature 0 and `n_probs: 1`. Without `post_sampling_probs` the reported `logprob` of each generated
  token is the softmax of the raw logits over the whole vocabulary (`get_token_probabilities` in
  llama.cpp's server-common.cpp, before the grammar or any sampler), which is the teacher-forced
  log-probability the NLL needs.

Both score tokens 1..n given token 0 (and any BOS the tokenizer adds), so the two engines' NLL of a text
with one tokenizer are the same quantity. Everything a server sends is untrusted: the answer's size is
bounded (`MAX_RESPONSE_BYTES`), its time too, every log-probability must be a finite number <= 0 (a
rounding slack of 1e-4 is read as 0) and above -1000, and the tokens scored must be the document's.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import httpx

MAX_RESPONSE_BYTES = 32 << 20
MAX_SCORED_TOKENS = 16_384
MAX_TEXT_CHARS = 1_000_000
LOGPROB_FLOOR = -1000.0  # vLLM writes -inf as -9999; no real token's log-probability is this low
ROUNDING_SLACK = 1e-4


class Route(StrEnum):
    """How the log-probabilities were asked for."""

    VLLM_PROMPT_LOGPROBS = "vllm /v1/completions prompt_logprobs"
    LLAMACPP_FORCED = "llama.cpp /completion, token grammar, n_probs"


class LogprobError(RuntimeError):
    """A server that did not give a text's token log-probabilities; the message says what came and what to do."""


@dataclass(frozen=True)
class TextNll:
    """One text scored: the tokens scored (all but the first), their log-probabilities, and their sum's negative."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    route: Route

    @property
    def tokens(self) -> int:
        return len(self.logprobs)

    @property
    def nll(self) -> float:
        """Summed negative log-likelihood in nats."""
        return -math.fsum(self.logprobs)

    @property
    def nll_per_token(self) -> float:
        return self.nll / self.tokens


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def post_json(http: httpx.Client, url: str, body: dict, timeout_s: float, limit: int = MAX_RESPONSE_BYTES) -> dict:
    """POST `body` and read the JSON object answered, at most `limit` bytes within `timeout_s` altogether.

    Raises LogprobError for an error status (with the start of its body), a body past either limit,
    a body that is not one JSON object (NaN and Infinity are refused), or no answer.
    """
    path = httpx.URL(url).path
    deadline = time.monotonic() + timeout_s
    try:
        with http.stream("POST", url, json=body, timeout=timeout_s) as r:
            got, pieces = 0, []
            for data in r.iter_bytes():
                got += len(data)
                if got > limit:
                    raise LogprobError(f"POST {path} answered more than {limit:,} bytes; read no further")
                if time.monotonic() > deadline:
                    raise LogprobError(f"POST {path} did not finish within {timeout_s:g} s; raise the timeout")
                pieces.append(data)
            status = r.status_code
    except httpx.HTTPError as exc:
        raise LogprobError(f"POST {path}: no answer ({type(exc).__name__}: {exc}); is the server up at {url}?") from exc
    raw = b"".join(pieces)
    if status != 200:
        excerpt = raw[:300].decode("utf-8", "replace")
        raise LogprobError(f"POST {path} answered HTTP {status}: {excerpt!r}")
    try:
        obj = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise LogprobError(f"POST {path} answered a body that is not JSON ({str(exc)[:120]})") from None
    if not isinstance(obj, dict):
        raise LogprobError(f"POST {path} answered JSON that is not an object ({type(obj).__name__})")
    return obj


def _logprob(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LogprobError(f"{where}: the log-probability {value!r} is not a finite number")
    if value > ROUNDING_SLACK or value < LOGPROB_FLOOR:
        raise LogprobError(f"{where}: the log-probability {value!r} lies outside [{LOGPROB_FLOOR:g}, 0]")
    return min(float(value), 0.0)


def _token_id(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LogprobError(f"{where}: the token id {value!r} is not a non-negative integer")
    return value


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text:
        raise ValueError("the text to score must be non-empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"the text is {len(text):,} characters, more than the {MAX_TEXT_CHARS:,} scored; split it")


def vllm_nll(http: httpx.Client, base_url: str, model: str, text: str, timeout_s: float = 120.0) -> TextNll:
    """A text's token log-probabilities from vLLM's `prompt_logprobs` (the module docstring says how)."""
    _check_text(text)
    body = {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0}
    obj = post_json(http, base_url.rstrip("/") + "/v1/completions", body, timeout_s)
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LogprobError("vLLM answered no choices; the server may not be vLLM (prompt_logprobs is vLLM's field)")
    entries = choices[0].get("prompt_logprobs")
    if not isinstance(entries, list) or len(entries) < 2:
        raise LogprobError(
            "vLLM answered no prompt_logprobs for a text of two tokens or more: a server that drops the field "
            "(an older vLLM, or another engine) cannot score text; use a vLLM that has it"
        )
    if len(entries) - 1 > MAX_SCORED_TOKENS:
        raise LogprobError(f"{len(entries) - 1:,} tokens, more than the {MAX_SCORED_TOKENS:,} scored; split the text")
    if entries[0] is not None:
        raise LogprobError("vLLM gave the first prompt token a log-probability; nothing precedes it, so none is read")
    ids, lps = [], []
    for i, entry in enumerate(entries[1:], start=1):
        where = f"prompt token {i}"
        if not isinstance(entry, dict) or len(entry) != 1:
            raise LogprobError(
                f"{where}: expected the prompt's own token alone (prompt_logprobs 0), got {entry!r:.120}"
            )
        ((tid, info),) = entry.items()
        try:
            tid = int(tid)
        except (TypeError, ValueError):
            raise LogprobError(f"{where}: the token id {tid!r:.40} is not an integer") from None
        if not isinstance(info, dict):
            raise LogprobError(f"{where}: expected {{logprob, rank, decoded_token}}, got {info!r:.120}")
        ids.append(_token_id(tid, where))
        lps.append(_logprob(info.get("logprob"), where))
    return TextNll(tuple(ids), tuple(lps), Route.VLLM_PROMPT_LOGPROBS)


def llamacpp_tokens(http: httpx.Client, base_url: str, text: str, timeout_s: float = 30.0) -> list[int]:
    """The text's tokens as llama-server counts them (`/tokenize`, with the model's special tokens, e.g. a BOS)."""
    obj = post_json(http, base_url.rstrip("/") + "/tokenize", {"content": text, "add_special": True}, timeout_s)
    tokens = obj.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        raise LogprobError("llama-server's /tokenize answered no tokens; is it llama-server?")
    if len(tokens) - 1 > MAX_SCORED_TOKENS:
        raise LogprobError(f"{len(tokens) - 1:,} tokens, more than the {MAX_SCORED_TOKENS:,} scored; split the text")
    return [_token_id(t, f"/tokenize token {i}") for i, t in enumerate(tokens)]


def forcing_grammar(tokens: Sequence[int]) -> str:
    """A GBNF grammar that admits exactly `tokens`, by id, in order (llama.cpp's `<[id]>` token terminals)."""
    if not tokens:
        raise ValueError("a grammar needs at least one token")
    return "root ::= " + " ".join(f"<[{int(t)}]>" for t in tokens)


def llamacpp_nll(http: httpx.Client, base_url: str, text: str, timeout_s: float = 300.0) -> TextNll:
    """A text's token log-probabilities from llama-server, by generating the text under a token grammar.

    The module docstring says why and how. The server must allow n_predict of the text's length (its
    context must hold the text).
    """
    _check_text(text)
    tokens = llamacpp_tokens(http, base_url, text)
    if len(tokens) < 2:
        raise LogprobError("the text is one token long; nothing follows the first token to score")
    forced = tokens[1:]
    body = {
        "prompt": tokens[:1],
        "n_predict": len(forced),
        "temperature": 0,
        "n_probs": 1,
        "post_sampling_probs": False,
        "grammar": forcing_grammar(forced),
        "cache_prompt": False,
        "stream": False,
    }
    obj = post_json(http, base_url.rstrip("/") + "/completion", body, timeout_s)
    probs = obj.get("completion_probabilities")
    if not isinstance(probs, list) or len(probs) != len(forced):
        got = len(probs) if isinstance(probs, list) else "no"
        raise LogprobError(
            f"llama-server gave {got} token probabilities for the {len(forced)} forced tokens; its context "
            "(--ctx-size) must hold the text, and n_probs must be supported"
        )
    lps = []
    for i, (entry, want) in enumerate(zip(probs, forced, strict=True), start=1):
        where = f"forced token {i}"
        if not isinstance(entry, dict):
            raise LogprobError(f"{where}: expected {{id, logprob, ...}}, got {entry!r:.120}")
        if _token_id(entry.get("id"), where) != want:
            raise LogprobError(f"{where}: the server generated token {entry.get('id')!r}, not the text's {want}")
        lps.append(_logprob(entry.get("logprob"), where))
    return TextNll(tuple(forced), tuple(lps), Route.LLAMACPP_FORCED)


def text_nll(kind: str, http: httpx.Client, base_url: str, model: str, text: str, timeout_s: float = 300.0) -> TextNll:
    """A text's token log-probabilities from the engine `kind` ("vllm" or "llamacpp") at `base_url`."""
    if kind == "vllm":
        return vllm_nll(http, base_url, model, text, timeout_s)
    if kind == "llamacpp":
        return llamacpp_nll(http, base_url, text, timeout_s)
    raise ValueError(f"no prompt log-probabilities from engine {kind!r}: vllm and llamacpp give them")
