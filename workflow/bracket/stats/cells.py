"""Frame-level statistics: cells and comparisons from the tidy frame of `bracket.stats.io`.

These are what `bracket summarize` and `bracket compare` print, and what `analyze` assembles.
Only rows with valid == True enter any statistic.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bracket.stats import defaults as D
from bracket.stats._seeds import derive_seed
from bracket.stats.bootstrap import Sample
from bracket.stats.compare import Comparison, compare, comparison_drift
from bracket.stats.drift import first_vs_last, round_changes
from bracket.stats.summary import CellSummary, summarize


def valid_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["valid"].astype(bool)]


def cell_summaries(
    frame: pd.DataFrame,
    *,
    seed: int,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    spread_warning: float = D.SPREAD_WARNING,
    precision: float = D.NOISE_THRESHOLD,
    pool: bool = True,
) -> list[tuple[str, str, CellSummary]]:
    """Summaries of every (arm, workload) cell, sorted by workload then arm.

    Each cell's bootstrap draws from derive_seed(seed, "cell", arm, workload), so adding an arm
    never changes another cell's interval. With block ids the CI is block-level (see summarize).
    """
    out = []
    v = valid_rows(frame)
    for (workload, arm), sub in v.groupby(["workload", "arm"], sort=True):
        s = derive_seed(seed, "cell", arm, workload)
        blocks = sub["block"].to_numpy() if sub["block"].notna().all() else None
        unit = str(sub["unit"].iloc[0]) if "unit" in sub and sub["unit"].notna().all() else "requests"
        out.append(
            (
                str(arm),
                str(workload),
                summarize(
                    sub["value"].to_numpy(),
                    confidence=confidence,
                    n_resamples=n_resamples,
                    rng=s,
                    spread_warning=spread_warning,
                    precision=precision,
                    seed=s,
                    blocks=blocks,
                    pool=pool,
                    unit=unit,
                ),
            )
        )
    return out


def _sample(sub: pd.DataFrame) -> Sample:
    blocks = sub["block"] if sub["block"].notna().all() else None
    positions = sub["position"] if sub["position"].notna().all() else None
    return Sample.of(
        sub["value"].to_numpy(),
        None if blocks is None else blocks.to_numpy(),
        None if positions is None else positions.to_numpy(),
    )


def compare_arms(
    frame: pd.DataFrame,
    baseline: str,
    candidate: str,
    workload: str,
    *,
    seed: int,
    reference: str | None = None,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    noise_threshold: float = D.NOISE_THRESHOLD,
    pool: bool = True,
) -> Comparison:
    """Compare two arms on one workload; drift from their rounds, else the reference's blocks."""
    v = valid_rows(frame)
    v = v[v["workload"] == workload]
    arms = sorted(v["arm"].unique())
    for name, label in ((baseline, "baseline"), (candidate, "candidate")):
        if name not in arms:
            raise ValueError(
                f"{label} arm {name!r} has no valid runs on workload {workload!r}; "
                f"arms with valid runs there: {', '.join(arms) or 'none'}."
            )
    if baseline == candidate:
        raise ValueError(f"baseline and candidate are both {baseline!r}; compare two different arms.")
    rc = round_changes(v)
    ref = first_vs_last(v, reference) if reference and reference in arms else None
    drift = comparison_drift(rc[baseline]["change"], rc[candidate]["change"], ref["change"] if ref else None)
    s = derive_seed(seed, "compare", baseline, candidate, workload)
    return compare(
        _sample(v[v["arm"] == baseline]),
        _sample(v[v["arm"] == candidate]),
        drift=drift,
        noise_threshold=noise_threshold,
        confidence=confidence,
        n_resamples=n_resamples,
        rng=s,
        seed=s,
        pool=pool,
    )


def first_run_slow(frame: pd.DataFrame) -> list[tuple[str, str, int, int]]:
    """Cells where the first timed run of a block was the slowest in at least 3/4 of the blocks.

    By chance alone the first of n runs is the slowest with probability 1/n per block, so with
    5 runs and 2 blocks a false alarm has probability 0.04; most blocks are required.

    Returns (arm, workload, blocks where it was, blocks) for each such cell (two blocks or more).
    """
    v = valid_rows(frame).dropna(subset=["block", "run"])
    out = []
    for (arm, wl), sub in v.groupby(["arm", "workload"], sort=True):
        hits = total = 0
        for _, blk in sub.groupby("block"):
            if len(blk) < 3:
                continue
            total += 1
            first = blk.loc[blk["run"].idxmin(), "value"]
            hits += bool(first == blk["value"].min() and first < np.median(blk["value"]))
        if total >= 2 and hits >= max(2, math.ceil(0.75 * total)):
            out.append((str(arm), str(wl), hits, total))
    return out
