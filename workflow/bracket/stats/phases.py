"""TTFT apart from decode: where an arm's difference from the reference lives.

The decode rate (completion_tokens / wall time of the request) carries the time to the first
token. A server that saves its prompt cache before every task (llama.cpp's RAM cache, on by
default), a prefix cache that engages, or a slower prefill all move the decode rate without
decoding one token slower. So per arm and workload this module puts three numbers side by side,
each a cell as `bracket.stats.summary` makes it (median, block-level CI):

- ttft_s: time to the first token, from sending the request;
- tg_tok_s: the decode-phase rate, (n - 1) / (t_last_token - t_first_token) (llama-benchy's tg);
- decode_tok_s: the request-level decode rate.

and, for every arm but the reference, each one's ratio to the reference (block-level, as
`bracket.stats.cells.compare_arms`: exp of the arm coefficient on log block medians, with its CI).

An arm's difference "lives in TTFT" when its TTFT moved further from 1 than its decode phase
did, by more than a stated margin, and the TTFT ratio is measured (its CI excludes 1):

    |ln r_ttft| > |ln r_tg| + ln(1 + margin)   and   (ci_low(r_ttft) > 1 or ci_high(r_ttft) < 1)

Logs make the rule symmetric: swapping arm and reference inverts both ratios and leaves the
verdict unchanged. Where either ratio or the TTFT CI is missing (one arm has no valid TTFT or tg,
or one block per arm, whose CI would rest on requests alone while the block is the unit) the
answer is None, not False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bracket.stats import defaults as D
from bracket.stats._seeds import derive_seed
from bracket.stats.cells import cell_summaries, compare_arms
from bracket.stats.findings import Finding, ServerState
from bracket.stats.findings import FindingKind as K
from bracket.stats.io import from_runs
from bracket.stats.reasons import CiKind

# Raw-record column -> what it is, in the order the table shows them.
METRICS = ("ttft_s", "tg_tok_s", "decode_tok_s")


def metric_frame(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """The statistics' tidy frame (bracket.stats.io.from_runs) with `column` as the value.

    Validity is the request's (runs.csv `valid`: warmups, cache hits, errors are out); a request
    without a positive value of `column` (a one-token output has no tg) is left out as well.
    """
    if column not in runs.columns:
        raise ValueError(
            f"the runs table has no {column} column (columns: {list(runs.columns)}); "
            f"rebuild it with bracket.records.tidy from the raw records."
        )
    swapped = runs.drop(columns=["decode_tok_s"], errors="ignore").assign(decode_tok_s=runs[column])
    return from_runs(swapped)


def lives_in_ttft(
    ttft_ratio: float | None,
    ttft_ci: tuple[float | None, float | None],
    tg_ratio: float | None,
    margin: float = D.PHASE_MARGIN,
) -> bool | None:
    """Whether an arm's difference from the reference is in TTFT rather than in decode (module docstring).

    Parameters
    ----------
    ttft_ratio, tg_ratio : float or None
        Arm / reference of the TTFT and of the decode-phase rate (positive).
    ttft_ci : (low, high)
        The TTFT ratio's CI; the difference must be measured (the CI excludes 1).
    margin : float
        How much further (as a factor, 0.1 = 10 %) TTFT must lie from 1 than tg does.

    Returns True or False, or None where a ratio or the CI is missing.
    """
    if margin < 0:
        raise ValueError(f"margin must be at least 0 (it is a relative distance), got {margin}.")
    lo, hi = ttft_ci
    if not _positive(ttft_ratio) or not _positive(tg_ratio) or lo is None or hi is None:
        return None
    measured = lo > 1 or hi < 1
    return bool(measured and abs(math.log(ttft_ratio)) > abs(math.log(tg_ratio)) + math.log1p(margin))


def _positive(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@dataclass(frozen=True)
class PhaseRow:
    """One arm on one workload: TTFT, decode-phase rate and decode rate, each with its ratio to the reference.

    `*_ci_low/high` are the cells' CIs (block-level with two blocks or more); `*_ratio` and
    `*_ratio_ci_*` the block-level ratio to the reference and its CI (None for the reference
    itself). ttft_share is the median of ttft_s / wall_s over the cell's requests: how much of
    the request-level decode rate's time TTFT is. in_ttft: `lives_in_ttft`.
    """

    arm: str
    workload: str
    n: int
    ttft_s: float | None
    ttft_ci_low: float | None
    ttft_ci_high: float | None
    tg_tok_s: float | None
    tg_ci_low: float | None
    tg_ci_high: float | None
    decode_tok_s: float | None
    decode_ci_low: float | None
    decode_ci_high: float | None
    ttft_share: float | None
    ttft_ratio: float | None = None
    ttft_ratio_ci_low: float | None = None
    ttft_ratio_ci_high: float | None = None
    tg_ratio: float | None = None
    tg_ratio_ci_low: float | None = None
    tg_ratio_ci_high: float | None = None
    decode_ratio: float | None = None
    decode_ratio_ci_low: float | None = None
    decode_ratio_ci_high: float | None = None
    in_ttft: bool | None = None


def _ratio(frame: pd.DataFrame, reference: str, arm: str, workload: str, **kw) -> tuple:
    try:
        c = compare_arms(frame, reference, arm, workload, reference=reference, **kw)
    except ValueError:  # an arm without valid values of this metric on this workload
        return None, None, None
    if c.ci_method["kind"] == CiKind.REQUESTS_ONLY:  # one block per arm: servers' differences unmeasured, no CI
        return c.raw_ratio, None, None
    # The raw fit (arm only): each phase's ratio on the same footing, whatever basis a verdict would take.
    return c.raw_ratio, c.raw_ci_low, c.raw_ci_high


def phases(
    runs: pd.DataFrame,
    reference: str,
    *,
    seed: int = D.SEED,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    margin: float = D.PHASE_MARGIN,
) -> list[PhaseRow]:
    """Per (arm, workload): TTFT, tg and decode rate with CIs and ratios to `reference` (module docstring).

    Rows are sorted by workload, then the reference first, then the other arms by name.
    """
    frames = {m: metric_frame(runs, m) for m in METRICS if m in runs.columns}
    if "decode_tok_s" not in frames:
        raise ValueError("the runs table has no decode_tok_s column; build it with bracket.records.tidy.")
    cells = {}
    for m, frame in frames.items():
        for arm, wl, s in cell_summaries(
            frame, seed=derive_seed(seed, "phases", m), confidence=confidence, n_resamples=n_resamples
        ):
            cells[(m, arm, wl)] = s
    share = _ttft_share(runs)
    keys = sorted({(wl, arm) for (_, arm, wl) in cells}, key=lambda k: (k[0], k[1] != reference, k[1]))
    rows = []
    for wl, arm in keys:
        c = {m: cells.get((m, arm, wl)) for m in METRICS}
        row = dict(
            arm=arm, workload=wl, n=c["decode_tok_s"].n if c["decode_tok_s"] else 0, ttft_share=share.get((arm, wl))
        )
        for m, name in (("ttft_s", "ttft"), ("tg_tok_s", "tg"), ("decode_tok_s", "decode")):
            s = c[m]
            row[m] = s.median if s else None
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = (s.ci_low, s.ci_high) if s else (None, None)
        if arm != reference:
            for m, name in (("ttft_s", "ttft"), ("tg_tok_s", "tg"), ("decode_tok_s", "decode")):
                r = (None, None, None)
                if m in frames:
                    r = _ratio(
                        frames[m],
                        reference,
                        arm,
                        wl,
                        seed=derive_seed(seed, "phases", m),
                        confidence=confidence,
                        n_resamples=n_resamples,
                    )
                row[f"{name}_ratio"], row[f"{name}_ratio_ci_low"], row[f"{name}_ratio_ci_high"] = r
            row["in_ttft"] = lives_in_ttft(
                row["ttft_ratio"], (row["ttft_ratio_ci_low"], row["ttft_ratio_ci_high"]), row["tg_ratio"], margin
            )
        rows.append(PhaseRow(**row))
    return rows


def _ttft_share(runs: pd.DataFrame) -> dict:
    if not {"ttft_s", "wall_s"} <= set(runs.columns):
        return {}
    valid = (
        runs["valid"].map(lambda v: str(v).strip().lower() in ("true", "1"))
        if "valid" in runs
        else pd.Series(True, index=runs.index)
    )
    sub = runs[valid].assign(
        _share=pd.to_numeric(runs["ttft_s"], errors="coerce") / pd.to_numeric(runs["wall_s"], errors="coerce")
    )
    sub = sub[np.isfinite(sub["_share"])]
    return {(str(a), str(w)): float(g["_share"].median()) for (a, w), g in sub.groupby(["arm", "workload"])}


def findings(rows: list[PhaseRow], reference: str, margin: float = D.PHASE_MARGIN) -> list[Finding]:
    """A "server state" finding for each row whose difference lives in TTFT, with its numbers."""
    out = []
    for r in rows:
        if not r.in_ttft:
            continue
        payload = ServerState(
            ttft_ratio=r.ttft_ratio,
            ttft_ratio_ci_low=r.ttft_ratio_ci_low,
            ttft_ratio_ci_high=r.ttft_ratio_ci_high,
            tg_ratio=r.tg_ratio,
            decode_ratio=r.decode_ratio,
            margin=margin,
        )
        out.append(Finding(K.SERVER_STATE, payload, arm=r.arm, vs=reference, workload=r.workload))
    return out
