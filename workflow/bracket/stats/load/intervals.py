"""Intervals over blocks for the load statistics: each block's value at a level, then a t interval across blocks.

Each block is a fresh server that ran every level, so a block's value at a level (its throughput, its p99 TTFT:
bracket.stats.load.frame.block_table) is one independent draw, and the blocks are the unit. The interval of an arm at
a level is the t interval of the mean of log block values (raw values for goodput, which may be 0),

    log v_j = a + s (position_j - mean position) + e_j,

with the drift line `s` fitted when the arm has at least TREND_BLOCKS blocks at distinct schedule positions (the
residual df is then blocks - 2), else a = mean with blocks - 1 df. Its centre exp(a) is the arm's value at the
middle of its schedule, the geometric mean over servers of each server's value: for a quantile, the typical
server's p99 (what one fresh server does), not the p99 of all servers' requests pooled.

Why not a cluster bootstrap (blocks, then requests): with 3-8 blocks a percentile bootstrap of blocks undercovers
(its spread is that of a sample of 3-8, taken as the population's), and resampling requests inside a block puts
no more than the block's own tail in a bootstrap p99. The block's quantile is taken median-unbiased (type 8), so the
mean of log block quantiles sits about on the truth whenever each block has n (1 - p) >= MIN_TAIL requests beyond
it; bench/results/load_quantiles.md measures coverage of the nominal-95 % interval of p99 on a generator with
known truth (block effects, drift across blocks, drift across a block's levels, three tail shapes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bracket.stats import defaults as D

#: Fewest blocks for the drift line in an arm's interval (residual df = blocks - 2 >= 2).
TREND_BLOCKS = 4
#: Metrics on the raw scale (their block values may be 0); every other metric on the log scale.
RAW_SCALE = ("goodput_req_s", "goodput_tok_s", "goodput_fraction")


@dataclass(frozen=True)
class BlockInterval:
    """The centre and t interval over blocks of one metric (None bounds: fewer than two blocks)."""

    center: float
    low: float | None
    high: float | None
    blocks: int
    df: float | None
    scale: str  # "log" or "raw"
    trend: bool  # the drift line was fitted
    se: float | None  # standard error of the centre on its scale (log or raw)


def block_interval(
    values, positions=None, confidence: float = D.CONFIDENCE, scale: str = "log"
) -> BlockInterval | None:
    """The t interval over blocks of one arm at one level (see the module's doc); None when no block has a value.

    values: one per block (NaN dropped; on the log scale values <= 0 dropped too). positions: each block's place in
    the schedule (None: no drift line).
    """
    v = np.asarray(values, dtype=float)
    pos = np.full(v.size, np.nan) if positions is None else np.asarray(positions, dtype=float)
    keep = np.isfinite(v) & (v > 0 if scale == "log" else True)
    v, pos = v[keep], pos[keep]
    k = v.size
    if k == 0:
        return None
    y = np.log(v) if scale == "log" else v
    back = np.exp if scale == "log" else (lambda x: x)
    if k == 1:
        return BlockInterval(float(back(y[0])), None, None, 1, None, scale, False, None)
    trend = uses_trend(k, pos)
    a_, se_, df = t_fit(y[None, :], pos, trend)
    a, se = float(a_[0]), float(se_[0])
    q = stats.t.ppf(0.5 + confidence / 2, df)
    lo, hi = back(a - q * se), back(a + q * se)
    if scale == "raw":
        lo = max(lo, 0.0)
    return BlockInterval(float(back(a)), float(lo), float(hi), int(k), float(df), scale, bool(trend), se)


def uses_trend(blocks: int, positions) -> bool:
    """The drift line enters an arm's interval: TREND_BLOCKS blocks or more, at three distinct positions or more."""
    pos = np.asarray(positions, dtype=float)
    return bool(blocks >= TREND_BLOCKS and np.isfinite(pos).all() and np.unique(pos).size >= 3)


def t_fit(y: np.ndarray, positions, trend: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Centre (at the mean position), its standard error and df, for each row of `y` (rows: experiments, columns:
    blocks on one scale); vectorized so that a calibration runs thousands of experiments at once."""
    k = y.shape[1]
    m = y.mean(axis=1, keepdims=True)
    if trend:
        x = np.asarray(positions, dtype=float)
        x = x - x.mean()
        slope = ((y - m) @ x) / (x @ x)
        resid = y - m - slope[:, None] * x
        df = k - 2
    else:
        resid = y - m
        df = k - 1
    return m[:, 0], np.sqrt((resid * resid).sum(axis=1) / df / k), df


def metric_columns(table: pd.DataFrame) -> list[str]:
    """The block table's metric columns, in a stable order."""
    base = ["throughput_tok_s", "request_rate", "decode_rate_p50"]
    tails = [c for c in table.columns if c.split("_p")[0] in ("ttft", "tpot", "itl") and "_p" in c]
    good = [c for c in RAW_SCALE if c in table.columns]
    return [c for c in base + tails + good if c in table.columns]


def arm_level_intervals(table: pd.DataFrame, confidence: float = D.CONFIDENCE, metrics=None) -> pd.DataFrame:
    """One row per (arm, level, metric) over the valid block rows: centre, low, high, blocks, df, scale, trend."""
    v = table[table["valid"].astype(bool)]
    rows = []
    for (arm, level), sub in v.groupby(["arm", "level"], sort=True):
        for m in metrics or metric_columns(table):
            iv = block_interval(
                sub[m].to_numpy(float),
                sub["position"].to_numpy(float),
                confidence,
                "raw" if m in RAW_SCALE else "log",
            )
            if iv is None:
                continue
            rows.append(dict(arm=str(arm), level=float(level), metric=m, **iv.__dict__))
    return pd.DataFrame(rows)
