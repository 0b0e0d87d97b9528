"""Timing of engines' native streaming routes (SGLang /generate, Ollama /api/generate).

The same conventions as bracket.client.stream_completion, which times the OpenAI routes: t0 just
before the request is sent, the first token at the first event that brings new text, the end when
the stream closes; decode rate = completion_tokens / wall time, tg rate = (n - 1) / (t_last -
t_first); token counts from the engine's own counts in the response, never from events. Errors are
recorded in the measurement, not raised.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Callable

import httpx

from bracket.client import Measurement


@dataclass(frozen=True)
class Counts:
    """What the engine said about the request once it finished."""

    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None


def timed_stream(http: httpx.Client, url: str, body: dict, timeout_s: float, *, framing: str,
                 new_text: Callable[[dict], str], is_last: Callable[[dict], bool],
                 counts: Callable[[list[dict]], Counts]) -> tuple[Measurement, list[dict]]:
    """POST `body` and time its stream; return the measurement and every parsed event.

    framing: "sse" (`data: {...}` lines ending with `data: [DONE]`) or "ndjson" (one JSON object
    per line, ending with the object for which is_last() holds). new_text(event) returns the text
    an event adds (stateful callers turn cumulative text into increments); counts(events) reads
    the engine's token counts and finish reason from the finished stream.
    """
    if framing not in ("sse", "ndjson"):
        raise ValueError(f"framing must be 'sse' or 'ndjson', got {framing!r}")
    m = Measurement(started_at=time.time())
    events: list[dict] = []
    parts: list[str] = []
    t_first = t_last = None
    t0 = time.perf_counter()
    end_marker = "[DONE]" if framing == "sse" else "the final object (done: true)"
    try:
        request = http.build_request("POST", url, json=body, timeout=timeout_s)
        t0 = time.perf_counter()
        with contextlib.closing(http.send(request, stream=True)) as resp:
            if resp.status_code != 200:
                text = resp.read().decode("utf-8", errors="replace")[:500]
                m.error = f"HTTP {resp.status_code}: {text}"
                m.wall_s = time.perf_counter() - t0
                return m, events
            done = False
            for line in resp.iter_lines():
                if framing == "sse":
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                else:
                    payload = line.strip()
                    if not payload:
                        continue
                try:
                    event = json.loads(payload)
                except json.JSONDecodeError:
                    m.error = f"malformed stream event: {payload[:200]!r}"
                    break
                if not isinstance(event, dict):
                    m.error = f"unexpected stream event: {payload[:200]!r}"
                    break
                if event.get("error"):
                    m.error = f"server error in stream: {str(event['error'])[:300]}"
                    break
                now = time.perf_counter()
                events.append(event)
                text = new_text(event)
                if text:
                    m.stream_events += 1
                    parts.append(text)
                    if t_first is None:
                        t_first = now
                    t_last = now
                if framing == "ndjson" and is_last(event):
                    done = True
                    break
            end = time.perf_counter()
            if not done and m.error is None:
                m.error = f"stream ended before {end_marker}"
    except httpx.TimeoutException:
        m.error = f"timed out after {timeout_s:g} s without data from the server (request.timeout_s)"
        end = time.perf_counter()
    except httpx.HTTPError as exc:
        m.error = f"{type(exc).__name__}: {exc}"
        end = time.perf_counter()
    m.wall_s = end - t0
    m.output_text = "".join(parts)
    m.output_sha256 = hashlib.sha256(m.output_text.encode("utf-8")).hexdigest()
    if t_first is not None:
        m.ttft_s = t_first - t0
    c = counts(events) if events else Counts()
    m.completion_tokens, m.prompt_tokens, m.cached_tokens = c.completion_tokens, c.prompt_tokens, c.cached_tokens
    m.finish_reason = c.finish_reason
    if m.completion_tokens is None and m.error is None:
        m.error = "no token counts in the response's final event"
    if m.completion_tokens and m.wall_s:
        m.decode_tok_s = m.completion_tokens / m.wall_s
        if t_first is not None and t_last is not None and t_last > t_first and m.completion_tokens > 1:
            m.tg_tok_s = (m.completion_tokens - 1) / (t_last - t_first)
    return m, events

