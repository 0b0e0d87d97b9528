"""Reading raw values from anywhere into one tidy frame the statistics understand.

Accepted inputs (by content, not only by extension):

- the workflow's runs.csv (bracket.records.tidy): the value is decode_tok_s;
- a JSONL of raw records (one request per line): tidied with bracket.records.tidy;
- any CSV with at least `arm` and `value` columns (`workload`, `block`, `round`, `position`,
  `run`, `valid` used when present; see `_fill_time` for a table with rounds but no blocks, or
  blocks numbered per arm);
- llama-benchy's JSON report (`--format json`; keys "benchmarks"[].tg_throughput.values, the
  raw per-run generation rates, as in llama-benchy's schemas/benchmark_report_schema.json);
  the value is llama-benchy's tg (first token excluded), not the decode rate, and each
  (pp, tg, depth, concurrency) is its own workload, named with the metric (bracket.interop);
- `vllm bench serve --save-result --save-detailed` JSON (per-request "output_lens", "ttfts",
  "itls", "errors"); the value is output_len / (ttft + sum(itl)), the request's decode rate
  measured from send to last token.

Files without an arm of their own (llama-benchy, vllm) take the file name (without extension)
as the arm and their index on the command line as the block.

The frame has columns: arm, workload, block, round, position, run, value, valid,
invalid_reason, and, for speculative runs, draft_tokens, accepted_tokens, verify_steps,
acceptance_length, draft_budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bracket import interop, records

COLUMNS = ["arm", "workload", "block", "round", "position", "run", "value", "valid", "invalid_reason", "invalid_kind"]
SPEC_COLUMNS = ["draft_tokens", "accepted_tokens", "verify_steps", "acceptance_length", "draft_budget"]


def _as_bool(s: pd.Series) -> pd.Series:
    if s.dtype == bool:
        return s
    return s.map(lambda v: str(v).strip().lower() in ("true", "1", "yes")).astype(bool)


def from_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The statistics' frame from the workflow's runs table (see bracket.records.tidy).

    value = decode_tok_s. Rows with valid == False stay in the frame (they are counted and
    reported) but every statistic filters on `valid`.
    """
    if "decode_tok_s" not in runs.columns:
        raise ValueError(
            f"the runs table has no decode_tok_s column (columns: {list(runs.columns)}); "
            f"build it with bracket.records.tidy."
        )
    df = pd.DataFrame(index=runs.index)
    df["arm"] = runs["arm"].astype(str)
    df["workload"] = runs["workload"].astype(str) if "workload" in runs else "all"
    for c in ("block", "round", "position", "run"):
        df[c] = pd.to_numeric(runs[c], errors="coerce") if c in runs else np.nan
    df["value"] = pd.to_numeric(runs["decode_tok_s"], errors="coerce")
    if "valid" in runs:
        df["valid"] = _as_bool(runs["valid"])
    else:
        df["valid"] = ~_as_bool(runs.get("warmup", pd.Series(False, index=runs.index)))
    reason = runs["invalid_reason"] if "invalid_reason" in runs else pd.Series("", index=runs.index)
    df["invalid_reason"] = reason.fillna("").astype(str)
    if "invalid_kind" in runs:
        df["invalid_kind"] = runs["invalid_kind"].fillna("").astype(str)
    for c in SPEC_COLUMNS:
        df[c] = pd.to_numeric(runs[c], errors="coerce") if c in runs else np.nan
    return _finish(df)


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    if "invalid_kind" not in df:  # a CSV written by hand or by an older bracket: kinds from the texts
        df["invalid_kind"] = records.first_kind(df)
    bad = df["valid"] & ~(np.isfinite(df["value"]) & (df["value"] > 0))
    if bad.any():
        df.loc[bad, "valid"] = False
        df.loc[bad, "invalid_reason"] = "no positive value"
        df.loc[bad, "invalid_kind"] = "no positive value"
    for c in SPEC_COLUMNS:
        if c not in df:
            df[c] = np.nan
    return df[COLUMNS + SPEC_COLUMNS + (["unit"] if "unit" in df else [])].reset_index(drop=True)


def _fill_time(df: pd.DataFrame, *, has_block: bool, has_position: bool, has_round: bool) -> None:
    """Block and position where a table leaves them out, without merging arms or inventing order.

    - no block but a position: each position is a block;
    - no block and no position but a round: each arm's round is a block (statistics key blocks
      per arm, so A's round 1 and B's round 1 stay two blocks), and the round is the time;
    - a block but no position: the block is the time if block ids are distinct across arms
      (a schedule's numbering); if they are numbered per arm (A: 1, 2; B: 1, 2) they say nothing
      about order, and the round is the time when there is one, else time is unknown.
    """
    if not has_block:
        if has_position:
            df["block"] = df["position"]
        elif has_round:
            df["block"] = df["round"]
    if not has_position and has_block:
        per_arm = df.groupby(["workload", "block"])["arm"].nunique()
        if not (per_arm > 1).any():
            df["position"] = df["block"]
        elif has_round:
            df["position"] = df["round"]
    elif not has_position and has_round:
        df["position"] = df["round"]


def from_table(table: pd.DataFrame, source: str = "table") -> pd.DataFrame:
    """A generic table with `arm` and `value` (and optionally workload, block, round, position)."""
    missing = [c for c in ("arm", "value") if c not in table.columns]
    if missing:
        raise ValueError(
            f"{source}: needs columns 'arm' and 'value' (or be a bracket runs.csv with "
            f"decode_tok_s); missing {missing}, found {list(table.columns)}."
        )
    df = pd.DataFrame(index=table.index)
    df["arm"] = table["arm"].astype(str)
    df["workload"] = table["workload"].astype(str) if "workload" in table else "all"
    for c in ("block", "round", "position", "run"):
        df[c] = pd.to_numeric(table[c], errors="coerce") if c in table else np.nan
    _fill_time(df, has_block="block" in table, has_position="position" in table, has_round="round" in table)
    df["value"] = pd.to_numeric(table["value"], errors="coerce")
    df["valid"] = _as_bool(table["valid"]) if "valid" in table else True
    df["invalid_reason"] = table["invalid_reason"].fillna("").astype(str) if "invalid_reason" in table else ""
    for c in SPEC_COLUMNS:
        df[c] = pd.to_numeric(table[c], errors="coerce") if c in table else np.nan
    if "unit" in table:  # what one value is (an imported llama-benchy cell: "runs" or "requests")
        df["unit"] = table["unit"].astype(str)
    return _finish(df)


def _llama_benchy(doc: dict, arm: str, block: int, metric: str = "tg_throughput") -> pd.DataFrame:
    # One cell per (pp, tg, depth, concurrency, phase), named with the metric (bracket.interop).
    return pd.DataFrame(interop.llama_benchy_rows(doc, arm, block, metric))


def _vllm_bench(doc: dict, arm: str, block: int) -> pd.DataFrame:
    # One cell per input and output length, concurrency and rate (bracket.interop).
    return pd.DataFrame(interop.vllm_rows(doc, arm, block))


def load(paths, metric: str = "tg_throughput") -> pd.DataFrame:
    """Load one or more RAW files into the statistics' frame (see the module docstring).

    metric: which of llama-benchy's metrics a llama-benchy report gives (bracket.interop.BENCHY_METRICS).
    """
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    frames = []
    for block, path in enumerate(paths):
        if not path.is_file():
            raise FileNotFoundError(
                f"no file at {path}; pass runs.csv, a raw .jsonl, a CSV with arm "
                f"and value columns, or a llama-benchy / vllm bench JSON."
            )
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            recs = records.read([path])
            if not recs:
                raise ValueError(f"{path}: no records.")
            frames.append(from_runs(records.tidy(recs)))
        elif suffix == ".json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and "benchmarks" in doc:
                frames.append(from_table(_llama_benchy(doc, path.stem, block, metric), str(path)))
            elif isinstance(doc, dict) and {"output_lens", "ttfts", "itls"} <= set(doc):
                frames.append(from_table(_vllm_bench(doc, path.stem, block), str(path)))
            elif isinstance(doc, dict) and "output_throughput" in doc:
                raise ValueError(
                    f"{path}: a vllm bench result without per-request values; re-run "
                    f"`vllm bench serve` with --save-result --save-detailed."
                )
            else:
                raise ValueError(
                    f"{path}: JSON of unknown shape; expected llama-benchy's report "
                    f"('benchmarks') or vllm bench serve's detailed result "
                    f"('output_lens', 'ttfts', 'itls')."
                )
        else:
            table = pd.read_csv(path)
            frames.append(from_runs(table) if "decode_tok_s" in table.columns else from_table(table, str(path)))
    return pd.concat(frames, ignore_index=True)
