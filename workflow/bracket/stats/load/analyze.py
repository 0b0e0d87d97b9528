"""The load statistics in one call: block table, intervals, goodput, capacity, verdicts, gains and ceilings.

    analyze_load(requests, levels, slo=Slo(2.0, 0.1), comparisons=[("base", "cand")],
                 speculation=[("base", "spec")], ceiling=CeilingInput(4800, 16e9), seed=..., confidence=0.95)

requests and levels are the load driver's records as frames (the contract's keys). Levels the driver marked invalid
(the client fell behind) enter no statistic and are listed in `invalid_levels`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bracket.stats import defaults as D
from bracket.stats.load import ceiling as ce
from bracket.stats.load import frame as fr
from bracket.stats.load import results as R
from bracket.stats.load.intervals import arm_level_intervals, metric_columns
from bracket.stats.load.slo import Slo, capacity
from bracket.stats.load.verdicts import compare_levels, gain

#: Metrics a comparison gets a verdict on at each level, by default.
VERDICT_METRICS = ("throughput_tok_s", "decode_rate_p50", "ttft_p99", "tpot_p99")
#: Metrics of the speculation gain.
GAIN_METRICS = ("decode_rate_p50", "throughput_tok_s")


@dataclass(frozen=True)
class CeilingInput:
    """What the batch ceiling needs: the host's bandwidth (GB/s) and the bytes a decode step reads."""

    bandwidth_gbps: float
    weight_bytes: float
    kv_bytes_per_token: float = 0.0
    context_tokens: float = 0.0


def _num(x) -> float | None:
    return float(x) if x is not None and not pd.isna(x) and math.isfinite(float(x)) else None


def _block_rows(table: pd.DataFrame, metrics: list[str]) -> list[R.LoadBlockRow]:
    out = []
    for r in table.to_dict("records"):
        reason = r.get("invalid_reason")
        out.append(
            R.LoadBlockRow(
                arm=str(r["arm"]),
                block=int(r["block"]),
                level=float(r["level"]),
                position=_num(r.get("position")),
                level_position=_num(r.get("level_position")),
                valid=bool(r["valid"]),
                invalid_reason=reason if isinstance(reason, (dict, str)) else None,
                window_s=float(r["window_s"]),
                n_steady=int(r["n_steady"]),
                interpolated=int(r["interpolated"]),
                values={m: _num(r.get(m)) for m in metrics},
            )
        )
    return out


def _verdict(base: str, cand: str, level: float, metric: str, c: dict) -> R.LevelVerdict:
    return R.LevelVerdict(
        baseline=base,
        candidate=cand,
        level=level,
        metric=metric,
        verdict=str(c["verdict"]),
        ratio=float(c["ratio"]),
        ci_low=_num(c.get("ci_low")),
        ci_high=_num(c.get("ci_high")),
        ci_level=_num(c.get("ci_level")),
        rounds_needed=c.get("rounds_needed"),
        comparison=_json(c),
    )


def _json(x):
    """A comparison record as plain JSON values (enums as their values, NaN as null)."""
    if isinstance(x, dict):
        return {str(k): _json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json(v) for v in x]
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (bool, type(None), str)):
        return str(x) if hasattr(x, "value") else x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(float(x)) else None
    return str(getattr(x, "value", x))


def _ceilings(table: pd.DataFrame, iv: pd.DataFrame, c: CeilingInput) -> list[R.LevelCeiling]:
    out = []
    thr = iv[iv["metric"] == "throughput_tok_s"].set_index(["arm", "level"])
    kinds = table["level_kind"] if "level_kind" in table else pd.Series("users", index=table.index)
    for arm, level in (
        table.loc[kinds.fillna("users") == "users", ["arm", "level"]].drop_duplicates().itertuples(index=False)
    ):
        batch = int(round(level))
        if batch < 1:
            continue
        b = ce.step_bytes(c.weight_bytes, c.kv_bytes_per_token, c.context_tokens, batch)
        ceil = ce.batch_ceiling_tok_s(c.bandwidth_gbps, b, batch)
        m = thr.loc[(arm, level)] if (arm, level) in thr.index else None
        out.append(
            R.LevelCeiling(
                arm=str(arm),
                level=float(level),
                bytes_per_step=b,
                step_s=ce.step_time_s(c.bandwidth_gbps, b),
                ceiling_tok_s=ceil,
                measured_tok_s=_num(m["center"]) if m is not None else None,
                measured_low=_num(m["low"]) if m is not None else None,
                measured_high=_num(m["high"]) if m is not None else None,
                efficiency=_num(m["center"] / ceil) if m is not None else None,
            )
        )
    return sorted(out, key=lambda x: (x.arm, x.level))


def analyze_load(
    requests: pd.DataFrame,
    levels: pd.DataFrame,
    *,
    slo: Slo | None = None,
    comparisons=(),
    speculation=(),
    ceiling: CeilingInput | None = None,
    seed: int = D.SEED,
    confidence: float = D.CONFIDENCE,
    noise_threshold: float = D.NOISE_THRESHOLD,
    verdict_metrics=VERDICT_METRICS,
) -> R.LoadStats:
    """Every load statistic of one experiment (see the module's doc).

    slo: the SLO; None takes the one the driver recorded on the level summaries (`slo`), if any.
    comparisons: (baseline, candidate) arm pairs, each given a verdict per level and metric (Holm across the levels
    of one metric). speculation: (baseline, speculative) pairs, each given the gain per level on GAIN_METRICS.
    """
    slo = slo if slo is not None else Slo.from_levels(levels)
    table = fr.block_table(requests, levels, slo)
    metrics = metric_columns(table)
    iv = arm_level_intervals(table, confidence, metrics)
    arms = sorted(set(table["arm"].astype(str)))
    for pair in (*comparisons, *speculation):
        for a in pair:
            if a not in arms:
                raise ValueError(f"arm {a!r} has no load levels; arms with some: {', '.join(arms) or 'none'}.")
    caps = []
    if slo is not None and not iv.empty:
        caps = [capacity(iv, slo, a) for a in arms if (iv["arm"] == a).any()]
    verdicts = [
        _verdict(b, c, lv, m, row)
        for b, c in comparisons
        for m in verdict_metrics
        if m in table
        for lv, row in compare_levels(table, b, c, m, seed=seed, confidence=confidence, noise_threshold=noise_threshold)
    ]
    gains = [
        R.LevelGain(
            baseline=b,
            speculative=s,
            level=lv,
            metric=m,
            ratio=float(row["ratio"]),
            ci_low=_num(row.get("ci_low")),
            ci_high=_num(row.get("ci_high")),
            confidence=confidence,
            verdict=str(row["verdict"]),
        )
        for b, s in speculation
        for m in GAIN_METRICS
        for lv, row in gain(table, b, s, m, seed=seed, confidence=confidence, noise_threshold=noise_threshold)
    ]
    rows = _block_rows(table, metrics)
    return R.LoadStats(
        confidence=confidence,
        seed=seed,
        quantile_method="median_unbiased",
        min_tail=fr.MIN_TAIL,
        slo=R.LoadSloResult(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, quantile=slo.quantile) if slo else None,
        blocks=tuple(rows),
        intervals=tuple(
            R.LoadInterval(**{k: _num(v) if k in ("low", "high", "df", "se") else v for k, v in r.items()})
            for r in iv.to_dict("records")
        ),
        capacity=tuple(
            R.LoadCapacityResult(
                arm=c.arm,
                capacity=c.capacity,
                determined=c.determined,
                low=c.low,
                high=c.high,
                crossing=c.crossing,
                levels=tuple(
                    R.LevelStatusResult(level=s.level, status=s.status, limiting=s.limiting) for s in c.levels
                ),
                monotone=c.monotone,
            )
            for c in caps
        ),
        verdicts=tuple(verdicts),
        gains=tuple(gains),
        ceilings=tuple(_ceilings(table, iv, ceiling)) if ceiling is not None and not iv.empty else (),
        invalid_levels=tuple(r for r in rows if not r.valid),
    )
