"""Raw records: one JSON object per request, appended as it arrives, and the tidy table built from them.

The raw records are the single source of truth. Unknown values are null, never guessed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from bracket.secrets import redact_obj
from bracket.typed.experiment import Request

FIELDS = [
    "experiment",
    "arm",
    "block",
    "round",
    "position",
    "run",
    "warmup",
    "workload",
    "prompt_id",
    "started_at",
    "ttft_s",
    "wall_s",
    "completion_tokens",
    "prompt_tokens",
    "cached_tokens",
    "finish_reason",
    "decode_tok_s",
    "tg_tok_s",
    "stream_events",
    "draft_tokens",
    "accepted_tokens",
    "verify_steps",
    "acceptance_length",
    "output_sha256",
    "server_id",
    "error",
]
# Kept beside the contract's fields: the draft budget of the arm, the requested length, the named
# host the block was pinned to (null when the experiment names no hosts), and the output text (for
# the greedy-agreement and determinism controls).
# cache_check says how the cache guard knew cached_tokens (CACHE_CHECKS). raw_response: on an error
# record, the start and end of the response body as the server sent it (bounded, redacted). count_check:
# why the token count cannot be what the stream's events carried (bracket.wire.client.count_check), else null.
EXTRA_FIELDS = ["draft_budget", "max_tokens", "host", "cache_check", "output_text", "raw_response", "count_check"]
# Arena cells only (bracket.arena.run): llama-benchy's time to the first response event, the tokens its
# first text event carried, each text event's read time and token ids (text_chunks), the latency
# llama-benchy would subtract (latency_s, its --latency-mode), the phase (arena_phase: "ctx" for a
# prefix-caching cell's context load, "inference" after it, null for a one-phase cell); kept in the raw
# records, not in the runs table.
# tg_exact false (llama-benchy without --exact-tg): the length was left free, so an early stop is the model's
# answer, not a fault. cache_expected (prefix-caching cells): the tokens the phase should find in the cache,
# 0 for the context load and the depth for the inference that follows it; the cache guard is then inverted.
ARENA_FIELDS = ["ttfr_s", "first_event_tokens", "text_chunks", "latency_s", "arena_phase", "tg_exact", "cache_expected"]
# The neutrality control's requests (bracket.block.runner): `control` names the control ("neutrality"; null on
# every arm's own request), `body` which request was sent ("bracket": request_body, "plain": plain_body),
# `pair` the pair it belongs to in its block, and the server's own decode time (seconds for tokens,
# `server_timing` saying where it was read; null where the engine reports none). A record with
# `control` set never enters the runs table or any arm's statistics (`tidy`); `control_table` reads them.
# `coherent`: llama-benchy's coherence check of an arena cell's server (control "coherence",
# bracket.arena.coherence): true / false, null where the question could not be asked.
CONTROL_FIELDS = ["control", "body", "pair", "server_decode_s", "server_tokens", "server_timing", "coherent"]


def new_record(**values) -> dict:
    unknown = set(values) - set(FIELDS) - set(EXTRA_FIELDS) - set(ARENA_FIELDS) - set(CONTROL_FIELDS)
    if unknown:
        raise KeyError(f"not raw-record fields: {sorted(unknown)}")
    rec = {k: None for k in FIELDS + EXTRA_FIELDS}
    rec.update(values)
    return rec


class RecordWriter:
    """Append-only JSONL writer: each record is one line, flushed and fsynced before the next.

    A crash can therefore lose at most the record being written, and `read` leaves a torn last line out and
    counts it.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, record: dict) -> None:
        # Every string through the run's one redaction: a server may echo the API key anywhere.
        line = json.dumps(redact_obj(record), ensure_ascii=False, allow_nan=False, default=_jsonable)
        self._f.write(line + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    raise TypeError(f"cannot store {type(v).__name__} in a raw record")


class DamagedRecords(ValueError):
    """A raw file with a line that is not a record before its last line: no crash leaves that (a write cut short is
    the file's last line), so the file was changed after it was written. The message names file, line and fix."""


def read(paths: Iterable[str | Path], torn: list[dict] | None = None) -> list[dict]:
    """Read raw JSONL files. A torn last line (a crash mid-write: no newline after it, not a whole record) is not a
    record, and is left out; where `torn` is a list, each is appended to it as {file, line, bytes} so the caller
    can count and name it. Any other line that is not a JSON object is DamagedRecords, naming its file and line."""
    out = []
    for path in paths:
        # One record per "\n": a record keeps a server's text as sent (ensure_ascii=False), and str.splitlines
        # would also split it at U+0085, U+2028 or U+2029 inside a generated string (json.dumps leaves them raw).
        # Split as bytes and decode each line: a write cut short may end inside a character's UTF-8 bytes.
        lines = Path(path).read_bytes().split(b"\n")
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                rec = None
            if isinstance(rec, dict):
                out.append(rec)
            elif i == len(lines) - 1:  # the last line, without its newline: the write a crash cut short
                if torn is not None:
                    torn.append({"file": str(path), "line": i + 1, "bytes": len(raw)})
            else:
                raise DamagedRecords(
                    f"{path}, line {i + 1}: not a raw record ({raw[:60].decode('utf-8', 'replace')!r}"
                    f"{'...' if len(raw) > 60 else ''}), and not the last line, where a crash would leave a record "
                    f"cut short: the file was changed after it was written. Its records cannot be guessed: restore "
                    f"it from a copy; or, to measure its block again, move it and its .meta.json out of "
                    f"{Path(path).parent} (keep them to look into) and run the workflow again."
                )
    return out


#: The kinds of invalid run: what statistics count by and the article groups by (runs.csv `invalid_kind`).
INVALID_KINDS = (
    "warmup",
    "error",
    "cached_tokens unknown",
    "cache hit",
    "cache miss",
    "early stop",
    "token count",
    "no wall time",
    "no positive value",
    "count check",
)

#: What to change for each kind of invalid run (INVALID_KINDS); NAME is the experiment. Said where the
#: workflow stops for want of a valid run (`nothing_valid`) and in the article's warnings.
REASON_HINTS = {
    "warmup": None,
    "cache hit": "the prefix cache engaged: keep request.unique_prefix true",
    "cached_tokens unknown": "the engine did not report cached tokens and request.cache_guard is strict (or "
    "request.unique_prefix is false): start vLLM with --enable-prompt-tokens-details or "
    "SGLang with --enable-cache-report, or set request.cache_guard: auto",
    "cache miss": "a prefix-caching arena cell's context was not served from the cache: start the server with its "
    "prefix cache on (vLLM's default, SGLang's radix cache) and room for every user's context",
    "early stop": "the output length was not pinned: the engine must honour ignore_eos",
    "token count": "completion_tokens differed from max_tokens: the output length was not pinned",
    "error": "requests failed: each error is in runs.csv (column error), the servers' logs in logs/NAME/server/",
    "no wall time": "requests without a wall time: check the client's timing",
    "count check": "the server's token count cannot be what its stream carried (runs.csv column count_check says "
    "why: more text events than tokens, or more tokens than the events can hold), so a rate would divide by a wrong "
    "count: check the engine's usage report and anything between it and bracket (a proxy)",
}


# A prefix cache keeps whole blocks (vLLM: 16 tokens on GPU, more on CPU; SGLang pages; llama.cpp exact), and
# the chat template's first tokens are shared by every context: a phase's cached tokens count as expected
# within this many tokens of its cache_expected.
CACHE_BLOCK_SLACK = 256


#: How a record's prefix cache was checked. reported: the response gave cached_tokens; metrics: the
#: server's prefix-cache counters, read before and after the single-stream request, gave it;
#: unique prefix: the engine reports nothing, and the prompt began with a prefix no other request of
#: the experiment carried, so no cache could hold it (valid unless request.cache_guard is strict).
CACHE_CHECKS = ("reported", "metrics", "unique prefix")


def cache_check(measured: str | None, request: Request) -> str | None:
    """The record's cache_check: what the adapter measured by, else "unique prefix" where the prompt carried
    one and request.cache_guard allows it (auto), else None (the strict guard: cached tokens unknown)."""
    if measured is not None:
        return measured
    if request.unique_prefix and request.cache_guard != "strict":
        return "unique prefix"
    return None


def reasons(rec: dict) -> list[tuple[str, str]]:
    """(kind, text) of each reason a timed record must not enter the statistics (empty list: valid).

    Guards from seed 000: the prefix cache never engaged (cached_tokens == 0), the output length
    was pinned (finish_reason == "length" and completion_tokens == max_tokens); and the token count is one the
    stream could have carried (count_check null: bracket.wire.client.count_check). A prefix-caching arena
    phase inverts the first (cached_tokens within CACHE_BLOCK_SLACK of cache_expected: the context load
    finds nothing, the inference finds its context), and a cell with tg_exact false drops the second's
    early stop. `kind` is one of INVALID_KINDS, `text` says it with the record's values.
    """
    out = []
    if rec.get("error"):
        return [("error", "error")]
    want = rec.get("cache_expected")
    if want is not None:  # a prefix-caching cell: the cache must serve the context, and only it
        got = rec.get("cached_tokens")
        if got is None:
            out.append(
                (
                    "cached_tokens unknown",
                    "cached_tokens unknown (a prefix-caching phase must show what the cache served)",
                )
            )
        elif got < want - CACHE_BLOCK_SLACK:
            out.append(
                (
                    "cache miss",
                    f"cache miss: {got} cached tokens of a {want}-token context (the server's "
                    f"prefix cache did not serve it: is it on, and large enough?)",
                )
            )
        elif got > want + CACHE_BLOCK_SLACK:
            out.append(("cache hit", f"cache hit: {got} cached tokens where {want} were expected"))
    elif rec.get("cached_tokens") is None:
        if rec.get("cache_check") != "unique prefix":
            out.append(("cached_tokens unknown", "cached_tokens unknown"))
    elif rec["cached_tokens"] > 0:
        out.append(("cache hit", "cache hit"))
    if rec.get("tg_exact") is not False and rec.get("finish_reason") != "length":  # false: length left free
        out.append(("early stop", f"early stop ({rec.get('finish_reason')})"))
    mt = rec.get("max_tokens")
    if mt is not None and rec.get("completion_tokens") != mt:
        out.append(("token count", f"token count {rec.get('completion_tokens')} != max_tokens {mt}"))
    if not rec.get("wall_s") or rec["wall_s"] <= 0:
        out.append(("no wall time", "no wall time"))
    if rec.get("count_check"):  # the count the rate divides by is not what the stream carried
        out.append(("count check", f"count check: {rec['count_check']}"))
    return out


def validity(rec: dict) -> list[str]:
    """The texts of `reasons(rec)`."""
    return [text for _, text in reasons(rec)]


def first_kind(runs: pd.DataFrame) -> pd.Series:
    """Each row's first invalid kind ("" when valid); from `invalid_kind`, or runs.csv files written before it."""
    if "invalid_kind" in runs:
        return runs["invalid_kind"].fillna("").astype(str)
    reason = runs.get("invalid_reason", pd.Series("", index=runs.index)).fillna("").astype(str)
    # Each distinct text once (a table holds a few: "" for every valid run), then mapped onto the rows.
    kinds = {}
    for text in reason.unique():
        first = text.split("; ")[0]
        kinds[text] = next((k for k in INVALID_KINDS if first.startswith(k)), first)
    return reason.map(kinds)


def nothing_valid(runs: pd.DataFrame, where: str = "runs.csv") -> str | None:
    """Why a run produced no valid measurement, most common reason first; None when one is valid.

    Said first when the workflow stops, so a run of only failed requests never looks like a result."""
    if len(runs) and runs["valid"].astype(bool).any():
        return None
    warm = runs["warmup"].fillna(False).astype(bool) if "warmup" in runs else pd.Series(False, index=runs.index)
    timed = runs.loc[~warm]
    if timed.empty:
        return f"no valid measurement: {where} holds no timed request ({int(warm.sum())} warmups only)."
    first = first_kind(timed)
    lines = [f"no valid measurement: all {len(timed)} timed requests in {where} are invalid."]
    for kind, n in first.value_counts().items():
        rows = timed.loc[first == kind]
        texts = rows["error"].dropna() if kind == "error" and "error" in rows else rows["invalid_reason"].dropna()
        example = f"; the first: {str(texts.iloc[0])[:300]}" if len(texts) and str(texts.iloc[0]) != kind else ""
        lines.append(f"  {n} x {kind}{example}")
        if REASON_HINTS.get(kind):
            lines.append(
                f"    {REASON_HINTS[kind].replace('NAME', str(timed['experiment'].iloc[0]) if 'experiment' in timed else 'NAME')}"
            )
    return "\n".join(lines)


def arms_without_valid_run(runs: pd.DataFrame, arms: list[str]) -> list[str]:
    """The arms (in the experiment's order) with no valid timed run: no comparison can name a winner
    while one of them is unmeasured, however fast the others were."""
    valid = runs.loc[runs["valid"].fillna(False).astype(bool)] if len(runs) and "valid" in runs else runs
    seen = set(valid["arm"]) if "arm" in valid else set()
    return [a for a in arms if a not in seen]


#: The `kind` of a load workload's raw records (bracket.measure.load): one per request, one per level's summary.
LOAD_KINDS = ("load_request", "load_level")


def tidy(records: list[dict]) -> pd.DataFrame:
    """The runs table: one row per request, every raw field, plus `valid` and `invalid_reason`.

    Warmup rows are kept and marked (valid is False, reason "warmup") so nothing is hidden. The
    controls' records (`control` set) are not requests of an arm: they are left out (`control_table`). Nor are a
    load workload's (`kind` in LOAD_KINDS: its requests and level summaries), which the load statistics read
    from the raw records (bracket.stats.load.frame.from_records).
    """
    records = [r for r in records if not r.get("control") and r.get("kind") not in LOAD_KINDS]
    cols = FIELDS + [c for c in EXTRA_FIELDS if c != "output_text"]
    df = pd.DataFrame([{k: r.get(k) for k in cols} for r in records], columns=cols)
    texts, kinds = [], []
    for r in records:
        why = reasons(r)
        if r.get("warmup"):
            why = [("warmup", "warmup")] + why
        texts.append("; ".join(t for _, t in why))
        kinds.append(why[0][0] if why else "")
    df["invalid_reason"] = texts
    df["invalid_kind"] = kinds
    df["valid"] = df["invalid_reason"] == ""
    if len(df):
        df = df.sort_values(["position", "started_at"], kind="stable").reset_index(drop=True)
    return df


def control_table(records: list[dict], control: str = "neutrality") -> pd.DataFrame:
    """The records of one control, one row each, with `valid` (the guards of `reasons`) and `invalid_reason`.

    Columns: block, arm, position, pair, body, workload, prompt_id, started_at, wall_s, completion_tokens,
    decode_tok_s, server_decode_s, server_tokens, server_timing, output_sha256, error, valid, invalid_reason.
    """
    cols = [
        "experiment",
        "arm",
        "block",
        "round",
        "position",
        "pair",
        "body",
        "workload",
        "prompt_id",
        "started_at",
        "ttft_s",
        "wall_s",
        "completion_tokens",
        "cached_tokens",
        "finish_reason",
        "decode_tok_s",
        "server_decode_s",
        "server_tokens",
        "server_timing",
        "output_sha256",
        "error",
        "max_tokens",
    ]
    rows = [r for r in records if r.get("control") == control]
    df = pd.DataFrame([{k: r.get(k) for k in cols} for r in rows], columns=cols)
    # The cache guard does not apply: a plain client sends no cache switch, and the control compares decode.
    why = [[t for k, t in reasons(r) if k not in ("cache hit", "cached_tokens unknown")] for r in rows]
    df["invalid_reason"] = ["; ".join(w) for w in why]
    df["valid"] = df["invalid_reason"] == ""
    return df


def guards(runs: pd.DataFrame) -> dict:
    """Seed 000's statements about the raw values, as facts checked on the timed runs (stats.json `guards`).

    cached_unknown: runs whose cached tokens are unknown and not excused by a unique prefix (invalid);
    cache_unreported_unique: runs the engine reported nothing for, valid by their experiment-unique
    prefix; cache_checks: timed runs per CACHE_CHECKS value; cache_hits: runs with cached tokens
    above 0 (marked invalid); pinned_tokens: the one completion length of every timed run when
    each also ended on `length` (None when lengths varied or a run stopped early).
    """
    timed = runs[~runs["warmup"].fillna(False).astype(bool)] if "warmup" in runs else runs
    cached = pd.to_numeric(timed.get("cached_tokens", pd.Series(dtype=float)), errors="coerce")
    toks = pd.to_numeric(timed.get("completion_tokens", pd.Series(dtype=float)), errors="coerce").dropna()
    fin = timed.get("finish_reason")
    pinned = len(toks) and toks.nunique() == 1 and fin is not None and bool((fin == "length").all())
    check = timed["cache_check"] if "cache_check" in timed else pd.Series(None, index=timed.index, dtype=object)
    check = check.where(check.notna(), None)
    unique = cached.isna() & (check == "unique prefix")
    checks = {c: int((check == c).sum()) for c in CACHE_CHECKS if (check == c).any()}
    # Runs from before cache_check was recorded: a reported value is all they could have had.
    legacy = int((cached.notna() & check.isna()).sum())
    if legacy:
        checks["reported"] = checks.get("reported", 0) + legacy
    return {
        "timed": int(len(timed)),
        "cached_unknown": int((cached.isna() & ~unique).sum()),
        "cache_unreported_unique": int(unique.sum()),
        "cache_checks": checks,
        "cache_hits": int((cached > 0).sum()),
        "pinned_tokens": int(toks.iloc[0]) if pinned else None,
    }


def failed_attempts(raw_dir: str | Path) -> list[dict]:
    """The provenance of every attempt set aside in raw_dir/failed/ (bracket.block.runner.archive_attempt),
    with records_kept (how many records it measured) and file (its records, relative to the experiment)."""
    out = []
    for p in sorted((Path(raw_dir) / "failed").glob("*.meta.json")):
        m = json.loads(p.read_text())
        jsonl = p.with_name(p.name.replace(".meta.json", ".jsonl"))
        m["records_kept"] = len(read([jsonl])) if jsonl.is_file() else 0
        m["file"] = f"raw/failed/{jsonl.name}"
        out.append(m)
    return out
