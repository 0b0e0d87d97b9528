"""Task files for the quality gate: items with an expected answer, the answer extractors, and scoring.

A task file is JSONL, one object per line: `{"prompt": ..., "answer": ..., "id": ...}` (`id` optional;
the line number stands in). It comes from the user and is read as untrusted input: at most
`MAX_FILE_BYTES` and `MAX_ITEMS` items, each prompt at most `MAX_PROMPT_CHARS` characters and each answer
at most `MAX_ANSWER_CHARS`; a bad line stops the read with its line number and the fix.

The extractor is named in the experiment. Each is a rule stated here, applied alike to every arm:

- `gsm8k`: the number after the last "####" in the output; where there is none, the last number in the
  output. A number is ASCII digits with an optional leading minus, thousands commas and a decimal part
  (`-1,234.50`); it is normalised by dropping the commas and a leading "+", the decimal part's trailing
  zeros (and the point, when nothing is left: "72.0" is "72"), and leading zeros ("007" is "7"; "-0" is
  "0"). The expected answer is read by the same rule (a GSM8K solution ending "#### 72", or "72", or the
  JSON number 72) and must hold a number. Correct: the two normalised numbers are the same string.
- `exact`: the output, stripped of surrounding whitespace and in Unicode NFC, equals the answer treated
  alike; case-sensitive unless `case_sensitive=False` (then both are casefolded).
- `contains`: the answer (stripped, NFC) occurs in the output (NFC); case as for `exact`.

Outputs are the model's text as the server sent it (untrusted too): only their last
`MAX_OUTPUT_CHARS` characters are read, and every pattern here runs in linear time.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bracket.engines.logprobs import post_json

MAX_FILE_BYTES = 64 << 20
MAX_ITEMS = 100_000
MAX_PROMPT_CHARS = 200_000
MAX_ANSWER_CHARS = 10_000
MAX_ID_CHARS = 200
MAX_OUTPUT_CHARS = 100_000
MAX_NUMBER_CHARS = 64  # a longer run of digits is no answer a task expects
KEYS = ("prompt", "answer", "id")
# Keys other task formats use, and the key this file reads instead.
RENAMES = {"question": "prompt", "input": "prompt", "target": "answer", "output": "answer", "label": "answer"}


class Extractor(StrEnum):
    """How an answer is read from a model's output (the module docstring states each rule)."""

    GSM8K = "gsm8k"
    EXACT = "exact"
    CONTAINS = "contains"


class TaskError(ValueError):
    """A task file that cannot be used as written; the message names the line and what to change."""


@dataclass(frozen=True)
class TaskItem:
    """One item of a task file: its id, the prompt asked, the expected answer as written, its line."""

    id: str
    prompt: str
    answer: str
    line: int


@dataclass(frozen=True)
class Scored:
    """One item scored: what was read from the output (None: nothing), what was expected, and the verdict."""

    id: str
    extracted: str | None
    expected: str
    correct: bool


# A sign only where no digit or letter stands before it ("3-4" is 3 and 4); commas only between groups of three.
_NUMBER = re.compile(r"(?:(?<![0-9A-Za-z])[-+])?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?")
_MARK = "####"


def normalise_number(text: str) -> str | None:
    """A number as the gsm8k rule compares it ("1,234.50" -> "1234.5", "72.0" -> "72", "-0" -> "0");
    None where `text` is no number or longer than MAX_NUMBER_CHARS."""
    text = text.strip()
    if len(text) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(text):
        return None
    sign = "-" if text.startswith("-") else ""
    digits = text.lstrip("+-").replace(",", "")
    whole, _, frac = digits.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    body = whole + ("." + frac if frac else "")
    return body if body == "0" else sign + body


def _numbers(text: str) -> list[str]:
    return [m.group() for m in _NUMBER.finditer(text)]


def extract_gsm8k(output: str) -> str | None:
    """The gsm8k rule: the first number after the last "####", else the last number in the text; normalised."""
    text = output[-MAX_OUTPUT_CHARS:]
    at = text.rfind(_MARK)
    if at >= 0:
        m = _NUMBER.search(text, at + len(_MARK))
        # only whitespace (or a currency sign) may stand between the mark and its number
        if m and not text[at + len(_MARK) : m.start()].strip(" \t\n\r$"):
            return normalise_number(m.group())
    found = _numbers(text)
    return normalise_number(found[-1]) if found else None


def _plain(text: str, case_sensitive: bool) -> str:
    text = unicodedata.normalize("NFC", text.strip())
    return text if case_sensitive else text.casefold()


def extract(output: str | None, extractor: Extractor | str, case_sensitive: bool = True) -> str | None:
    """What `extractor` reads from a model's output: a normalised number (gsm8k), or the stripped text."""
    extractor = Extractor(extractor)
    if not isinstance(output, str):
        return None
    if extractor is Extractor.GSM8K:
        return extract_gsm8k(output)
    return _plain(output[-MAX_OUTPUT_CHARS:], case_sensitive)


def expected_answer(answer: str, extractor: Extractor | str, case_sensitive: bool = True) -> str | None:
    """The expected answer as `extractor` compares it; None where the gsm8k rule finds no number in it."""
    extractor = Extractor(extractor)
    if extractor is Extractor.GSM8K:
        return extract_gsm8k(answer)
    return _plain(answer, case_sensitive)


def is_correct(output: str | None, answer: str, extractor: Extractor | str, case_sensitive: bool = True) -> bool:
    """Whether `output` answers `answer` under `extractor` (the module docstring states each rule)."""
    return score_one("", output, answer, extractor, case_sensitive).correct


def score_one(
    item_id: str, output: str | None, answer: str, extractor: Extractor | str, case_sensitive: bool = True
) -> Scored:
    extractor = Extractor(extractor)
    expected = expected_answer(answer, extractor, case_sensitive)
    if expected is None:
        raise TaskError(f"item {item_id!r}: the expected answer {answer[:80]!r} holds no number for the gsm8k rule")
    if extractor is Extractor.CONTAINS:
        got = extract(output, extractor, case_sensitive)
        return Scored(item_id, got, expected, got is not None and bool(expected) and expected in got)
    got = extract(output, extractor, case_sensitive)
    return Scored(item_id, got, expected, got is not None and got == expected)


def score(
    items: Sequence[TaskItem],
    outputs: Mapping[str, str | None],
    extractor: Extractor | str,
    case_sensitive: bool = True,
) -> list[Scored]:
    """Each item scored against its output (outputs by item id); an item without an output is wrong."""
    return [score_one(it.id, outputs.get(it.id), it.answer, extractor, case_sensitive) for it in items]


def _field_text(value, key: str, where: str, limit: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TaskError(f'{where}: "{key}" must be text (or a number), got {type(value).__name__}')
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > limit:
        raise TaskError(f'{where}: "{key}" is {len(text):,} characters, more than the {limit:,} read; shorten it')
    return text


def _item(obj, where: str, index: int, extractor: Extractor | None) -> TaskItem:
    if not isinstance(obj, dict):
        raise TaskError(f'{where}: each line must be an object {{"prompt": ..., "answer": ...}}')
    for key in obj:
        if key not in KEYS:
            hint = f'rename it to "{RENAMES[key]}"' if key in RENAMES else f"remove it (keys read: {', '.join(KEYS)})"
            raise TaskError(f"{where}: key {str(key)[:40]!r} is not read; {hint}")
    for key in ("prompt", "answer"):
        if key not in obj:
            raise TaskError(f'{where}: no "{key}"; each line needs {{"prompt": ..., "answer": ...}}')
    prompt = _field_text(obj["prompt"], "prompt", where, MAX_PROMPT_CHARS)
    if not isinstance(obj["prompt"], str) or not prompt.strip():
        raise TaskError(f'{where}: "prompt" must be non-empty text')
    answer = _field_text(obj["answer"], "answer", where, MAX_ANSWER_CHARS)
    if not answer.strip():
        raise TaskError(f'{where}: "answer" is empty; write the expected answer')
    if extractor is Extractor.GSM8K and extract_gsm8k(answer) is None:
        raise TaskError(
            f'{where}: "answer" {answer[:60]!r} holds no number, which the gsm8k extractor compares; '
            'write the number (e.g. "72" or "... #### 72") or name the exact or contains extractor'
        )
    item_id = _field_text(obj.get("id", index), "id", where, MAX_ID_CHARS) if "id" in obj else str(index)
    return TaskItem(item_id, prompt, answer, index)


def load(path: str | Path, extractor: Extractor | str | None = None) -> list[TaskItem]:
    """Read a task file (JSONL: prompt, answer, optional id per line) within the module's bounds.

    With `extractor`, each answer is checked to be one it can compare (gsm8k: it holds a number).
    Raises TaskError naming the file, the line and the fix.
    """
    path = Path(path)
    extractor = Extractor(extractor) if extractor is not None else None
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TaskError(
                f"{path}: {size:,} bytes, more than the {MAX_FILE_BYTES:,} a task file may hold; split it or "
                "take a sample of its items"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise TaskError(f"{path}: no such task file; check the path in the experiment") from None
    except IsADirectoryError:
        raise TaskError(f"{path}: a folder, not a task file; name the JSONL file itself") from None
    if len(data) > MAX_FILE_BYTES:
        raise TaskError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; split it or take a sample of its items")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    items: list[TaskItem] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(text.split("\n")):  # text may hold U+2028 inside a JSON string
        if not line.strip():
            continue
        where = f"{path}:{i + 1}"
        if len(items) >= MAX_ITEMS:
            raise TaskError(f"{where}: more than {MAX_ITEMS:,} items; take a sample of them")
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
            raise TaskError(f'{where}: not JSON ({msg}); each line must be {{"prompt": ..., "answer": ...}}') from None
        item = _item(obj, where, i + 1, extractor)
        if item.id in seen:
            raise TaskError(f"{where}: id {item.id!r} repeats line {seen[item.id]}; give every item its own id")
        seen[item.id] = i + 1
        items.append(item)
    if not items:
        raise TaskError(f'{path}: no items; write one {{"prompt": ..., "answer": ...}} object per line')
    return items


# The field that holds a repetition penalty at 1 in each engine's spelling (ARCHITECTURE.md, "What a request
# asks"): a GGUF or a generation_config may carry another default, which would change greedy answers.
_NO_PENALTY = {"llamacpp": {"repeat_penalty": 1}, "vllm": {"repetition_penalty": 1}}


def greedy_answers(
    kind: str,
    http,
    base_url: str,
    model: str,
    items: Sequence[TaskItem],
    max_tokens: int,
    timeout_s: float = 120.0,
) -> dict[str, str]:
    """Each item's output at temperature 0 from an OpenAI-compatible `/v1/completions` (no stream), by item id.

    The body is a plain client's greedy request (model, prompt, max_tokens, temperature 0) and the engine's
    repetition penalty at 1; the answer's size and time are bounded (bracket.engines.logprobs.post_json) and
    its text must be a string, else the item's output is recorded as None (scored wrong) and the reason raised.
    """
    if not 1 <= max_tokens <= 65_536:
        raise ValueError(f"max_tokens must lie in 1..65536, got {max_tokens!r}")
    url = base_url.rstrip("/") + "/v1/completions"
    out: dict[str, str] = {}
    for item in items:
        body = {"model": model, "prompt": item.prompt, "max_tokens": max_tokens, "temperature": 0}
        body.update(_NO_PENALTY.get(kind, {}))
        obj = post_json(http, url, body, timeout_s)
        choices = obj.get("choices")
        text = (
            choices[0].get("text") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        )
        if not isinstance(text, str):
            raise TaskError(
                f"item {item.id!r}: the server answered no text in choices[0].text; is it OpenAI-compatible?"
            )
        out[item.id] = text
    return out
