"""Escaping and number formats: the only place numbers become text."""

from __future__ import annotations

import html
import math
import re

from bracket.article.verdicts import plan_words
from bracket.stats.results import Comparison

DASH = "\u2013"
TIMES = "\u00f7"


def esc(value) -> str:
    """HTML-escape anything (None becomes the empty string)."""
    return html.escape("" if value is None else str(value), quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")  # $ too: $$x$$ would render as math on GitHub
_MD_LINE_START = re.compile(r"^(\s*)(\d+)?([#>+\-=.)])(?=\s|$|#)")


def md_esc(value) -> str:
    """Markdown-escape text for a paragraph or a table cell, so it renders as the same text.

    HTML is neutralised with entities (``<`` becomes ``&lt;``), Markdown punctuation gets a
    backslash, and line breaks become spaces (a table row is one line).
    """
    text = "" if value is None else str(value)
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = re.sub(r"[\r\n]+", " ", text)
    # A leading "#", ">", "-", "+", "=" or "1." would start a heading, quote or list.
    return _MD_LINE_START.sub(lambda m: m.group(1) + (m.group(2) or "") + "\\" + m.group(3), text)


def rate(x) -> str:
    """A decode rate, two decimals (seed 000: "65.02")."""
    return "n/a" if _missing(x) else f"{x:.2f}"


def _end(v: float, digits: int) -> str:
    """One end of a range: fixed decimals, but an interval that runs off to 1e+107 or down to zero (a
    CI on one degree of freedom) reads as such rather than as a hundred digits or a false 0.00."""
    if abs(v) >= 1e6:
        return f"{v:.1e}"
    if 0 < abs(v) < 0.5 * 10**-digits:
        return f"<{10**-digits:.{digits}f}"
    return f"{v:.{digits}f}"


def span(lo, hi, digits: int = 1) -> str:
    """A range, "56.6–69.3"."""
    if _missing(lo) or _missing(hi):
        return "n/a"
    return f"{_end(lo, digits)}{DASH}{_end(hi, digits)}"


# An interval whose ends are more than this factor apart, or that runs to zero or to infinity, says no
# more than "not determined": its digits ("<0.01–32765.14", a CI on one degree of freedom) are noise.
UNDETERMINED_WIDTH = 10.0


def determined(lo, hi) -> bool:
    """Whether an interval of positive quantities (rates, ratios) is narrow enough to print as digits."""
    if _missing(lo) or _missing(hi):
        return False
    return lo > 0 and hi / lo <= UNDETERMINED_WIDTH


def interval(lo, hi, digits: int = 2, needed: str = "") -> str:
    """An interval as digits when they mean something, else "undetermined", with what would determine it
    where the analysis says (`needed`, e.g. "run 7 rounds", from a comparison's rounds_needed)."""
    if determined(lo, hi):
        return span(lo, hi, digits)
    if _missing(lo) and _missing(hi) and not needed:
        return "n/a"
    return "undetermined" + (f" ({needed})" if needed else "")


def rounds_needed(comp: Comparison | dict | None) -> str:
    """What would determine an undetermined comparison (stats.json rounds_needed); "" when not undetermined."""
    comp = Comparison.model_validate(comp) if isinstance(comp, dict) else comp
    if not comp or comp.verdict != "undetermined":
        return ""
    r = comp.rounds_needed
    plan = plan_words(comp.rounds_needed_power, comp.rounds_needed_effect, comp.rounds_needed_goal)
    return (f"run {r} rounds" if r else "more than 200 rounds") + (f" for {plan}" if plan else "")


def ratio(x) -> str:
    return "n/a" if _missing(x) else f"{x:.2f}x"


def pct(x, digits: int = 1, sign: bool = False) -> str:
    if _missing(x):
        return "n/a"
    return f"{100 * x:+.{digits}f}%" if sign else f"{100 * x:.{digits}f}%"


def size(nbytes) -> str:
    """Bytes in decimal units, as the seeds write them (18.77 GB, 8.39 MB)."""
    if _missing(nbytes):
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _n(k, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def runs_phrase(n, lo, hi) -> str:
    """ "(10 runs, 56.6–69.3)" as in seed 000."""
    return f"({int(n)} run{'s' if int(n) != 1 else ''}, {span(lo, hi)})"


def spec_words(sp: dict | None, engine: str | None = None) -> str:
    """An arm's speculative settings in words ("off" without), as `engine` reads them: vLLM looks up
    between prompt_lookup_min and _max tokens; SGLang by its own window; llama.cpp's ngram-simple matches exactly
    prompt_lookup_max tokens and its ngram-mod drafts 1 to draft_tokens with its own match length
    (bracket.engines.llamacpp.spec_argv)."""
    if not sp:
        return "off"
    words = f"{sp.get('method')}, draft budget {sp.get('draft_tokens')}"
    if sp.get("method") == "ngram" and engine == "llamacpp":
        if (sp.get("engine_method") or "ngram-simple") == "ngram-simple":
            words += f", ngram-simple: a {sp.get('prompt_lookup_max') or 3}-token match"
        else:
            words += (
                f", {sp['engine_method']}: 1{DASH}{sp.get('draft_tokens')} tokens a draft, llama.cpp's own match length"
            )
    elif sp.get("method") == "ngram" and engine in (None, "vllm"):
        words += f", lookup {sp.get('prompt_lookup_min')}{DASH}{sp.get('prompt_lookup_max')} tokens"
    elif sp.get("method") == "ngram":  # SGLang takes no lookup setting from bracket (engines/sglang.py)
        words += f", {engine}'s own match length"
    return words + (f", draft model {sp['model']}" if sp.get("model") else "")
