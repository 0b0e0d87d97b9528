"""Levels of repetition (Kalibera & Jones 2013): how much variance sits between blocks vs within.

A block (one server launch, one thermal state) is the unit that repeats the whole setup; runs
within a block repeat only the request. If blocks differ more than runs do, more runs per block
buy little and more blocks buy much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class Advice(StrEnum):
    """What the variance components say to change (Levels.advice; bracket.article.advice words it)."""

    BLOCKS_AGREE = "blocks_agree"  # no variance between blocks: add runs per block
    MORE_BLOCKS = "more_blocks"  # best_runs_per_block below the runs per block now: more, shorter blocks
    MORE_RUNS = "more_runs"  # best_runs_per_block above it: more runs per block
    BALANCED = "balanced"  # the runs per block now are the cost-optimal ones


@dataclass(frozen=True)
class Levels:
    """Variance components of log(rate) (so they read as squared relative changes)."""

    blocks: int
    runs_per_block: float
    between_block_var: float
    within_block_var: float
    between_share: float
    best_runs_per_block: int | None
    advice: Advice


def variance_components(values, blocks) -> tuple[float, float, int, float]:
    """One-way random-effects ANOVA estimates (method of moments, Searle et al. 1992, ch. 3).

    MSW = sum_j sum_i (y_ij - ybar_j)^2 / (N - m)
    MSB = sum_j n_j (ybar_j - ybar)^2 / (m - 1)
    n0  = (N - sum_j n_j^2 / N) / (m - 1)
    within = MSW;  between = max(0, (MSB - MSW) / n0)

    on y = log(rate). Returns (between, within, m, mean runs per block).
    """
    y = np.log(np.asarray(values, dtype=float))
    b = np.asarray(blocks)
    if y.shape != b.shape:
        raise ValueError(f"values and blocks differ in length ({y.size} vs {b.size}).")
    ids = np.unique(b)
    m, N = ids.size, y.size
    if m < 2 or N - m < 1:
        raise ValueError(
            f"variance components need at least 2 blocks and a block with 2 runs; got {m} blocks and {N} runs."
        )
    groups = [y[b == i] for i in ids]
    n = np.array([g.size for g in groups], dtype=float)
    means = np.array([g.mean() for g in groups])
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (N - m)
    msb = (n * (means - y.mean()) ** 2).sum() / (m - 1)
    n0 = (N - (n**2).sum() / N) / (m - 1)
    return float(max(0.0, (msb - msw) / n0)), float(msw), int(m), float(N / m)


def levels(values, blocks, *, block_cost_runs: float = 5.0) -> Levels:
    """Variance at each level and the runs per block that give the narrowest CI per unit of time.

    Var(mean) = between / m + within / (m n). With a block costing `block_cost_runs` runs of
    overhead (launch, cooldown, warmup), the cost-optimal runs per block is
    n* = sqrt(block_cost_runs x within / between)  (Kalibera & Jones 2013, eq. for two levels).
    """
    if block_cost_runs <= 0:
        raise ValueError(f"`block_cost_runs` must be positive, got {block_cost_runs!r}.")
    between, within, m, n = variance_components(values, blocks)
    total = between + within
    share = between / total if total > 0 else 0.0
    if between <= 0:
        best, advice = None, Advice.BLOCKS_AGREE
    else:
        best = max(1, int(round(math.sqrt(block_cost_runs * within / between))))
        advice = Advice.MORE_BLOCKS if best < n else Advice.MORE_RUNS if best > n else Advice.BALANCED
    return Levels(m, n, between, within, share, best, advice)
