"""The Spark Arena / llama-benchy cell, parameter for parameter.

Seed 004: Spark Arena ranks one cell, 128 generated tokens at a context depth of 16,384 with two
concurrent users, measured by llama-benchy 0.4.0. Its cell, as llama_benchy/runner.py builds it:

- depth (--depth): context tokens, sent as a system message; pp (--pp, default 2048): prompt
  tokens on top of the depth, sent as the user message; the server's prompt_tokens is depth + pp
  (llama-benchy counts the chat template inside the depth);
- tg (--tg): response tokens (bracket pins them with ignore_eos and min_tokens: --exact-tg);
- concurrency (--concurrency): users sending at the same instant, each its own slice of the text;
- chat requests (/v1/chat/completions, streamed, usage and token ids asked for);
- cache: each request is a fresh random slice of the book, so nothing but the template repeats;
  --no-cache adds a unique suffix and cache_prompt false (`cache: no_cache`);
- one warmup run per cell, then --runs runs (bracket: design.warmup_runs and runs_per_block).

Its definitions (llama_benchy/results.py), per run, from each user's start, first response
event, first token event, last token event and tokens:

    pp   = sum_u prompt_tokens_u / (max_u t_first_token,u - min_u t_start,u)    (concurrency > 1)
         = prompt_tokens / (ttfr - latency)                                     (concurrency 1)
    tg   = sum_u decode_u / (max_u t_last,u - min_u t_first,u)                  (concurrency > 1)
         = decode / (t_last - t_first)                                          (concurrency 1)
    ttfr = t_first_response - t_start (ms; a chat stream's role chunk counts),
    e2e_ttft = t_first_token - t_start (ms), est_ppt = ttfr - latency (ms),

decode_u being the tokens after the first token event (n - 1, unless the first event carried
several), and each reported as mean +/- SD (numpy's population SD) over runs. bracket sets
latency to 0 (llama-benchy's --latency-mode none; its default subtracts the mean time of three
GET /v1/models, about a millisecond on one host). bracket's own number for the cell is the window
rate of each run, sum_u (n_u - 1) / (max t_last - min t_first), summarised as a median with a
bootstrap CI; the cell's records are ordinary raw records (started_at, ttft_s, tg_tok_s,
completion_tokens, prompt_tokens), plus ttfr_s and first_event_tokens for llama-benchy's reading.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading

from rich.console import Console
from rich.markup import escape

from bracket.arena import coherence as arena_coherence
from bracket.arena import text as arena_text
from bracket.arena.readings import window_rate
from bracket.experiment.arena_workload import spec
from bracket.measure import session
from bracket.measure.context import BlockContext
from bracket.typed.experiment import Request

console = Console(stderr=True, highlight=False)
_calibrated: dict[tuple, tuple] = {}
_coherence_checked: set[str] = set()


# ---- calibration -----------------------------------------------------------------------------------------


def _solve(f, target: int, start: int, floor: int = 0, tries: int = 6) -> int:
    """Words w with f(w) within 0.5 % (or 2 tokens) of target, by secant steps from `start`."""
    w, best, best_err = max(start, 1), max(start, 1), math.inf
    for _ in range(tries):
        n = f(w)
        if not n:
            raise RuntimeError("the server reported no prompt_tokens; the arena cell cannot set its depth")
        err = abs(n - target)
        if err < best_err:
            best, best_err = w, err
        if err <= max(2, target * 0.005):
            break
        w = max(1, int(round(w * max(target - floor, 1) / max(n - floor, 1))))
    return best


def calibrate(count, words: tuple[str, ...], depth: int, pp: int) -> tuple[int, int]:
    """(context words, prompt words) that make `pp` prompt tokens and `depth + pp` in all, as the server counts.

    count(context, prompt) is the server's prompt_tokens for one request. The prompt is sized
    against the template's own tokens (a request whose prompt is "."); the context then fills
    the rest, so the total is depth + pp, as in llama-benchy (which counts the template inside
    the depth).
    """
    base = count("", ".") - 1  # the template's tokens around a one-token prompt
    if depth == 0:
        return 0, _solve(lambda w: count("", arena_text.join(words[:w])), pp, int(pp * 0.75), floor=base)
    pp_words = _solve(lambda w: count("", arena_text.join(words[:w])) - base, pp, int(pp * 0.75)) if pp else 0
    prompt = arena_text.join(words[len(words) // 2 : len(words) // 2 + pp_words]) if pp_words else ""
    alone = count("", prompt)
    ctx_words = _solve(lambda w: count(arena_text.join(words[:w]), prompt), depth + pp, int(depth * 0.75), floor=alone)
    return ctx_words, pp_words


# llama-benchy's warmup text (client.py `warmup`): the template's tokens are measured around it.
WARMUP_TEXT = "Warmup " * 10


def benchy_sizes(count, tokens, depth: int, pp: int) -> tuple[int, int]:
    """(context tokens, prompt tokens) of each user's slices, as llama-benchy 0.4.0 sizes them.

    llama-benchy (its default --adapt-prompt) measures the chat template's tokens with two one-token
    requests before the cell: delta_user = prompt_tokens(user: W) - tokens(W) and delta_context =
    prompt_tokens(system: W, user: ".") - tokens(W) - tokens("."), W = WARMUP_TEXT. A cell with a
    context cuts depth - delta_context tokens of context and pp tokens of prompt; one without, pp -
    delta_user tokens of prompt. So a context load (context + ".") is depth + 1 tokens as the server
    counts and an inference request depth + pp. The split matters where the server caches whole
    blocks: vLLM's CPU build caches 128-token blocks, so a context a few tokens longer than
    llama-benchy's crosses a block edge that its does not, and the cached share of the prompt differs
    by a block.

    count(context, prompt) is the server's prompt_tokens for one chat request, tokens(text) its
    tokenizer's count of a text alone.
    """
    if depth == 0:
        delta_user = count("", WARMUP_TEXT) - tokens(WARMUP_TEXT)
        return 0, max(1, pp - delta_user)
    delta_context = count(WARMUP_TEXT, arena_text.CONTEXT_LOAD_PROMPT) - tokens(WARMUP_TEXT)
    delta_context -= tokens(arena_text.CONTEXT_LOAD_PROMPT)
    return max(1, depth - delta_context), pp


# ---- latency, as llama-benchy measures it ----------------------------------------------------------------


def latency(http, base: str, model: str, mode: str, timeout_s: float = 30.0) -> float:
    """llama-benchy's --latency-mode: the mean of three round trips, subtracted from ttfr for est_ppt and pp.

    none: 0. api: GET /v1/models, read to its end (llama-benchy's default). generation: a streamed
    one-token chat request ("hello") to its first body line. A mode whose three requests all failed
    gives 0, as llama-benchy's does.
    """
    if mode == "none":
        return 0.0
    if mode not in ("api", "generation"):
        raise ValueError(f"latency mode {mode!r}: one of none, api, generation (llama-benchy --latency-mode)")
    import time

    import httpx

    out = []
    for _ in range(3):
        t = time.perf_counter()
        try:
            if mode == "api":
                http.get(base + "/v1/models", timeout=timeout_s).read()
                out.append(time.perf_counter() - t)
            else:
                body = {
                    "model": model,
                    "messages": [{"role": "user", "content": "hello"}],
                    "max_tokens": 1,
                    "stream": True,
                }
                with http.stream("POST", base + "/v1/chat/completions", json=body, timeout=timeout_s) as r:
                    for _line in r.iter_lines():
                        out.append(time.perf_counter() - t)
                        break
                    for _line in r.iter_lines():
                        pass
        except httpx.HTTPError:
            continue
    return sum(out) / len(out) if out else 0.0


# ---- one run ---------------------------------------------------------------------------------------------


def run_cell(ctx: BlockContext, adapter, wl_name: str, http, base: str, run: int, warm: bool) -> list[dict]:
    """One run of the cell on the context's server: `users` requests sent at one instant; one raw record per user.

    cache: prefix (llama-benchy --enable-prefix-caching) runs two phases, as llama-benchy does: the
    users' contexts with the prompt "." (the context load, records with arena_phase "ctx"), then the
    same contexts with their prompts (arena_phase "inference"), which the server's prefix cache serves.
    """
    exp, block, arm, server_id = ctx.exp, ctx.block, ctx.arm, ctx.server_id
    wl = spec(exp.workloads[wl_name])
    req = exp.request.model_copy(update={"max_tokens": wl["tokens"]})
    model = session.served_name(adapter, exp, http, base)
    words = arena_text.words_of(wl)
    no_cache = wl["cache"] == "no_cache"

    def send(context, prompt, request):
        return arena_text.send(
            adapter,
            http,
            base,
            model,
            context,
            prompt,
            request,
            req.seed,
            arm,
            wl["api"],
            no_cache,
            wl["tg_exact"],
            prefix=wl["cache"] == "prefix",
        )

    key = (server_id, wl_name)
    if key not in _calibrated:
        _calibrated[key] = _calibrate(send, wl, words, req, http, base, model)
    ctx_words, pp_words, tokens, ctx_tokens, pp_tokens, lat = _calibrated[key]
    seed = exp.design.seed
    texts = [
        arena_text.request_texts(
            words, ctx_words, pp_words, seed, wl_name, block.position, run, u, no_cache, tokens, ctx_tokens, pp_tokens
        )
        for u in range(wl["users"])
    ]
    recs = []
    if wl["coherence"] and server_id not in _coherence_checked:  # once per server, before its first arena run
        _coherence_checked.add(server_id)
        recs.append(coherence_record(ctx, wl_name, http, base, model, run, req.timeout_s))
    two = wl["cache"] == "prefix" and wl["depth"] > 0
    phases = (
        [("ctx", [(c, arena_text.CONTEXT_LOAD_PROMPT) for c, _ in texts]), ("inference", texts)]
        if two
        else [(None, texts)]
    )
    for phase, batch in phases:
        out = _concurrently(send, batch, req)
        recs += [
            ctx.record(
                run=run,
                warmup=warm,
                workload=wl_name,
                prompt_id=f"d{wl['depth']}+pp{wl['prompt_tokens']}-user{u + 1}of{wl['users']}"
                + (f"-{phase}" if phase else ""),
                max_tokens=wl["tokens"] if wl["tg_exact"] else None,
                **m.fields(),
                **extra,
                latency_s=lat,
                arena_phase=phase,
                tg_exact=wl["tg_exact"],
                cache_expected=(wl["depth"] if phase == "inference" else 0) if phase else None,
            )
            for u, (m, extra) in enumerate(out)
        ]
        _say(exp, block, wl, wl_name, run, warm, phase, out, recs[-len(out) :])
    return recs


def _calibrate(send, wl: dict, words: list[str], req: Request, http, base: str, model: str) -> tuple:
    """The cell's sizes on this server, found once per server and workload: the words (and, where the server
    counts tokens, the token slices) of llama-benchy's depth and prompt, and the latency it would subtract.
    Returns (ctx_words, pp_words, tokens, ctx_tokens, pp_tokens, latency_s)."""

    def count(context, prompt):
        m = send(context, prompt, req.model_copy(update={"max_tokens": 1}))[0]
        if m.error or not m.prompt_tokens:
            raise RuntimeError(f"the arena cell's calibration request failed: {m.error or 'no prompt_tokens'}")
        return m.prompt_tokens

    tokens = arena_text.token_counter(http, base, model)
    if tokens:  # token slices of llama-benchy's sizes; the word counts only start the search
        ctx_tokens, pp_tokens = benchy_sizes(count, tokens, wl["depth"], wl["prompt_tokens"])
        per_word = tokens(arena_text.join(words[:1000])) / 1000
        ctx_words = max(1, round(ctx_tokens / per_word)) if ctx_tokens else 0
        pp_words = max(1, round(pp_tokens / per_word)) if pp_tokens else 0
    else:  # no tokenizer route (Ollama, SGLang): word counts that make depth + pp as the server counts
        ctx_words, pp_words = calibrate(count, words, wl["depth"], wl["prompt_tokens"])
        ctx_tokens = pp_tokens = 0
    lat = latency(http, base, model, wl["latency"], req.timeout_s)
    return ctx_words, pp_words, tokens, ctx_tokens, pp_tokens, lat


def coherence_record(ctx: BlockContext, wl_name: str, http, base: str, model: str, run: int, timeout_s: float) -> dict:
    """llama-benchy's coherence check of the context's server (bracket.arena.coherence), as a control record."""
    c = arena_coherence.check(http, base, model, timeout_s)
    word = {True: "[green]passed[/]", False: "[red]FAILED[/]", None: "[yellow]not checked[/]"}[c["coherent"]]
    said = escape(repr((c["output_text"] or c["error"] or "")[:80]))  # the server's words, never markup
    console.print(f"  arena {ctx.block.arm:<12} coherence check {word}: {said}")
    return ctx.record(run=run, warmup=True, workload=wl_name, prompt_id="coherence", control="coherence", **c)


def _concurrently(send, batch: list[tuple[str, str]], req: Request) -> list:
    """Each (context, prompt) sent by its own thread, all released at one instant."""
    barrier = threading.Barrier(len(batch))

    def one(ct):
        barrier.wait()
        return send(ct[0], ct[1], req)

    with concurrent.futures.ThreadPoolExecutor(len(batch)) as pool:
        return list(pool.map(one, batch))


def _say(exp, block, wl, wl_name, run, warm, phase, out, recs) -> None:
    w = window_rate(recs)
    tag = "warmup" if warm else f"run {run - exp.design.warmup_runs + 1}/{exp.design.runs_per_block}"
    rate = f"{w['window_tok_s']:8.1f} tok/s" if w["window_tok_s"] else "   (no rate)"
    errs = "; ".join(sorted({m.error for m, _ in out if m.error}))[:300]
    console.print(
        f"  arena {block.arm:<12} {wl_name:<6} {(phase or ''):<9} {tag:<9} {rate} over {wl['users']} users "
        f"at {out[0][0].prompt_tokens} prompt tokens" + (f"  [red]{errs}[/]" if errs else "")
    )
