"""The instrument's cost, in words: what bracket's request cost the server against a plain client's.

Reads stats.json `neutrality` (bracket.stats.neutrality); the method section shows it beside the
request's description.
"""

from __future__ import annotations

from bracket.article.elements import Para
from bracket.article.inputs import Data
from bracket.article.text import _n, pct
from bracket.stats.neutrality import THRESHOLD, Reading, reading
from bracket.stats.results import Json, Neutrality

#: The control's status in words where it left no pair ("on" with no pair, "no_records").
STATUS_WORDS = {
    "on": "on",
    "no_records": "no records: the blocks ran no control pairs (a stand-in server, or results from before the control)",
}


def instrument_sentence(n: Neutrality | None) -> tuple[str, str] | None:
    """(text, kind) of the neutrality control's result; None for stats.json files written before it."""
    if not n:
        return None
    status = str(n.status)
    if status == "off":
        return (
            f"The neutrality control, which compares bracket's request with the plainest request that yields "
            f"the same tokens, was off: {n.off_reason}; this article does not show what bracket's request "
            f"cost the engine.",
            "warn",
        )
    if n.ratio is None:
        said = STATUS_WORDS.get(status, status)  # an older stats.json's status is its own words
        return (
            f"The neutrality control left no pair to compare ({said}): this article does not show what "
            f"bracket's request cost the engine.",
            "warn",
        )
    how = {
        "server timing": "the server's own timing (" + "; ".join(n.timing_sources or ()) + ")",
        "wall time, after the first token": "the client's time after the first token (the engine reports no "
        "timing of its own)",
    }.get(n.basis, "wall time (the engine reports no timing of its own)")
    what = (
        f"In every block, after the arm's own requests, the same server answered {_n(n.pairs, 'pair')} of "
        f"requests in all ({_n(n.blocks, 'block')}): bracket's body and the plainest body that yields the "
        f"same tokens (what llama-benchy or a bare OpenAI client sends: model, prompt, max_tokens, "
        f"temperature, stream with usage, ignore_eos), on the same prompt, in alternating order, compared on "
        f"{how}. " + same_sentence(n.same_output)
    )
    per = ""
    if n.bracket_ms_per_token and n.plain_ms_per_token:
        per = f" ({n.bracket_ms_per_token:.3f} against {n.plain_ms_per_token:.3f} ms per token, medians of the pairs)"
    # the analysis reads the cost against its threshold (bracket.stats.neutrality.reading); a file from before
    # it did, the same function on the same numbers
    read = n.reading or reading(n.model_dump())
    if read == Reading.NO_INTERVAL:
        return (
            what + f"bracket's request took {pct(n.cost, 1, sign=True)} per token{per}; with one block there "
            f"is no block-level interval, so the instrument's cost is not established.",
            "warn",
        )
    ci = (
        f"{pct(n.confidence, 0)} CI {pct(n.ci_low - 1, 1, sign=True)} to "
        f"{pct(n.ci_high - 1, 1, sign=True)}, {n.df} degrees of freedom between blocks"
    )
    if read == Reading.COSTS_MORE:
        return (
            what + f"bracket's request cost the server {pct(n.cost, 1, sign=True)} per token{per} ({ci}): "
            f"the rates in this article are the engine's under bracket's request, slower than under a plain "
            f"client's.",
            "warn",
        )
    if read == Reading.COSTS_LESS:
        return (
            what + f"bracket's request cost the server {pct(n.cost, 1, sign=True)} per token{per} ({ci}): "
            f"less than a plain client's, so the rates in this article are the engine's under bracket's "
            f"request, faster than a plain client would see (the fields bracket adds, and why: the engine "
            f"adapter's request_body).",
            "warn",
        )
    limit = f"{100 * (n.threshold or THRESHOLD):g} %"
    if read == Reading.WITHIN:
        return (
            what + f"bracket's request cost the server {pct(n.cost, 1, sign=True)} per token{per} ({ci}): "
            f"within {limit} either way, so the instrument does not change what it measures.",
            "",
        )
    return (
        what + f"bracket's request cost the server {pct(n.cost, 1, sign=True)} per token{per} ({ci}): the "
        f"interval reaches beyond {limit} on one side, so a cost or a saving of that size is not ruled out.",
        "",
    )


def same_sentence(same: Json) -> str:
    """Whether the two bodies of each pair gave the same tokens ('' for results from before it was counted)."""
    if not same or not same.get("of"):
        return ""
    if same["same"] == same["of"]:
        return f"Both bodies gave the same tokens in all {_n(same['of'], 'pair')}. "
    return (
        f"The two bodies gave the same tokens in {same['same']} of {_n(same['of'], 'pair')}: in the others "
        f"bracket's fields changed the output itself, so those pairs compare different work (on a speculative "
        f"arm, a different acceptance). "
    )


def section_items(d: Data) -> list[Para]:
    """The paragraph the method section carries (empty for results from before the control)."""
    said = instrument_sentence(d.results.neutrality)
    return [Para(*said)] if said else []
