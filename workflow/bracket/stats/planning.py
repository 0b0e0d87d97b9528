"""Design before you measure: noise from a pilot, power by simulation, wall time, the chosen design.

What notebooks/design.py presents; the notebook computes and decides nothing itself. The noise to design
with (`design_noise`: a pilot's variance components over the stated values), each design's power and false
positives (`design_table`, simulated with known truth and analysed by the workflow's own analysis:
bracket.stats.design_power), what it costs (`with_costs`: blocks and wall time at the pilot's timings), the
choice (`choose_design`, honouring min_power) and the experiment file written with it (`write_design`, from
the validated experiment). The simulated experiment is one A/B comparison; an experiment with m comparisons
shares alpha among them (Holm; for an adaptive design Holm-type recycling across the looks,
bracket.stats.sequential), which lowers power a little.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from bracket.experiment import config
from bracket.experiment.design import draw
from bracket.experiment.schema import load_schema
from bracket.stats.cells import valid_rows
from bracket.stats.design_power import (  # noqa: F401  (the simulated rates, where the notebook reads them)
    MAX_REPS,
    MC_HALF_WIDTH,
    MC_LEVEL,
    adaptive_row,
    design_grid,
    design_table,
    mc_interval,
)
from bracket.stats.drift import trend
from bracket.stats.io import from_runs
from bracket.stats.levels import variance_components
from bracket.typed.experiment import Experiment

#: Power below which the notebook writes a design only with a warning in the file and the notebook.
MIN_POWER = 0.8
#: Two-sided level of the block-noise interval; the design uses its upper end (a one-sided 95 % bound).
NOISE_LEVEL = 0.90


def pilot_noise(runs: pd.DataFrame, reference: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Variance components per (arm, workload) of a pilot's runs.csv, and the values to design with.

    Returns (table, noise): table has arm, workload, blocks, runs per block, between-block sd and
    within-block sd of log(rate) (one-way random effects, bracket.stats.levels); noise is
    {block_sd, run_sd, drift, source, block_sd_point, block_sd_low, block_sd_high, block_df, ...}:
    block_sd is the pessimistic value to design with, the upper end of the block noise's interval
    (`block_noise`; a pilot of 3 blocks per cell knows block noise to within a factor of about 3, and
    the median of 12 cells' sds, 2.39 % on the draft sweep's pilot, lay below the 4.7-6.9 % the
    pooled variances gave: issue 29); run_sd the median within-block sd; drift the largest |drift
    per block| (Theil-Sen, block medians) over workloads. block_sd and drift are None when no cell
    has two blocks (a pilot of one round cannot measure them).
    """
    frame = valid_rows(from_runs(runs))
    reference = reference or str(frame["arm"].iloc[0])
    rows = []
    for (arm, wl), sub in frame.groupby(["arm", "workload"], sort=True):
        between, within, m, n = (
            variance_components(sub["value"].to_numpy(), sub["block"].to_numpy())
            if sub["block"].nunique() >= 2
            else (math.nan, _within(sub), sub["block"].nunique(), len(sub))
        )
        rows.append(
            {
                "arm": arm,
                "workload": wl,
                "blocks": int(m),
                "runs per block": round(float(n), 1),
                "between-block sd": math.sqrt(between) if between == between else None,
                "within-block sd": math.sqrt(within) if within == within else None,
            }
        )
    table = pd.DataFrame(rows)
    two = table[table["blocks"] >= 2]
    drifts = []
    for _, sub in frame.groupby("workload"):
        t = trend(sub, reference) if reference in set(sub["arm"]) else None
        if t is not None and t.slope_theil_sen is not None:
            drifts.append(abs(t.slope_theil_sen))
    band = block_noise(frame)
    noise = {
        "block_sd": band["high"] if band else None,
        "block_sd_point": band["point"] if band else None,
        "block_sd_low": band["low"] if band else None,
        "block_sd_high": band["high"] if band else None,
        "block_df": band["df"] if band else None,
        "block_sd_level": NOISE_LEVEL,
        "block_sd_median_of_cells": float(two["between-block sd"].median()) if not two.empty else None,
        "run_sd": float(table["within-block sd"].dropna().median()) if table["within-block sd"].notna().any() else None,
        "drift": max(drifts) if drifts else None,
        "source": "pilot",
    }
    return table, noise


def block_noise(frame: pd.DataFrame, level: float = NOISE_LEVEL) -> dict | None:
    """Between-block sd of log rate pooled over the pilot's cells, with a chi-square interval.

    One-way random effects per cell (bracket.stats.levels): MSB_c over m_c - 1 df. Cells of one arm
    share its blocks (every workload runs in each block), so they are not independent: MSB is
    averaged over an arm's workloads and counts m - 1 df once per arm. Pooled over arms,
    MSB = sum (m_a - 1) MSB_a / df with df = sum (m_a - 1), and
        sigma_b^2 = (MSB - MSW) / n0,   interval (MSB df / chi2_{1-(1-level)/2}(df) - MSW) / n0 to
        (MSB df / chi2_{(1-level)/2}(df) - MSW) / n0
    (MSW, on many more df, taken as known; Searle, Casella & McCulloch 1992, ch. 3). Averaging
    variances, not taking the median of sds, is what a design must plan for: a sd's median over
    cells of 3 blocks lies well below the root of the mean variance. Returns {point, low, high, df,
    level} as sds (low clipped at 0), or None with no arm of two blocks.
    """
    msb, dfs, msw, n0s = [], [], [], []
    for _, sub_arm in frame.groupby("arm", sort=True):
        per = []
        for _, sub in sub_arm.groupby("workload", sort=True):
            y, b = np.log(sub["value"].to_numpy(float)), sub["block"].to_numpy()
            ids = np.unique(b)
            m, N = ids.size, y.size
            if m < 2 or N - m < 1:
                continue
            groups = [y[b == i] for i in ids]
            n = np.array([g.size for g in groups], float)
            per.append(
                (
                    (n * (np.array([g.mean() for g in groups]) - y.mean()) ** 2).sum() / (m - 1),
                    sum(((g - g.mean()) ** 2).sum() for g in groups) / (N - m),
                    (N - (n**2).sum() / N) / (m - 1),
                    m,
                )
            )
        if per:
            msb.append(np.mean([p[0] for p in per]))
            msw.append(np.mean([p[1] for p in per]))
            n0s.append(np.mean([p[2] for p in per]))
            dfs.append(per[0][3] - 1)
    if not dfs:
        return None
    df = float(sum(dfs))
    MSB = float(np.dot(dfs, msb) / df)
    MSW, n0 = float(np.mean(msw)), float(np.mean(n0s))
    a = (1 - level) / 2
    sd = lambda v: math.sqrt(max(v, 0.0) / n0)  # noqa: E731
    return {
        "point": sd(MSB - MSW),
        "low": sd(MSB * df / stats.chi2.isf(a, df) - MSW),
        "high": sd(MSB * df / stats.chi2.ppf(a, df) - MSW),
        "df": df,
        "level": level,
    }


def _within(sub: pd.DataFrame) -> float:
    y = np.log(sub["value"].to_numpy(dtype=float))
    return float(np.var(y, ddof=1)) if y.size >= 2 else math.nan


def pilot_timings(runs: pd.DataFrame, meta_dir: str | Path | None = None) -> dict:
    """A pilot's timings: seconds per timed request (mean wall_s per workload, warmups included), and from
    the blocks' metadata (block-*.meta.json) the median server start (ready_s), teardown (from the end of
    the block's last request to ended_at, when the server is down) and the gap between one block's end
    and the next one's launch (cooldown and orchestration). Those three are None without metadata."""
    wall = pd.to_numeric(runs.get("wall_s"), errors="coerce")
    per_wl = runs.assign(wall=wall).groupby("workload")["wall"].mean().dropna().to_dict() if "workload" in runs else {}
    metas = []
    for p in sorted(Path(meta_dir).glob("block-*.meta.json")) if meta_dir and Path(meta_dir).is_dir() else []:
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and m.get("status", "complete") == "complete":
            metas.append(m)
    ready = [float(m["ready_s"]) for m in metas if _num(m.get("ready_s")) and m["ready_s"] > 0]
    teardown = []
    if {"block", "started_at", "wall_s"} <= set(runs.columns):
        ends = (pd.to_numeric(runs["started_at"], errors="coerce") + wall).groupby(runs["block"]).max().to_dict()
        for m in metas:
            if _num(m.get("ended_at")) and _num(ends.get(m.get("block"))):
                teardown.append(float(m["ended_at"]) - float(ends[m["block"]]))
    spans = sorted(
        (float(m["started_at"]), float(m["ended_at"]))
        for m in metas
        if _num(m.get("started_at")) and _num(m.get("ended_at"))
    )
    gaps = [nxt[0] - cur[1] for cur, nxt in zip(spans, spans[1:])]
    med = lambda x: float(np.median(x)) if x else None
    return {
        "request_s": {str(k): float(v) for k, v in per_wl.items()},
        "start_s": med(ready),
        "teardown_s": med([t for t in teardown if t >= 0]),
        "gap_s": med([g for g in gaps if g >= 0]),
        "wall_s": spans[-1][1] - spans[0][0] if spans else None,
        "blocks": len(spans),
    }


def _num(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def wall_time(
    timings: dict,
    *,
    arms: int,
    blocks: int,
    runs_per_block: int,
    warmup_runs: int,
    cooldown_s: float,
    start_s: float | None = None,
) -> float:
    """Seconds an experiment of `blocks` blocks takes: per block a server start, warmups and timed runs of
    every workload and the server's teardown; between blocks the cooldown, or the pilot's measured gap from
    one block's end to the next one's launch when that is longer (it includes the cooldown and the
    workflow's own overhead)."""
    start = timings.get("start_s") if start_s is None else start_s
    per_block = (
        (start or 0.0)
        + (timings.get("teardown_s") or 0.0)
        + (warmup_runs + runs_per_block) * sum(timings["request_s"].values())
    )
    return blocks * per_block + max(blocks - 1, 0) * max(cooldown_s, timings.get("gap_s") or 0.0)


def schedule(arms: list[str], kind: str, rounds: int, seed: int = 1) -> str:
    """The order a design draws, as one line (bracket.experiment.design.draw)."""
    return " ".join(b.arm for b in draw(arms, arms[0], kind, rounds, seed))


def power_warning(power: float | None, block_sd: float, min_power: float = MIN_POWER) -> str | None:
    """The warning a design below `min_power` carries into its file and the notebook, else None."""
    if power is None or power >= min_power:
        return None
    return (
        f"this design's power is {power:.0%} at a between-block sd of {block_sd:.2%} (the upper end of "
        f"the pilot's interval), below the {min_power:.0%} asked: expect it to leave the effect "
        f"undetermined often; add rounds or choose an adaptive design with a larger max_rounds"
    )


def design_noise(
    runs: pd.DataFrame | None, reference: str | None, stated: dict, pessimistic: bool = True
) -> tuple[pd.DataFrame | None, dict]:
    """The noise to design with: the stated values {block_sd, run_sd, drift}, overlaid with what a pilot's
    runs.csv measured (`pilot_noise`) where it measured it. block_sd is the upper end of the pilot's
    block-noise interval, or with `pessimistic` False its point estimate. Returns (the pilot's variance
    components or None, the noise with its `source`: "stated", "pilot", or "pilot_without_block_noise" where the
    pilot ran one block per arm and the between-block noise is the stated one)."""
    noise = {**stated, "source": "stated"}
    if runs is None:
        return None, noise
    components, measured = pilot_noise(runs, reference)
    for key in ("block_sd", "run_sd", "drift", "block_sd_point", "block_sd_low", "block_sd_high", "block_df"):
        if measured.get(key) is not None:
            noise[key] = measured[key]
    if not pessimistic and measured.get("block_sd_point") is not None:
        noise["block_sd"] = measured["block_sd_point"]
    noise["source"] = "pilot" if measured["block_sd"] is not None else "pilot_without_block_noise"
    return components, noise


def pilot_per_block(runs: pd.DataFrame) -> tuple[float, float]:
    """A pilot's timed runs and warmups per block and workload (medians over its blocks)."""
    warm = runs["warmup"].astype(bool) if "warmup" in runs else pd.Series(False, index=runs.index)
    warmups = float(runs[warm].groupby(["block", "workload"]).size().median()) if warm.any() else 0.0
    return float(runs.groupby(["block", "workload"]).size().median()) - warmups, warmups


def with_costs(table: pd.DataFrame, timings: dict, experiment: Experiment) -> pd.DataFrame:
    """The designs with what each costs in `experiment` at the pilot's timings (`wall_time`): its blocks, its
    wall time at the rounds it spends when the effect is there ("mean rounds (effect)") and at its budget of
    rounds. A round is a block per arm (and the bracket design's closing reference block)."""
    d0 = experiment.design
    per_round = len(experiment.arms) + (1 if d0.kind == "bracket" else 0)

    def hours(rounds: float, runs: int) -> float:
        blocks = math.ceil(rounds * per_round)
        return (
            wall_time(
                timings,
                arms=len(experiment.arms),
                blocks=blocks,
                runs_per_block=runs,
                warmup_runs=d0.warmup_runs,
                cooldown_s=d0.cooldown_s,
            )
            / 3600
        )

    out = table.copy()
    spent, budget, runs = out["mean rounds (effect)"], out["rounds"], out["runs per block"]
    out["experiment blocks"] = [math.ceil(r * per_round) for r in spent]
    out["wall time (h)"] = [hours(r, n) for r, n in zip(spent, runs)]
    out["wall time at the budget (h)"] = [hours(r, n) for r, n in zip(budget, runs)]
    return out


@dataclass(frozen=True)
class Choice:
    """The design chosen: the experiment's `design:` keys to write, the table's row it was simulated as (None:
    a fixed design the table does not hold), its power there, and the warning a power below min_power carries."""

    design: dict
    row: dict | None
    power: float | None
    warning: str | None


def choose_design(
    table: pd.DataFrame,
    how: str,
    *,
    block_sd: float,
    kind: str,
    min_rounds: int,
    max_rounds: int,
    margin: float | None = None,
    min_power: float = MIN_POWER,
) -> Choice:
    """The design `how` asks for, from the simulated table (`design_table`, `with_costs`).

    "adaptive": the adaptive design of `kind`, min_rounds to max_rounds (and margin), at the runs per block of
    the highest power, then the least wall time. "cheapest": among the fixed designs whose power reaches
    min_power, the fewest blocks, then the least wall time; when none reaches it, the fixed design of the
    highest power (then the fewest blocks), with a warning. "fixed R N": R rounds of N runs per block.
    """
    fixed = table[table["design"].str.startswith("fixed")]
    if how == "adaptive":
        runs = _best(table[table["design"].str.startswith("adaptive")], ["power", "wall time (h)"], [False, True])
        design = {"kind": kind, "rounds": "adaptive", "min_rounds": min_rounds, "max_rounds": max_rounds}
        design["runs_per_block"] = int(runs["runs per block"])
        if margin:
            design["margin"] = margin
    elif how == "cheapest":
        ok = fixed[fixed["power"] >= min_power]
        pick = (
            _best(ok, ["blocks", "wall time (h)"], [True, True])
            if not ok.empty
            else _best(fixed, ["power", "blocks", "wall time (h)"], [False, True, True])
        )
        design = {"rounds": int(pick["rounds"]), "runs_per_block": int(pick["runs per block"])}
    else:
        parts = how.split()
        if len(parts) != 3 or parts[0] != "fixed" or not parts[1].isdigit() or not parts[2].isdigit():
            raise ValueError(f"choose is {how!r}: write 'adaptive', 'cheapest' or 'fixed R N' (R rounds of N runs)")
        design = {"rounds": int(parts[1]), "runs_per_block": int(parts[2])}
    adaptive = design["rounds"] == "adaptive"
    rows = table[
        (table["runs per block"] == design["runs_per_block"])
        & (table["design"].str.startswith("adaptive") if adaptive else table["design"].str.startswith("fixed"))
        & (True if adaptive else table["rounds"] == design["rounds"])
    ]
    row = rows.iloc[0].to_dict() if not rows.empty else None
    power = float(row["power"]) if row is not None else None
    return Choice(design, row, power, power_warning(power, block_sd, min_power))


def _best(rows: pd.DataFrame, by: list[str], ascending: list[bool]) -> pd.Series:
    return rows.sort_values(by, ascending=ascending, kind="stable").iloc[0]


def write_design(
    experiment: Experiment, out_path: str | Path, design: dict, warning: str | None = None, source: str = ""
) -> Experiment:
    """Write `experiment` (validated: config.load, or experiment.resolved.json through resolved.read) with `design`
    merged over its own to out_path, validated again first; a `warning` (power_warning) goes into the file's
    header, where whoever runs it reads it, and `source` (the file it came from) into its first line. Returns
    the validated experiment. What is written is the experiment as validated less every value equal to the
    schema's default (config.without_defaults): what the user wrote, without the defaults validation fills."""
    data = config.without_defaults(experiment, load_schema())
    data["design"] = {**(data.get("design") or {}), **design}
    if data["design"].get("rounds") != "adaptive":
        for k in ("min_rounds", "max_rounds", "target", "margin"):
            data["design"].pop(k, None)
    written = config.validate(data, source=str(out_path))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(
        f"# design chosen in notebooks/design.py{f' from {source}' if source else ''}\n"
        + (f"# WARNING: {warning}\n" if warning else "")
        + yaml.safe_dump(data, sort_keys=False)
    )
    return written
