"""The arena cell's long-context text and its requests, through each engine's own stream.

Text. llama-benchy fills the context from a book (by default Project Gutenberg's "The Adventures of
Sherlock Holmes", downloaded at run time): each request takes `depth + pp` tokens from a random
start in the tokenized book, the first `depth` as a system message and the rest as the user's
prompt (llama_benchy/prompts.py). bracket cannot download a book here, and repeating the
experiment's own prompts would put the same n-grams in every context (which inflates n-gram
acceptance and prompt-lookup drafting). So the text is built deterministically: sentences of
common English words drawn with Zipf weights from a seeded generator, 120,000 words that never
repeat as a whole. A workload's `text` names a file (a book you have, llama-benchy's Sherlock
Holmes included) to use instead. Slices are cut at word boundaries from a start drawn by a
seeded generator per (run, user), so each user's context differs and the cell reruns the same.

Requests. `api: chat` sends what llama-benchy sends: messages [system: context, user: prompt],
streamed, usage requested, `return_token_ids` (vLLM attaches the ids each chunk carries, which
llama-benchy uses to place tokens in time). The route is the engine's own chat stream:
/v1/chat/completions (OpenAI SSE) for vLLM, llama.cpp and OpenAI-compatible servers, /api/chat
(NDJSON) for Ollama. SGLang's adapter measures through its native /generate, which takes raw text
and applies no chat template, so a chat cell on engine.kind sglang is refused at validation
(`api: completions` sends context + prompt as one text through /generate instead). `api:
completions` goes through the adapter's own measure (its native stream) for every engine.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

from bracket.engines.ollama import counts
from bracket.typed.experiment import Arm, Request
from bracket.wire.client import Counts, Measurement, _openai_counts, timed_stream

# Common English words, most frequent first (drawn with weight 1 / rank).
WORDS = (
    "the of and to a in that it was he i his you for had is with she as on at her be my by which not but have "
    "from this him all they were so are one there an we said when what no their been if would who or more me "
    "out up into them then could will do like some time about very any over only than little man upon its "
    "now can other before after old two know made our way how see down well came should great may day these "
    "first long must good where us much through back never most house again such still without hand eyes "
    "those head own came being under last just found thought went night might room face told young left "
    "while door something nothing every place once both right away looked say life take began asked seemed "
    "against three each side light between heard yet among water cannot words things morning himself work "
    "turned small always country letter street several having since voice lady mind why gave round moment "
    "across behind half whole friend evening case matter window table poor answered believe perhaps already "
    "passed people feet open quite course white paper known minutes front deep along above hours given "
    "reason return story road woman black strange stood certain friends lay word clear held ground death "
    "brought indeed less mother father power doubt kind hope short year London garden river station train "
    "clock fire chair glass coat hat key lamp stone field wall village town letter study question answer "
    "silence business master servant doctor inspector detective gentleman client visitor money gold watch "
    "boot glove pipe candle fog rain wind shadow corner office bank"
).split()
TEXT_WORDS = 120_000
TEXT_SEED = 20140613


@lru_cache(maxsize=4)
def built_text(n_words: int = TEXT_WORDS, seed: int = TEXT_SEED) -> tuple[str, ...]:
    """The deterministic text, as words (punctuation attached): same arguments, same words, on any machine."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    out: list[str] = []
    while len(out) < n_words:
        sentence = rng.choices(WORDS, weights, k=rng.randint(6, 22))
        sentence[0] = sentence[0].capitalize()
        if len(sentence) > 9 and rng.random() < 0.4:
            cut = rng.randint(3, len(sentence) - 4)
            sentence[cut] += ","
        sentence[-1] += "." if rng.random() < 0.85 else "?"
        if rng.random() < 0.18:
            sentence[-1] += "\n\n"
        out += sentence
    return tuple(out[:n_words])


@lru_cache(maxsize=4)
def file_text(path: str) -> tuple[str, ...]:
    """A text file's words (Gutenberg header cut as llama-benchy cuts it)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    start = text.find("*** START OF THE PROJECT GUTENBERG EBOOK")
    words = tuple((text[start:] if start != -1 else text).split())
    if len(words) < 1000:
        raise ValueError(f"{path}: {len(words)} words; an arena context needs a long text (a book).")
    return words


def words_of(wl: dict) -> tuple[str, ...]:
    return file_text(str(wl["text"])) if wl.get("text") else built_text()


def join(words) -> str:
    return " ".join(words).replace("\n\n ", "\n\n")


def slice_words(words: tuple[str, ...], n: int, start: int) -> tuple[str, ...]:
    """n words from `start`, wrapping round the end of the text (as llama-benchy repeats a short book)."""
    if n <= len(words) - start:
        return words[start : start + n]
    reps = (start + n) // len(words) + 1
    return (words * reps)[start : start + n]


def request_texts(
    words: tuple[str, ...],
    ctx_words: int,
    pp_words: int,
    seed: int,
    workload: str,
    block: int,
    run: int,
    user: int,
    no_cache: bool,
    tokens=None,
    ctx_tokens: int = 0,
    pp_tokens: int = 0,
) -> tuple[str, str]:
    """(context, prompt) of one user in one run of a block: one contiguous slice from a seeded start, as
    llama-benchy takes one from a random start (the block is in the seed, so a server that serves several
    blocks, under attach, never sees a context twice).

    no_cache (llama-benchy --no-cache): a unique suffix on the prompt, so nothing past the template
    can be served from a cache even when two slices meet.
    """
    rng = random.Random(f"{seed}:{workload}:{block}:{run}:{user}")
    start = rng.randrange(len(words))
    if tokens is not None:  # cut to the calibrated token counts, as llama-benchy cuts token slices
        ctx_words = fit(words, start, ctx_tokens, ctx_words, tokens) if ctx_words else 0
        pp_words = fit(words, (start + ctx_words) % len(words), pp_tokens, pp_words, tokens) if pp_words else 0
    part = slice_words(words, ctx_words + pp_words, start)
    context, prompt = join(part[:ctx_words]), join(part[ctx_words:])
    if no_cache:
        prompt += f" {rng.getrandbits(64):016x}"
    return context, prompt


def token_counter(http, base: str, model: str):
    """tokens(text) through the server's own tokenizer route (vLLM's and llama.cpp's POST /tokenize), or None.

    With it each user's slice is cut to the calibrated token counts, as llama-benchy cuts token slices
    with the model's tokenizer; without it (Ollama, SGLang) slices have the calibrated word counts,
    and the records give the prompt tokens the server counted.
    """
    import httpx

    def vllm(text):
        r = http.post(
            base + "/tokenize", json={"model": model, "prompt": text, "add_special_tokens": False}, timeout=30.0
        )
        r.raise_for_status()
        return int(r.json()["count"])

    def llamacpp(text):
        r = http.post(base + "/tokenize", json={"content": text, "add_special": False}, timeout=30.0)
        r.raise_for_status()
        return len(r.json()["tokens"])

    for f in (vllm, llamacpp):
        try:
            if f("The fog lay over the street.") > 0:
                return f
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            continue
    return None


def fit(words: tuple[str, ...], start: int, target: int, guess: int, tokens) -> int:
    """Words from `start` whose text is `target` tokens (the longest slice not above it), by the server's tokenizer.

    Proportional steps to come near, then word by word to the longest slice within the target.
    """
    if target <= 0:
        return 0
    seen: dict[int, int] = {}

    def n_of(w: int) -> int:
        if w not in seen:
            seen[w] = tokens(join(slice_words(words, w, start)))
        return seen[w]

    w = max(guess, 1)
    for _ in range(8):
        n = n_of(w)
        if n == target:
            break
        step = int(round((target - n) * w / max(n, 1)))
        nxt = max(1, w + (step if step else (1 if n < target else -1)))
        if nxt in seen:
            break
        w = nxt
    under = [k for k, n in seen.items() if n <= target]
    w = max(under) if under else min(seen)
    for _ in range(64):  # down until within the target, then up while the next word still fits
        if n_of(w) <= target or w == 1:
            break
        w -= 1
    for _ in range(64):
        if n_of(w + 1) > target:
            break
        w += 1
    return w


# ---- requests --------------------------------------------------------------------------------------------


def _openai_chat_text(event: dict) -> str:
    """Text of a chat chunk as llama-benchy reads it: content, else reasoning_content, else reasoning."""
    out = ""
    for ch in event.get("choices") or []:
        d = ch.get("delta") or {}
        out += d.get("content") or d.get("reasoning_content") or d.get("reasoning") or ""
    return out


# llama-benchy's prompt for a context load (its CONTEXT_LOAD_USER_MESSAGE: vLLM refuses an empty one).
CONTEXT_LOAD_PROMPT = "."


def chat_body(
    adapter,
    model: str,
    context: str,
    prompt: str,
    request: Request,
    seed: int,
    arm: Arm | None,
    no_cache: bool,
    exact_tg: bool = True,
    prefix: bool = False,
) -> tuple[str, dict, str]:
    """(path, body, framing) of a chat request: the adapter's own completions body with messages for prompt.

    exact_tg (llama-benchy --exact-tg): min_tokens and ignore_eos pin the response length; without it
    (the Arena's setting) neither is sent and the model may stop early, as llama-benchy's request does.
    prefix (cache: prefix): llama.cpp's cache_prompt follows the server the cell runs on: true where the
    arm turns the prefix cache on (the server bracket launches for prefix cells, bracket.experiment.arena_workload.servers),
    else left out, as llama-benchy's request leaves it: the server's own default (--[no-]cache-prompt)
    decides, so a server started with the cache off serves no context and the guard reads "cache miss".
    """
    messages = ([{"role": "system", "content": context}] if context else []) + [
        {"role": "user", "content": prompt or "."}
    ]
    body = dict(adapter.request_body(model, "", request, seed=seed, arm=arm))
    for k in ("prompt", "raw", "text"):
        body.pop(k, None)
    body["messages"] = messages
    if not exact_tg:
        body.pop("ignore_eos", None)  # Ollama has none: num_predict is only its cap
    if adapter.kind == "ollama":
        return "/api/chat", body, "ndjson"
    body["return_token_ids"] = True  # as llama-benchy; servers that do not know it ignore it
    if exact_tg:
        body["min_tokens"] = request.max_tokens  # with ignore_eos: llama-benchy's --exact-tg
    if no_cache:
        body["cache_prompt"] = False
    elif prefix and "cache_prompt" in body and body["cache_prompt"] is not True:
        del body["cache_prompt"]
    return "/v1/chat/completions", body, "sse"


def _ollama_counts(events: list[dict]) -> Counts:
    return counts(events)


# The client hands each event the time of the network read that brought it (on_timed_event), as
# llama-benchy stamps each read (aiohttp iter_any): the events of one burst share their read's time,
# so llama-benchy's reading (text_chunks) groups them as llama-benchy does.


def _first_choice_text(event: dict) -> str:
    """llama-benchy's text of a chunk: choices[0].delta's content, else reasoning_content, else reasoning."""
    d = ((event.get("choices") or [{}])[0] or {}).get("delta") or {}
    return d.get("content") or d.get("reasoning_content") or d.get("reasoning") or ""


def send(
    adapter,
    http,
    base: str,
    model: str,
    context: str,
    prompt: str,
    request: Request,
    seed: int,
    arm: Arm | None,
    api: str,
    no_cache: bool,
    exact_tg: bool = True,
    prefix: bool = False,
) -> tuple[Measurement, dict]:
    """One arena request through the engine's own stream; (measurement, llama-benchy extras).

    Extras: ttfr_s, the time to the first event with choices (llama-benchy's ttfr: a chat stream's
    role chunk may come before any text); first_event_tokens, the tokens the first text event
    carried; text_chunks, one [seconds after the request was sent, token ids carried (null when the
    event had none)] per event with text, each at the time of the read that brought it: what
    llama-benchy keeps of a stream (its content_chunks), from which bracket.arena.readings computes
    its token times, tg and peak exactly as llama-benchy does.
    """
    if api == "completions":
        text = (context + "\n\n" + prompt) if context else prompt
        arm_q = arm if adapter.kind == "ollama" or arm is None else arm.model_copy(update={"speculative": None})
        m = adapter.measure(http, base, model, text, request, seed, arm_q).measurement
        return m, {"ttfr_s": m.ttft_s, "first_event_tokens": None, "text_chunks": None}
    path, body, framing = chat_body(adapter, model, context, prompt, request, seed, arm, no_cache, exact_tg, prefix)
    marks: dict = {}
    chunks: list[tuple[float, int | None]] = []

    def on_event(event: dict, now: float) -> None:  # now: the time of the read that brought the event
        if framing == "ndjson":
            has_choice, text = True, (event.get("message") or {}).get("content") or ""
            ids = None
        else:
            has_choice, text = bool(event.get("choices")), _first_choice_text(event)
            ids = ((event.get("choices") or [{}])[0] or {}).get("token_ids")
        if has_choice and "choice" not in marks:
            marks["choice"] = now
        if text:
            chunks.append((now, len(ids) if isinstance(ids, list) else None))
            if "text" not in marks:
                marks["text"] = now
                marks["first_tokens"] = chunks[-1][1] or None

    if framing == "ndjson":
        m, events = timed_stream(
            http,
            base + path,
            body,
            request.timeout_s,
            framing="ndjson",
            new_text=lambda e: (e.get("message") or {}).get("content") or "",
            is_last=lambda e: e.get("done") is True,
            counts=_ollama_counts,
            on_timed_event=on_event,
        )
    else:
        m, events = timed_stream(
            http,
            base + path,
            body,
            request.timeout_s,
            framing="sse",
            new_text=_openai_chat_text,
            is_last=lambda e: False,
            counts=_openai_counts,
            on_timed_event=on_event,
            missing_counts="no usage in the response (the server must honour stream_options.include_usage)",
        )
        adapter.adjust(m, events)
    ttfr = m.ttft_s
    if m.ttft_s is not None and "choice" in marks and "text" in marks:
        ttfr = max(m.ttft_s - (marks["text"] - marks["choice"]), 0.0)
    text_chunks = None
    if m.ttft_s is not None and chunks:
        t0 = marks["text"] - m.ttft_s  # the moment the request was sent, on the reads' clock
        text_chunks = [[t - t0, n] for t, n in chunks]
    return m, {"ttfr_s": ttfr, "first_event_tokens": marks.get("first_tokens"), "text_chunks": text_chunks}
