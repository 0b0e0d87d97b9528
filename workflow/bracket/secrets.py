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

Each of those forms is also matched with any of its characters escaped, one by one or all, mixed as
an encoder may write them (`_char`): JSON's `\\u0073` (any hex case, surrogate pairs beyond U+FFFF)
and two-character escapes (`\\/`), percent-encoding of the character's UTF-8 bytes, `\\x73`, HTML's
`&#115;` and `&#x73;`, each escape also escaped again (JSON inside a JSON string). The key's bytes in
hex (either case) is one more form.

Only whole forms are replaced, never characters: a secret shorter than `MIN_LENGTH` is refused when
it is registered (and before any server starts, by `short_problem`), because replacing a short value
wherever it occurs would change measured values and field names (the key `x` turns `experiment` into
`e***periment`).

A secret is recognised on a server's command line as the engine's own parser would read it
(`argument_problem`): an option that takes one (`SECRET_OPTIONS`, or any whose name says it holds one),
written with underscores, with `=VALUE`, or shortened to a prefix argparse completes (vLLM and SGLang
read `--api-ke KEY` as `--api-key KEY`); a reference to an environment variable that holds one
(`$VLLM_API_KEY`, which no shell expands: servers start from an argv list); and the value of such a
variable written out. Experiment validation refuses each with `FIX`.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import quote, quote_plus

MASK = "***"
# Shorter values occur by chance in model output, prompts and field names; a real key is 16 characters or more.
MIN_LENGTH = 12
# Names of environment variables whose values are secrets by convention (HF_TOKEN, OPENAI_API_KEY, ...).
# A whole word of the name, so TOKENIZERS_PARALLELISM is not one.
SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|APIKEY|AUTH)(?:$|_)", re.IGNORECASE
)

# Options of the engines' servers whose value is a secret or names a file that holds one: --api-key (vLLM,
# SGLang, llama.cpp), --admin-api-key (SGLang), --api-key-file (llama.cpp), --hf-token (vLLM, llama.cpp,
# whose short form is -hft). An option whose name says it holds a secret (looks_secret) is one as well.
SECRET_OPTIONS = ("api-key", "api-key-file", "admin-api-key", "hf-token", "hft")
# What an experiment does instead, said after every refusal of a secret in its arguments or environment.
FIX = (
    "Give an API key by engine.api_key_env (bracket hands it to the server by environment and sends it as the "
    "Bearer header, never writing it; an engine that takes a key only on its command line, as SGLang, gets one "
    "only from a server you start yourself and attach to), any other secret by engine.secret_env (a Hugging "
    "Face token as HF_TOKEN; the engine reads it from its environment)"
)
# An option as a parser reads it: its dashes and its name, up to `=` (the value) or a space.
_OPTION = re.compile(r"(-+)([^\s=]+)")
# A key set inside a value: JSON (`"hf_token": ...`), YAML, a query string or key=value list (`token=...`).
_ASSIGNED = re.compile(r"""([A-Za-z_][A-Za-z0-9_-]*)["']?\s*[:=]""")
# A reference to an environment variable, as a shell ($NAME, ${NAME}, ${NAME:-x}) or Windows (%NAME%) writes it.
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}?|\$([A-Za-z_][A-Za-z0-9_]*)|%([A-Za-z_][A-Za-z0-9_]*)%")

_known: set[str] = set()
# (length of a form, the regex that matches it with any character escaped, the form's first character)
_regexes: set[tuple[int, str, str]] = set()
_pattern: re.Pattern | None = None


class SecretTooShort(ValueError):
    """A secret so short that redacting it would change the data; the message says what to do."""


def looks_secret(name: str) -> bool:
    """True for an environment variable name that conventionally holds a secret."""
    return bool(SECRET_NAME.search(name))


def secret_option(arg: str) -> tuple[str, str] | None:
    """(the option as written, the secret-bearing option an engine's parser reads it as) for an argument that
    passes a secret, or None.

    An engine's parser reads `--api_key`, `--api-key=KEY` and `--API-KEY` alike here (vLLM turns underscores
    into dashes; a name that says it holds a secret is refused in any case), and argparse (vLLM, SGLang, the
    reference server) completes any prefix of a long option that no other option shares, so `--api-ke`,
    `--api-k` and `--api` may all be --api-key: every prefix of a secret-bearing long option is refused, an
    ambiguous one being an error of the engine's parser anyway. An argument with spaces is read word by word
    (one argv entry holding several options reaches the recorded command line whole)."""
    for word in str(arg).split():
        m = _OPTION.match(word)
        if not m:
            continue
        dashes, name = m.groups()
        norm = name.lower().replace("_", "-")
        if looks_secret(norm.replace("-", "_")):
            return f"{dashes}{name}", f"{dashes}{norm}"
        for option in SECRET_OPTIONS:
            if norm == option or (len(dashes) >= 2 and len(option) > 3 and option.startswith(norm)):
                return f"{dashes}{name}", ("-" if option == "hft" else "--") + option
    return None


def _secret_values(secret_names: Iterable[str], environ: Mapping[str, str] | None) -> dict[str, str]:
    """The values, long enough to be recognised, of the environment variables that hold secrets: those named
    and those whose names say so."""
    environ = os.environ if environ is None else environ
    names = set(secret_names) | {n for n in environ if looks_secret(n)}
    return {n: environ[n] for n in sorted(names) if len(environ.get(n) or "") >= MIN_LENGTH}


def value_problem(text: str, secret_names: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> str | None:
    """Why `text` (an argument or an environment value of a server) would put a secret in the files a run
    writes, or None: a reference to a variable that holds one, or the value of such a variable written out
    (in any of its `forms`). The reason names the variable, never the value."""
    names = set(secret_names)
    for m in _REFERENCE.finditer(str(text)):
        name = next(g for g in m.groups() if g)
        if name in names or looks_secret(name):
            return (
                f"refers to the environment variable ${name}, which holds a secret; bracket starts servers without "
                f"a shell, so the engine would be given those characters and not the secret, and a shell that "
                f"expanded them would put the secret on the recorded command line"
            )
    for m in _ASSIGNED.finditer(str(text)):
        if looks_secret(m.group(1).replace("-", "_")):
            return (
                f"sets {m.group(1)} inside it, whose value would be a secret recorded in every block's settings "
                f"and provenance and in the article"
            )
    for name, value in _secret_values(names, environ).items():
        if any(f in str(text) for f in forms(value)):
            return (
                f"holds the value of ${name} (as it is or encoded), which would be recorded in every block's "
                f"settings and provenance and in the article"
            )
    return None


def argument_problem(
    arg: str, secret_names: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> str | None:
    """Why `arg`, one argument of a server's command line, would pass a secret (an option that takes one as
    the engine's parser reads it, `secret_option`; a reference to or the value of a variable that holds one,
    `value_problem`), or None. The reason names the option or the variable, never a value; `FIX` says what
    to do instead."""
    found = secret_option(arg)
    if found:
        written, option = found
        if written.lower().replace("_", "-") == option:
            return (
                f"passes {written}, whose value would be a secret on the server's command line, which is "
                f"recorded in every block's provenance and the article"
            )
        return (
            f"passes {written}, which an engine's parser reads as {option} (argparse, vLLM's and SGLang's parser, "
            f"completes a prefix that no other option shares; vLLM reads underscores as dashes), so its value "
            f"would be a secret on the server's command line, which is recorded in every block's provenance and "
            f"the article"
        )
    why = value_problem(arg, secret_names, environ)
    return f"passes an argument that {why}" if why else None


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
    """Every form `value` can take in a record, a log or a URL, as literal text (see the module's docstring;
    `redact` also matches each with its characters escaped, mixed)."""
    out = {
        value,
        json.dumps(value, ensure_ascii=True)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        "".join(f"\\u{u:04x}" for u in _utf16(value)),  # every character JSON-escaped
        "".join(f"\\u{u:04X}" for u in _utf16(value)),
    }
    data = _utf8(value)
    if data:
        out |= {data.hex(), data.hex().upper(), "".join(f"%{b:02X}" for b in data), "".join(f"%{b:02x}" for b in data)}
        out |= _base64_cores(data)
    return {f for f in out if f}


def _utf16(value: str) -> list[int]:
    """The UTF-16 code units of `value`, as JSON's \\u escapes write it (a lone surrogate as itself)."""
    out = []
    for c in value:
        code = ord(c)
        out += [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    return out


def _utf8(value: str) -> bytes:
    """`value` as UTF-8, or b"" for one that holds a lone surrogate (read from bytes that are not UTF-8)."""
    try:
        return value.encode()
    except UnicodeEncodeError:
        return b""


# JSON's two-character escapes (RFC 8259, section 7); PHP and others write every `/` as `\/`.
_JSON_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def _char(c: str) -> str:
    """A regex for one character of a form, as itself or as any escape an encoder writes it in (see the
    module's docstring); `\\+` lets an escape be escaped again, hex digits come in either case."""
    alts = [re.escape(c), "".join(rf"\\+u(?i:{u:04x})" for u in _utf16(c))]
    if c in _JSON_SHORT:
        alts.append(r"\\+" + re.escape(_JSON_SHORT[c]))
    data = _utf8(c)
    if data:
        alts.append("".join(f"%(?i:{b:02x})" for b in data))
        alts.append("".join(rf"\\+x(?i:{b:02x})" for b in data))
    alts += [f"&#0*{ord(c)};", f"&#[xX]0*(?i:{ord(c):x});"]
    if c == " ":
        alts.append(r"\+")  # form encoding
    return "(?:" + "|".join(alts) + ")"


def _escaped(form: str) -> str:
    """A regex for `form` with any of its characters escaped."""
    return "".join(_char(c) for c in form)


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
        data = _utf8(value)
        _regexes.update((len(f), _escaped(f), f[0]) for f in {value} | (_base64_cores(data) if data else set()))
        if data:
            h = data.hex()
            _regexes.update({(len(h), f"(?i:{h})", h[0]), (len(h), f"(?i:{h})", h[0].upper())})
    _pattern = None


def known() -> frozenset[str]:
    return frozenset(_known)


def forget() -> None:
    """Drop every registered secret (tests; a process that runs several experiments)."""
    global _pattern
    _known.clear()
    _regexes.clear()
    _pattern = None


def _compiled() -> re.Pattern:
    global _pattern
    if _pattern is None:  # the longest first, so no form is left in part; the literal forms after, as a floor
        escaped = list(dict.fromkeys(r for _, r, _ in sorted(_regexes, key=lambda x: x[0], reverse=True)))
        literal = [re.escape(v) for v in sorted(_known, key=len, reverse=True)]
        # Every match starts with one of a few characters: the lookahead lets the search skip the rest of the
        # text in C (a megabyte of server log in about 0.05 s rather than 0.2 s).
        first = {c for _, _, c in _regexes} | {v[0] for v in _known} | set("\\%&")
        if " " in first:
            first.add("+")
        starts = "[" + "".join(re.escape(c) for c in sorted(first)) + "]"
        _pattern = re.compile(f"(?={starts})(?:{'|'.join(escaped + literal)})")
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
    bracket.block.runner) reads the redacted text too; the text only gets shorter, so a full disk cannot stop it.
    """
    if not _known:
        return False
    path = Path(path)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return False
    text = data.decode("utf-8", errors="surrogateescape")
    if not _compiled().search(text):
        return False
    text = redact(text).encode("utf-8", errors="surrogateescape")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, text, 0)
        os.ftruncate(fd, len(text))
    finally:
        os.close(fd)
    return True
