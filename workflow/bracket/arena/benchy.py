"""llama-benchy 0.4.0's numbers from bracket's raw arena records, computed as llama-benchy computes them.

llama-benchy (llama_benchy/client.py) stamps each network read of a stream once (aiohttp's
iter_any), keeps the chunks that carry text (content, else reasoning_content, else reasoning) with
that read's time and their token_ids, and gives each token a time:

- when every text chunk has token_ids, a chunk of one token gets its read's time, a chunk of k > 1
  tokens spreads them evenly over (previous token's time, its read's time]; the first chunk's
  tokens all get its read's time (the window before the first token is empty);
- else the usage's completion_tokens are spread evenly from the first to the last text chunk's
  time (one chunk, or no spread: all at the first chunk's time).

Then (llama_benchy/results.py, _process_batch and add), per run ("batch") of concurrent requests:

    decode tokens_u = tokens whose time is later than u's first token time
    tg_req_u = decode tokens_u / (last - first token time of u)     only where both are > 0
    tg_batch = sum_u decode tokens_u / (max_u last token - min_u first token)   only where > 0
    pp_req_u = prompt_u / max(0, ttfr_u - latency)                  only where > 0
    pp_batch = sum_u prompt_u / (max_u first token - min_u start)
    peak = tokens in the busiest 1 s window of the batch's token times (over the whole span
           when it is shorter than 1 s and longer than 0), per batch and per request
    prompt_u = the server's prompt_tokens where within 20 % of the expected count, else the expected

and each metric is the mean and population SD over its values: at concurrency 1, the requests'
pp and tg; above, the batches'. A request or batch whose window is 0 (a stream that arrived in one
read) gives no tg and is dropped: bracket counts those drops (`dropped`) instead of hiding them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Request:
    """One request as llama-benchy's RequestResult holds it (times in seconds on one clock)."""

    start: float
    first_response: float | None
    first_token: float | None
    end: float
    prompt_tokens: int
    total_tokens: int
    token_times: list[float] = field(default_factory=list)


def token_times(
    first_token: float, chunks: list[tuple[float, int | None]], usage_tokens: int | None, start: float
) -> tuple[int, list[float]]:
    """(total tokens, each token's time) from the text chunks [(read time, token ids or None)].

    llama_benchy.client.LLMClient._finalize_stream_tokens with its two helpers; without token ids
    or usage llama-benchy tokenizes the text with the model's tokenizer or, without one, counts one
    token per chunk: here one per chunk.
    """
    if not chunks:
        return (usage_tokens or 0), []
    if all(n is not None for _, n in chunks):
        times: list[float] = []
        for t, n in chunks:
            if n <= 0:
                continue
            if n == 1:
                times.append(t)
                continue
            last = times[-1] if times else first_token if first_token is not None else start
            times += [last + (t - last) * (i + 1) / n for i in range(n)]
        return sum(n for _, n in chunks), times
    chunk_times = [t for t, _ in chunks]
    if usage_tokens is None:  # llama-benchy without a tokenizer: one token per chunk, at its read's time
        return len(chunks), chunk_times
    n = usage_tokens
    if n <= 0:
        return n, []
    if n == 1 or len(chunk_times) == 1 or chunk_times[-1] <= chunk_times[0]:
        return n, [chunk_times[0]] * n
    step = (chunk_times[-1] - chunk_times[0]) / (n - 1)
    return n, [chunk_times[0] + step * i for i in range(n)]


def request_of(rec: dict) -> Request | None:
    """A raw arena record as llama-benchy's RequestResult, or None for an error (llama-benchy skips those).

    Times are started_at plus the offsets the record keeps; a record without text_chunks (an arena
    cell sent with api: completions, or records written before bracket kept them) has its tokens
    spread evenly from its first to its last token time, which is llama-benchy's reading where no
    token ids came.
    """
    if rec.get("error") or rec.get("started_at") is None:
        return None
    t0 = float(rec["started_at"])
    ttft, n = rec.get("ttft_s"), rec.get("completion_tokens")
    ttfr = rec.get("ttfr_s")
    first = t0 + ttft if ttft is not None else None
    chunks = rec.get("text_chunks")
    if chunks is not None:
        chunks = [(t0 + float(t), None if k is None else int(k)) for t, k in chunks]
    elif first is not None and n:
        last = first + (n - 1) / rec["tg_tok_s"] if rec.get("tg_tok_s") else first
        chunks = [(first, None), (last, None)] if last > first else [(first, None)]
    total, times = token_times(first, chunks or [], n, t0)
    return Request(
        start=t0,
        first_response=t0 + ttfr if ttfr is not None else first,
        first_token=first,
        end=t0 + (rec.get("wall_s") or 0.0),
        prompt_tokens=int(rec.get("prompt_tokens") or 0),
        total_tokens=total,
        token_times=times,
    )


def decode_tokens(times: list[float]) -> int:
    """Tokens later than the first token's time (llama-benchy's _count_tokens_after_first_timestamp)."""
    return sum(1 for t in times if t > times[0]) if len(times) >= 2 else 0


def peak(times: list[float], window: float = 1.0) -> float:
    """llama-benchy's peak t/s: the most tokens within `window` seconds (a window ending at a token,
    tokens at exactly window seconds before it excluded) / window; over the whole span instead when
    the span is shorter than the window and not zero (_calculate_peak_throughput)."""
    if not times:
        return 0.0
    ts = sorted(times)
    span = ts[-1] - ts[0]
    if 0 < span < window:
        return len(ts) / span
    best, lo = 0, 0
    for hi, t in enumerate(ts):
        while lo < hi and ts[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best / window


@dataclass
class Batch:
    """One run's values as llama-benchy aggregates them, with what it silently dropped."""

    pp_req: list[float] = field(default_factory=list)
    tg_req: list[float] = field(default_factory=list)
    ttfr_s: list[float] = field(default_factory=list)
    est_ppt_s: list[float] = field(default_factory=list)
    e2e_ttft_s: list[float] = field(default_factory=list)
    peak_req: list[float] = field(default_factory=list)
    pp: float | None = None
    tg: float | None = None
    peak: float | None = None
    requests: int = 0
    tg_req_dropped: int = 0  # requests with tokens whose first-to-last window was 0 (one read)
    tg_dropped: bool = False  # the batch's tg window was 0


def batch(reqs: list[Request | None], expected_prompt: int, latency_s: float) -> Batch:
    """llama_benchy.results.BenchmarkResults._process_batch for one run."""
    out = Batch()
    ok = [r for r in reqs if r is not None]
    out.requests = len(ok)
    if not ok:
        return out
    prompt_sum = 0
    firsts, lasts, all_times = [], [], []
    for r in ok:
        all_times += r.token_times
        if r.token_times:
            out.peak_req.append(peak(r.token_times))
            lasts.append(r.token_times[-1])
        elif r.end:
            lasts.append(r.end)
        p = expected_prompt
        if r.prompt_tokens > 0 and abs(r.prompt_tokens - expected_prompt) < expected_prompt * 0.2:
            p = r.prompt_tokens
        prompt_sum += p
        ttfr = est = 0.0
        if r.first_response:
            ttfr = r.first_response - r.start
            out.ttfr_s.append(ttfr)
        if r.first_token:
            firsts.append(r.first_token)
            est = max(0.0, ttfr - latency_s)
            out.e2e_ttft_s.append(r.first_token - r.start)
            out.est_ppt_s.append(est)
        if est > 0:
            out.pp_req.append(p / est)
        if r.total_tokens > 1 and len(r.token_times) > 1:
            window = r.token_times[-1] - r.token_times[0]
            dec = decode_tokens(r.token_times)
            if window > 0 and dec > 0:
                out.tg_req.append(dec / window)
            else:
                out.tg_req_dropped += 1
        elif r.total_tokens > 1:
            out.tg_req_dropped += 1
    if firsts:
        pp_window = max(firsts) - min(r.start for r in ok)
        if pp_window > 0:
            out.pp = prompt_sum / pp_window
        tg_window = (max(lasts) if lasts else max(r.end for r in ok)) - min(firsts)
        dec = sum(decode_tokens(r.token_times) for r in ok)
        if tg_window > 0 and dec > 0:
            out.tg = dec / tg_window
        else:
            out.tg_dropped = True
    if all_times:
        out.peak = peak(all_times)
    return out


def metric(values: list[float], scale: float = 1.0) -> dict | None:
    """llama-benchy's BenchmarkMetric: mean, population SD (numpy's default), the raw values."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return None
    return {"mean": float(np.mean(v)) * scale, "std": float(np.std(v)) * scale, "values": [x * scale for x in v]}


def cell(batches: list[Batch], concurrency: int) -> dict:
    """One llama-benchy BenchmarkRun's metrics (BenchmarkResults.add), plus what was dropped and why."""
    req = [x for b in batches for x in b.pp_req]
    tg_req = [x for b in batches for x in b.tg_req]
    pp = metric(req if concurrency == 1 else [b.pp for b in batches if b.pp is not None])
    tg = metric(tg_req if concurrency == 1 else [b.tg for b in batches if b.tg is not None])
    return {
        "pp_throughput": pp,
        "pp_req_throughput": pp if concurrency == 1 else metric(req),
        "tg_throughput": tg,
        "tg_req_throughput": tg if concurrency == 1 else metric(tg_req),
        "peak_throughput": metric([b.peak for b in batches if b.peak is not None]),
        "peak_req_throughput": metric([x for b in batches for x in b.peak_req]),
        "ttfr": metric([x for b in batches for x in b.ttfr_s], 1000),
        "est_ppt": metric([x for b in batches for x in b.est_ppt_s], 1000),
        "e2e_ttft": metric([x for b in batches for x in b.e2e_ttft_s], 1000),
    }


def dropped(batches: list[Batch], concurrency: int) -> dict:
    """What llama-benchy leaves out of tg without a word: requests (c1) or runs (c > 1) whose window was 0."""
    if concurrency == 1:
        return {
            "tg": sum(b.tg_req_dropped for b in batches),
            "of": sum(b.requests for b in batches),
            "unit": "requests",
            "reason": "the stream's tokens arrived in one network read (window 0)",
        }
    return {
        "tg": sum(b.tg_dropped for b in batches),
        "of": len(batches),
        "unit": "runs",
        "reason": "the run's tokens arrived with no time between the first and the last (window 0)",
    }
