"""The secrets a run knows, every form they take in transit, and the one redaction every string passes
through on its way out.

A secret is a value the run was given by environment: the API key (engine.api_key_env) and the
values of engine.secret_env. Once registered, every form it can take in transit is replaced by `***`
in every record, provenance file, server log, error message and console line the process writes,
wherever it appears in the text (a gateway that echoes the Authorization header in an error body puts
the key in the middle of a record's `error`; one that echoes it base64-encoded, or in a URL, puts an
encoding of it there: base64 of a key is the key). The forms (`forms`): the value itself (so also
after `Bearer `), JSON-escaped, URL-encoded (path, query and form encoding), and base64 (standard and
URL-safe alphabets) at each of the three byte alignments it can have inside a longer encoded text
(`Bearer KEY`, `user:KEY`), as the run of characters that depends on the secret's bytes alone.

Only whole forms are replaced, never characters: a secret shorter than `MIN_LENGTH` is refused when
it is registered (and before any server starts, by `short_problem`), because replacing a short value
wherever it occurs would change measured values and field names (the key `x` turns `experiment` into
`e***periment`).
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
# Shorter values occur by chance in model output, prompts and field names; a real key is 16 characters or more.
MIN_LENGTH = 12
# Names of environment variables whose values are secrets by convention (HF_TOKEN, OPENAI_API_KEY, ...).
# A whole word of the name, so TOKENIZERS_PARALLELISM is not one.
SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|APIKEY|AUTH)(?:$|_)", re.IGNORECASE
)

_known: set[str] = set()
_pattern: re.Pattern | None = None


class SecretTooShort(ValueError):
    """A secret so short that redacting it would change the data; the message says what to do."""


def looks_secret(name: str) -> bool:
    """True for an environment variable name that conventionally holds a secret."""
    return bool(SECRET_NAME.search(name))


def short_problem(name: str, value: str | None) -> str | None:
    """Why the secret in environment variable `name` cannot be used, or None (unset values are checked elsewhere)."""
    if value is None or value == "" or len(value) >= MIN_LENGTH:
        return None
    return (
        f"the secret in ${name} is {len(value)} character(s) long; bracket redacts secrets from every file it "
        f"writes, and a value shorter than {MIN_LENGTH} characters also occurs in measured text and field names, "
        f"so it cannot be redacted without changing the data. Use a longer key (at least {MIN_LENGTH} "
        f"characters; `python -c 'import secrets; print(secrets.token_urlsafe(24))'` makes one) and start the "
        f"server with it (vLLM: --api-key or VLLM_API_KEY), then export it as {name}."
    )


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters that depend on `data` alone, at each alignment it can have in a longer text.

    Character i of an encoding covers bits [6i, 6i + 6); preceded by o bytes, `data` covers bits
    [8o, 8(o + n)), so the characters from ceil(8o / 6) to floor(8(o + n) / 6) are the same in any text
    that holds `data` at that alignment (mod 3 bytes).
    """
    out = set()
    for o in range(3):
        enc = base64.b64encode(b"\0" * o + data).decode().rstrip("=")
        core = enc[-(-8 * o // 6) : (8 * (o + len(data))) // 6]
        out.add(core)
        out.add(core.translate(str.maketrans("+/", "-_")))
    return out


def forms(value: str) -> set[str]:
    """Every form `value` can take in a record, a log or a URL (see the module's docstring)."""
    out = {
        value,
        json.dumps(value, ensure_ascii=True)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
    }
    out |= _base64_cores(value.encode())
    return {f for f in out if f}


def register(*values: str | None) -> None:
    """Remember secret values (and every form they take in transit) for redaction.

    Raises SecretTooShort for a value shorter than MIN_LENGTH: it cannot be redacted without changing the data.
    """
    global _pattern
    for value in values:
        if not value:
            continue
        value = str(value)
        if len(value) < MIN_LENGTH:
            raise SecretTooShort(short_problem("(a secret)", value))
        _known.update(forms(value))
    _pattern = None


def known() -> frozenset[str]:
    return frozenset(_known)


def forget() -> None:
    """Drop every registered secret (tests; a process that runs several experiments)."""
    global _pattern
    _known.clear()
    _pattern = None


def _compiled() -> re.Pattern:
    global _pattern
    if _pattern is None:  # the longest first, so no form is left in part
        _pattern = re.compile("|".join(re.escape(v) for v in sorted(_known, key=len, reverse=True)))
    return _pattern


def redact(text: str) -> str:
    """`text` with every form of every registered secret replaced by ***."""
    if not _known or not isinstance(text, str):
        return text
    return _compiled().sub(MASK, text)


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with every string redacted, keys included."""
    if not _known:
        return obj
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def redact_file(path: str | Path) -> bool:
    """Rewrite a text file in place with every secret redacted; True when something was replaced.

    In place (the same inode), so every other name of the file (the attempt's hard link under raw/,
    bracket.measure.runner) reads the redacted text too; the text only gets shorter, so a full disk cannot stop it.
    """
    if not _known:
        return False
    path = Path(path)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return False
    if not any(v.encode() in data for v in _known):
        return False
    text = redact(data.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, text, 0)
        os.ftruncate(fd, len(text))
    finally:
        os.close(fd)
    return True
