"""The corrections ledger: experiments/NAME.corrections.yaml, append-only, committed with the experiment.

A YAML list of {date, claim, correction, evidence}, read by `load_corrections`
and rendered in the article's corrections section. Entries are appended at the end of the file,
byte for byte after what was there: an earlier entry is never rewritten or reordered, so a
published report's corrections can always be traced (seed 000 left part 19 as written and added a
notice instead).
"""

from __future__ import annotations

from pathlib import Path

import yaml


class CorrectionsError(ValueError):
    """A corrections ledger that cannot be read; the message says which entry and what to fix."""


CORRECTION_KEYS = ("date", "claim", "correction", "evidence")


def load_corrections(path) -> list[dict] | None:
    """The corrections ledger: a YAML list of {date, claim, correction, evidence}; None if absent.

    Entries are appended, never rewritten; the article shows them in file order. A missing file
    means no corrections. An empty file or an empty list is also "none".
    """
    p = Path(path) if path else None
    if p is None or not p.is_file():
        return None
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    if data is None:
        return []
    if not isinstance(data, list):
        raise CorrectionsError(
            f"{p}: a corrections ledger is a YAML list of entries with keys "
            f"{', '.join(CORRECTION_KEYS)}; got a {type(data).__name__}."
        )
    out = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise CorrectionsError(
                f"{p}: entry {i + 1} is a {type(entry).__name__}, not a mapping with keys {', '.join(CORRECTION_KEYS)}."
            )
        out.append(checked(entry, f"{p}: entry {i + 1}"))
    return out


def checked(entry: dict, where: str) -> dict:
    """The entry with exactly CORRECTION_KEYS, as strings; or CorrectionsError naming `where` and the fix."""
    missing = [k for k in CORRECTION_KEYS if not entry.get(k)]
    unknown = sorted(set(entry) - set(CORRECTION_KEYS))
    if missing or unknown:
        raise CorrectionsError(
            f"{where} "
            + (f"lacks {', '.join(missing)}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"has unknown keys {', '.join(unknown)}" if unknown else "")
            + f". Each entry needs exactly: {', '.join(CORRECTION_KEYS)}."
        )
    return {k: str(entry[k]) for k in CORRECTION_KEYS}


HEADER = (
    "# Corrections to this experiment's published figures: append-only, newest last.\n"
    "# Each entry: date, claim, correction, evidence. Add entries by hand or with `snakemake reproduce`.\n"
)


def _entry_text(entry: dict) -> str:
    return yaml.safe_dump([checked(entry, "a new ledger entry")], sort_keys=False, allow_unicode=True, width=100)


def append(path: str | Path, entries: list[dict]) -> list[dict]:
    """Append `entries` to the ledger at `path` (created if absent); return those actually appended.

    An entry whose evidence is already in the ledger is skipped, so rerunning the rule that wrote
    it adds nothing. The existing file must be a valid ledger; the new text is checked to parse
    as the old entries followed by the new ones before a byte is written.
    """
    path = Path(path)
    old_text = path.read_text(encoding="utf-8") if path.is_file() else ""
    old = load_corrections(path) or [] if old_text else []
    seen = {e["evidence"] for e in old}
    new = [e for e in entries if str(e.get("evidence")) not in seen]
    if not new:
        return []
    suffix = ("" if old_text else HEADER) + ("\n" if old_text and not old_text.endswith("\n") else "")
    suffix += "".join(_entry_text(e) for e in new)
    try:
        parsed = yaml.safe_load(old_text + suffix)
    except yaml.YAMLError:
        parsed = None
    expected = old + [{k: str(e[k]) for k in CORRECTION_KEYS} for e in new]
    if not isinstance(parsed, list) or [{k: str(e[k]) for k in CORRECTION_KEYS} for e in parsed] != expected:
        raise CorrectionsError(
            f"{path}: appending would not leave the earlier entries followed by the new "
            f"ones (is the list written in flow style, like []?). Write the ledger as a "
            f"block list ('- date: ...') and run again."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(suffix)
    return new
