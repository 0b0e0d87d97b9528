"""The reference server's schedule: what each request's events carry, when each is due, and the truth a
perfect client reports (the formulas are in bracket.engines.reference_server's docstring).

Only the standard library: the server runs as `python -m bracket.engines.reference_server` or as a file.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

MODEL = "reference-model"
VERSION = "bracket-reference-server 1"
FAULTS = {"http500", "http400", "malformed", "truncate", "disconnect", "no_usage", "error_event", "stall"}
PLAIN_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "stream",
        "stream_options",
        "ignore_eos",
    }
)
# The server reads its API key from here (engines/reference.py names it to the session, which redacts it).
API_KEY_ENV = "BRACKET_REFERENCE_API_KEY"
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "runs")


@dataclass(frozen=True)
class Truth:
    """What a perfect client reports for one request (see the module docstring for formulas)."""

    tokens: int
    events: int
    ttft_s: float
    wall_s: float
    decode_tok_s: float
    tg_tok_s: float | None
    acceptance_length: float
    events_tg_tok_s: float | None  # what counting events instead of tokens gives (llama-benchy 0.4's bug)
    burst: int = 1  # events released together (bursty delivery)
    delivered_ttft_s: float = 0.0  # when the client can see the first event
    delivered_tg_tok_s: float | None = None  # (n - 1) / (first->last event as delivered)


def events_of(n: int, k: int, prefill_token: bool = False) -> int:
    """How many events carry n tokens: k at a time, or the prefill's one token first and then k at a time."""
    return 1 + math.ceil((n - 1) / k) if prefill_token else math.ceil(n / k)


def event_tokens(j: int, n: int, k: int, prefill_token: bool = False) -> tuple[int, int]:
    """Tokens [lo, hi) of event j."""
    if prefill_token:
        return (0, 1) if j == 0 else (1 + (j - 1) * k, min(1 + j * k, n))
    return j * k, min(j * k + k, n)


def truth(
    n: int, rate: float, tokens_per_event: int, ttft: float, burst: int = 1, prefill_token: bool = False
) -> Truth:
    """The exact values of the schedule for a request of `n` tokens (delivered `burst` events at a time;
    with `prefill_token`, the first event carries one token, as a real engine's prefill makes)."""
    if n < 1 or rate <= 0 or tokens_per_event < 1 or ttft < 0 or burst < 1:
        raise ValueError(
            f"need n >= 1, rate > 0, tokens_per_event >= 1, ttft >= 0, burst >= 1; got {n}, {rate}, "
            f"{tokens_per_event}, {ttft}, {burst}"
        )
    k = tokens_per_event
    e = events_of(n, k, prefill_token)
    span = (e - 1) * k / rate
    wall = ttft + span
    tg = (n - 1) / span if span > 0 else None
    ev_tg = (e - 1) / span if span > 0 else None
    first = min(burst, e) - 1  # index of the event whose deadline releases the first group
    seen_span = (e - 1 - first) * k / rate
    return Truth(
        tokens=n,
        events=e,
        ttft_s=ttft,
        wall_s=wall,
        decode_tok_s=n / wall,
        tg_tok_s=tg,
        acceptance_length=n / e,
        events_tg_tok_s=ev_tg,
        burst=burst,
        delivered_ttft_s=ttft + first * k / rate,
        delivered_tg_tok_s=(n - 1) / seen_span if seen_span > 0 else None,
    )


def release_index(j: int, events: int, burst: int) -> int:
    """The event whose deadline releases event j: the last of j's group of `burst`."""
    return min((j // burst) * burst + burst, events) - 1


@dataclass
class RequestLog:
    """The realised timeline of one request, on CLOCK_MONOTONIC."""

    path: str
    t_recv: float
    n_tokens: int = 0
    event_times: list[float] = field(default_factory=list)
    deadlines: list[float] = field(default_factory=list)
    t_done: float | None = None

    @property
    def max_lateness_s(self) -> float:
        return max((t - d for t, d in zip(self.event_times, self.deadlines)), default=0.0)

    def summary(self) -> dict:
        return {
            "path": self.path,
            "t_recv": self.t_recv,
            "n_tokens": self.n_tokens,
            "events": len(self.event_times),
            "t_first_event": self.event_times[0] if self.event_times else None,
            "t_last_event": self.event_times[-1] if self.event_times else None,
            "t_done": self.t_done,
            "max_lateness_s": self.max_lateness_s,
        }


def _token_text(i: int) -> str:
    return " " + WORDS[i % len(WORDS)]


def _token_id(i: int) -> int:
    """Token i's id: WORDS[j] has id j + 1 (0 is [UNK]), as in `word_vocab()`."""
    return i % len(WORDS) + 1


def word_vocab() -> dict[str, int]:
    """The vocabulary a client-side word-level tokenizer needs to count this server's tokens exactly."""
    return {"[UNK]": 0, **{w: j + 1 for j, w in enumerate(WORDS)}}


def _count_words(text: str) -> int:
    return max(1, len(text.split()))


def _check(rate, ttft, tokens_per_event, fault, burst=1, prefill_token=False, body_cost=0.0) -> None:
    if float(body_cost) < 0:
        raise ValueError(f"body_cost must be >= 0 (a fraction of the per-token time), got {body_cost}")
    if not isinstance(prefill_token, bool):
        raise ValueError(f"prefill_token must be true or false, got {prefill_token!r}")
    if int(burst) < 1:
        raise ValueError(f"burst must be >= 1 events released together, got {burst}")
    if not 1 <= int(tokens_per_event) <= 8:
        raise ValueError(f"tokens_per_event must be 1..8, got {tokens_per_event}")
    if float(rate) <= 0 or float(ttft) < 0:
        raise ValueError(f"rate must be > 0 and ttft >= 0, got rate={rate}, ttft={ttft}")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose one of {sorted(FAULTS)}")


def _sleep_until(deadline: float) -> None:
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(left)
