"""Where a comparison's interval gets its width, against an oracle's, from the fit that ran.

For a comparison with a block-level fit (bracket.stats.compare) the verdict's interval is
estimate +/- t_df(ci_level) se on the log scale. An oracle that knew how much servers and requests
vary would draw estimate +/- z(confidence) sigma, fitting the arm alone. The ratio of the two
half-widths is a product of factors, each computed here from what the fit recorded:

- degrees of freedom: t_df(confidence) / z(confidence), the price of estimating block noise from
  few blocks (df = blocks - 3 with the drift term, more when pooled with request noise);
- level: t_df(ci_level) / t_df(confidence), the level the interval is drawn at for multiplicity
  (Holm's step) or the adaptive design's looks (its repeated-CI boundary);
- drift term: sqrt(vif), the arm coefficient's variance inflated by the position regressor
  (bracket.stats.blocks.BlockFit.vif); 1 for a fit without it;
- request noise as a median's variance: where the fit pooled block and request noise, or floored
  a one-df block variance at the request noise, that part is (pi / 2) sigma_w^2 / n, the
  large-sample variance of a median of n normal values. For small n a median varies less:
  `median_factor(n)` = (pi / 2) / (n Var(median of n standard normals)), by simulation (1.22 at
  n = 6). Its square root bounds what it adds to the half-width (all of the variance from it).

The noise band is a separate caution: a verdict's interval must clear max(threshold, |fitted
drift per block|), so fitted drift raises the bar without widening the interval.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from bracket.stats.reasons import Center, Variance


@functools.lru_cache(maxsize=None)
def median_factor(n: int) -> float:
    """(pi / 2) / (n Var(median of n standard normals)): how much the large-sample variance of a median
    overstates a median's variance at n values (200,000 simulated samples, seeded by n)."""
    if n < 1:
        raise ValueError(f"median_factor needs at least one value per block, got {n}.")
    x = np.random.default_rng([n, 29]).standard_normal((200_000, n))
    return float(math.pi / 2 / (n * np.median(x, axis=1).var()))


def sources(c: dict, confidence: float) -> dict | None:
    """The factors of one comparison (a stats.json comparison row); None without a block-level fit."""
    df, level = c.get("df"), c.get("ci_level") or confidence
    if c.get("se") is None or not df or df <= 0:
        return None
    t0 = float(stats.t.ppf(0.5 + confidence / 2, df))
    floored = (c.get("ci_method") or {}).get("variance") == Variance.FLOORED
    request_part = bool(c.get("pooled")) or floored
    runs = (c.get("n_baseline", 0) + c.get("n_candidate", 0)) / max(
        (c.get("blocks_baseline") or 0) + (c.get("blocks_candidate") or 0), 1
    )
    med = c.get("block_statistic") != Center.MEAN and request_part and runs >= 1
    return {
        "df": float(df),
        "df_factor": t0 / float(stats.norm.ppf(0.5 + confidence / 2)),
        "level": float(level),
        "level_factor": float(stats.t.ppf(0.5 + level / 2, df)) / t0,
        "drift_factor": math.sqrt(c["vif"]) if c.get("basis") == "drift-adjusted" and c.get("vif") else 1.0,
        "pooled": bool(c.get("pooled")),
        "floored": floored,
        "runs_per_block": runs,
        "median_factor": median_factor(max(int(round(runs)), 1)) if med else None,
    }


def summary(comparisons: list[dict], confidence: float, threshold: float) -> dict | None:
    """stats.json `conservatism`: the factors over every comparison with a block-level fit, as
    {comparisons, df [min, max], df_factor, level_factor, drift_factor [min, max], drift_fits (count),
    pooled, floored (counts), runs_per_block [min, max], median_factor [min, max] (of those pooled or
    floored), band_raised (count), band_max, threshold, total [min, max] (the product of df, level
    and drift factors)}; None when no comparison has a block-level fit."""
    rows = [(c, s) for c in comparisons if (s := sources(c, confidence)) is not None]
    if not rows:
        return None

    def span(key, pick=lambda s: True):
        v = [s[key] for _, s in rows if pick(s) and s[key] is not None]
        return [min(v), max(v)] if v else None

    raised = [c["noise_band"] for c, _ in rows if (c.get("noise_band") or 0.0) > threshold * (1 + 1e-9)]
    return {
        "comparisons": len(rows),
        "df": span("df"),
        "df_factor": span("df_factor"),
        "level": span("level"),
        "level_factor": span("level_factor"),
        "drift_factor": span("drift_factor", lambda s: s["drift_factor"] > 1.0),
        "drift_fits": sum(s["drift_factor"] > 1.0 for _, s in rows),
        "pooled": sum(s["pooled"] for _, s in rows),
        "floored": sum(s["floored"] for _, s in rows),
        "runs_per_block": span("runs_per_block"),
        "median_factor": span("median_factor"),
        "band_raised": len(raised),
        "band_max": max(raised) if raised else None,
        "threshold": threshold,
        "total": [
            min(s["df_factor"] * s["level_factor"] * s["drift_factor"] for _, s in rows),
            max(s["df_factor"] * s["level_factor"] * s["drift_factor"] for _, s in rows),
        ],
    }
