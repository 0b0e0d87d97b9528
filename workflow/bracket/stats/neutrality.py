"""The instrument's cost: how much more per token the server spends on bracket's request than on a plain one.

Input: the neutrality control's records (bracket.records.control_table), pairs of one request with
bracket's body and one with the plain body, on the same server, in every block.

    t         = per-token time of a request: server_decode_s / server_tokens (the server's own timing)
                where every valid request has one, else (wall_s - ttft_s) / (completion_tokens - 1) where
                every one has a TTFT (decode only: the pair's second request may find its prompt cached),
                else wall_s / completion_tokens
    d_pair    = ln(t_bracket / t_plain)                      (both requests of the pair valid)
    d_block   = mean of the block's d_pair
    cost      = exp(mean of d_block) - 1,  ratio = 1 + cost
    CI        = exp(mean +/- t_{B-1, (1+c)/2} * sd(d_block) / sqrt(B)) over the B blocks with a pair

The block is the unit, as in every comparison of bracket (bracket.stats.blocks): pairs share their
block's server, so they are not independent replicates. With one block there is no CI.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np
import pandas as pd
from scipy import stats as st

from bracket.stats import defaults as D
from bracket.stats.findings import Finding, InstrumentCost
from bracket.stats.findings import FindingKind as K

#: The cost above which the instrument is named in the findings (when its CI lies above it too).
THRESHOLD = 0.01


def per_token_s(table: pd.DataFrame) -> tuple[pd.Series, str]:
    """Each request's per-token time and the basis it was read on ("server timing", "wall time, after the
    first token" or "wall time")."""
    valid = table[table["valid"]]
    server = pd.to_numeric(valid["server_decode_s"], errors="coerce")
    tokens = pd.to_numeric(valid["server_tokens"], errors="coerce")
    if len(valid) and server.notna().all() and (tokens > 0).all():
        return server / tokens, "server timing"
    wall = pd.to_numeric(valid["wall_s"], errors="coerce")
    n = pd.to_numeric(valid["completion_tokens"], errors="coerce")
    ttft = (
        pd.to_numeric(valid["ttft_s"], errors="coerce") if "ttft_s" in valid else pd.Series(float("nan"), valid.index)
    )
    if len(valid) and ttft.notna().all() and (n > 1).all() and (wall > ttft).all():
        return (wall - ttft) / (n - 1), "wall time, after the first token"
    return wall / n, "wall time"


def instrument_cost(table: pd.DataFrame, confidence: float = D.CONFIDENCE) -> dict | None:
    """The cost of bracket's request relative to the plain one; None when the control left no records.

    Returns ratio, cost (ratio - 1), ci_low, ci_high (of the ratio; None with fewer than two blocks),
    confidence, df, blocks, pairs, basis ("server timing" | "wall time"), timing_sources (what the
    engine's timing was read from), per-token medians of both bodies (ms), same_output (pairs whose
    two outputs were identical, of pairs compared: both carry the same prompt, so a greedy engine
    should give the same tokens, and a pair that differs compares different work), invalid (records left out), and per_block [{block, arm, pairs, ratio}].
    """
    if table is None or table.empty:
        return None
    t, basis = per_token_s(table)
    valid = table.loc[t.index].assign(t=t.to_numpy())
    wide = valid.pivot_table(index=["position", "pair"], columns="body", values="t", aggfunc="first")
    out = {
        "basis": basis,
        "confidence": confidence,
        "invalid": int((~table["valid"]).sum()),
        "timing_sources": sorted({str(s) for s in table["server_timing"].dropna()}),
        "records": int(len(table)),
    }
    if not {"bracket", "plain"} <= set(wide.columns):
        return {
            **out,
            "ratio": None,
            "cost": None,
            "ci_low": None,
            "ci_high": None,
            "df": None,
            "blocks": 0,
            "pairs": 0,
            "per_block": [],
            "bracket_ms_per_token": None,
            "plain_ms_per_token": None,
            "same_output": None,
        }
    wide = wide.dropna(subset=["bracket", "plain"])
    wide = wide[(wide["bracket"] > 0) & (wide["plain"] > 0)]
    d = np.log(wide["bracket"] / wide["plain"])
    by_block = d.groupby(level="position").agg(["mean", "size"])
    arms = table.drop_duplicates("position").set_index("position")["arm"]
    x = by_block["mean"].to_numpy()
    B = len(x)
    mean = float(x.mean()) if B else float("nan")
    lo = hi = None
    if B >= 2:
        se = float(x.std(ddof=1)) / math.sqrt(B)
        q = float(st.t.ppf((1 + confidence) / 2, B - 1))
        lo, hi = math.exp(mean - q * se), math.exp(mean + q * se)
    ratio = math.exp(mean) if B else None
    sha = valid.pivot_table(index=["position", "pair"], columns="body", values="output_sha256", aggfunc="first")
    same = sha.dropna(subset=["bracket", "plain"]) if {"bracket", "plain"} <= set(sha.columns) else sha.iloc[:0]
    return {
        **out,
        "ratio": ratio,
        "cost": ratio - 1 if ratio is not None else None,
        "ci_low": lo,
        "ci_high": hi,
        "df": B - 1 if B >= 2 else None,
        "blocks": B,
        "pairs": int(len(d)),
        "bracket_ms_per_token": 1e3 * float(wide["bracket"].median()) if len(wide) else None,
        "plain_ms_per_token": 1e3 * float(wide["plain"].median()) if len(wide) else None,
        "same_output": {"same": int((same["bracket"] == same["plain"]).sum()), "of": int(len(same))},
        "per_block": [
            {"block": int(pos), "arm": str(arms.get(pos)), "pairs": int(row["size"]), "ratio": math.exp(row["mean"])}
            for pos, row in by_block.iterrows()
        ],
    }


class Reading(StrEnum):
    """What the instrument's cost and its CI say against `threshold` either way; stats.json's
    neutrality.reading (the words are bracket.article.neutrality's)."""

    NO_INTERVAL = "no_interval"  # one block: no block-level CI, the cost not established
    COSTS_MORE = "costs_more"  # the whole CI above 1 + threshold: the rates are slower than a plain client's
    COSTS_LESS = "costs_less"  # the whole CI below 1 - threshold: faster than a plain client's
    WITHIN = "within"  # the whole CI within 1 -/+ threshold: the instrument does not change what it measures
    NOT_RULED_OUT = "not_ruled_out"  # the CI reaches beyond the threshold on one side


def reading(cost: dict | None, threshold: float = THRESHOLD) -> Reading | None:
    """The cost's reading against `threshold` (None without a cost)."""
    if not cost or cost.get("ratio") is None:
        return None
    if cost.get("ci_low") is None:
        return Reading.NO_INTERVAL
    if cost["ci_low"] > 1 + threshold:
        return Reading.COSTS_MORE
    if cost["ci_high"] < 1 - threshold:
        return Reading.COSTS_LESS
    if cost["ci_low"] >= 1 - threshold and cost["ci_high"] <= 1 + threshold:
        return Reading.WITHIN
    return Reading.NOT_RULED_OUT


def findings(cost: dict | None, threshold: float = THRESHOLD) -> list[Finding]:
    """A finding when bracket's request costs the server more, or less, than a plain client's by more than
    `threshold` per token, its whole CI beyond it: either way the rates are not those a plain client sees."""
    way = {Reading.COSTS_MORE: "slower", Reading.COSTS_LESS: "faster"}.get(reading(cost, threshold))
    if way is None:
        return []
    return [
        Finding(
            K.INSTRUMENT,
            InstrumentCost(
                cost=cost["cost"],
                confidence=cost["confidence"],
                ci_low=cost["ci_low"],
                ci_high=cost["ci_high"],
                blocks=int(cost["blocks"]),
                basis=str(cost["basis"]),
                direction=way,
            ),
        )
    ]
