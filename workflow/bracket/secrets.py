"""The secrets a run knows, and the one redaction every string passes through on its way out.

A secret is a value the run was given by environment: the API key (engine.api_key_env) and the
values of engine.secret_env. Once registered, it is replaced by `***` in every record, provenance
file, server log, error message and console line the process writes, wherever it appears in the
text (a gateway that echoes the Authorization header in an error body puts the key in the middle
of a record's `error`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MASK = "***"
# Names of environment variables whose values are secrets by convention (HF_TOKEN, OPENAI_API_KEY, ...).
# A whole word of the name, so TOKENIZERS_PARALLELISM is not one.
SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|APIKEY|AUTH)(?:$|_)",
                         re.IGNORECASE)

_known: set[str] = set()


def looks_secret(name: str) -> bool:
    """True for an environment variable name that conventionally holds a secret."""
    return bool(SECRET_NAME.search(name))


def register(*values: str | None) -> None:
    """Remember secret values (and the forms JSON and HTTP bodies write them in) for redaction."""
    for value in values:
        if not value:
            continue
        value = str(value)
        _known.add(value)
        escaped = json.dumps(value, ensure_ascii=True)[1:-1]
        if escaped != value:
            _known.add(escaped)


def known() -> frozenset[str]:
    return frozenset(_known)


def forget() -> None:
    """Drop every registered secret (tests; a process that runs several experiments)."""
    _known.clear()


def redact(text: str) -> str:
    """`text` with every registered secret replaced by ***; the longest first, so none is left in part."""
    if not _known or not isinstance(text, str):
        return text
    for value in sorted(_known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


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
    """Rewrite a text file in place with every secret redacted; True when something was replaced."""
    if not _known:
        return False
    path = Path(path)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return False
    if not any(v.encode() in data for v in _known):
        return False
    text = redact(data.decode("utf-8", errors="replace"))
    tmp = path.with_name(path.name + ".redacting")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True
