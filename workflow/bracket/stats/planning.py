"""Design before you measure: noise from a pilot, power by simulation, wall time, the chosen design.

What notebooks/design.py presents. Power and false-positive rates are simulated with known truth
(bracket.stats.simulate) and analysed by the same functions the workflow's analyze step uses
(bracket.stats.cells.compare_arms for a fixed design, bracket.stats.sequential.assess for an
adaptive one), so they are the rates bench/results/design_efficiency.md reports for the same
settings. The simulated experiment is one A/B comparison; an experiment with m comparisons
shares alpha among them (Holm; for an adaptive design Holm-type recycling across the looks,
bracket.stats.sequential), which lowers power a little.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from bracket.experiment import config
from bracket.experiment.design import draw
from bracket.stats.cells import compare_arms, valid_rows
from bracket.stats.compare import FASTER, NO_EFFECT, SLOWER, UNDETERMINED
from bracket.stats.drift import trend
from bracket.stats.io import from_runs, from_table
from bracket.stats.levels import variance_components
from bracket.stats.sequential import Plan, assess
from bracket.stats.simulate import simulate
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


def _verdicts(frame: pd.DataFrame, rounds: int, arms: int = 2) -> str:
    sub = frame[frame["position"] < arms * rounds]
    return compare_arms(sub, "A", "B", "sim", seed=1, reference="A", n_resamples=200).verdict


#: Half-width of the Monte Carlo interval every simulated rate is run to by default (+/- 3 points).
MC_HALF_WIDTH = 0.03
#: Level of that interval (Wilson score interval of a binomial proportion).
MC_LEVEL = 0.95
#: Simulated experiments per batch while running to MC_HALF_WIDTH, and the most run for one rate.
BATCH, MAX_REPS = 100, 1200


def mc_interval(hits: int, reps: int, level: float = MC_LEVEL) -> tuple[float, float]:
    """The Monte Carlo interval of a simulated rate of `hits` in `reps`: Wilson's score interval (statsmodels)."""
    lo, hi = proportion_confint(hits, reps, alpha=1 - level, method="wilson")
    return float(lo), float(hi)


def _settled(counts, reps: int, half_width: float) -> bool:
    """Every rate counted in `counts` known to within +/- half_width (its Monte Carlo interval's half-width)."""
    return all((lambda lo, hi: (hi - lo) / 2 <= half_width)(*mc_interval(k, reps)) for k in counts)


def _batches(reps: int | None, half_width: float, max_reps: int):
    """Batch sizes to run: `reps` at once when given, else BATCH at a time until the caller stops or max_reps."""
    if reps:
        yield reps
        return
    done = 0
    while done < max_reps:
        n = min(BATCH, max_reps - done)
        done += n
        yield n


def _rates(t: dict, reps: int) -> dict:
    """The fixed and adaptive rows' rates with the Monte Carlo interval of each power and false rate."""
    p_lo, p_hi = mc_interval(t["power"], reps)
    f_lo, f_hi = mc_interval(t["null_false"], reps)
    return {
        "false faster/slower": t["null_false"] / reps,
        "false low": f_lo,
        "false high": f_hi,
        "power": t["power"] / reps,
        "power low": p_lo,
        "power high": p_hi,
        "no effect settled": t["null_same"] / reps,
        "undetermined (effect)": t["undetermined"] / reps,
        "reps": reps,
    }


def design_grid(
    *,
    block_sd: float,
    run_sd: float,
    drift: float,
    effect: float,
    rounds=(2, 3, 4, 6, 8),
    runs=(3, 5, 10),
    reps: int | None = None,
    seed: int = 1,
    kind: str = "abab",
    half_width: float = MC_HALF_WIDTH,
    max_reps: int = MAX_REPS,
) -> pd.DataFrame:
    """Fixed designs: per (rounds, runs per block), over simulated A/B experiments.

    false positive: "faster"/"slower" with no true effect; power: the right direction with a true
    ratio `effect`; undetermined: share of the effect datasets left undetermined. Datasets are drawn
    once for the most rounds and cut to fewer (the first r rounds), as a fixed design would run them.
    `reps` simulated experiments per cell; None runs batches of BATCH until every power and false rate
    of the runs value is known to within +/- half_width (its Wilson interval at MC_LEVEL), at most
    max_reps. Each rate comes with its Monte Carlo interval ("power low"/"power high", "false
    low"/"false high") and the experiments it counts ("reps").
    """
    out = []
    top = max(rounds)
    right = FASTER if effect > 1 else SLOWER
    for n in runs:
        tally = {r: {"null_false": 0, "power": 0, "null_same": 0, "undetermined": 0} for r in rounds}
        rng = np.random.default_rng([seed, n])
        i = 0
        for size in _batches(reps, half_width, max_reps):
            for _ in range(size):
                null = from_table(
                    simulate(kind, rounds=top, runs=n, block_sd=block_sd, run_sd=run_sd, drift=drift, rng=rng, seed=i)
                )
                eff = from_table(
                    simulate(
                        kind,
                        effect=effect,
                        rounds=top,
                        runs=n,
                        block_sd=block_sd,
                        run_sd=run_sd,
                        drift=drift,
                        rng=rng,
                        seed=i,
                    )
                )
                i += 1
                for r in rounds:
                    v0, v1 = _verdicts(null, r), _verdicts(eff, r)
                    tally[r]["null_false"] += v0 in (FASTER, SLOWER)
                    tally[r]["null_same"] += v0 == NO_EFFECT
                    tally[r]["power"] += v1 == right
                    tally[r]["undetermined"] += v1 == UNDETERMINED
            if not reps and _settled([x for t in tally.values() for x in (t["power"], t["null_false"])], i, half_width):
                break
        for r in rounds:
            out.append(
                {
                    "design": f"fixed {r} rounds",
                    "rounds": r,
                    "runs per block": n,
                    "blocks": 2 * r,
                    **_rates(tally[r], i),
                    "mean rounds (effect)": float(r),
                    "mean rounds (no effect)": float(r),
                }
            )
    return pd.DataFrame(out)


def adaptive_row(
    *,
    block_sd: float,
    run_sd: float,
    drift: float,
    effect: float,
    runs: int = 5,
    min_rounds: int = 2,
    max_rounds: int = 8,
    margin: float | None = None,
    alpha: float = 0.05,
    reps: int | None = None,
    seed: int = 1,
    kind: str = "abab",
    half_width: float = MC_HALF_WIDTH,
    max_reps: int = MAX_REPS,
) -> dict:
    """An adaptive design (bracket.stats.sequential) on the same kind of simulated experiments; named by
    the rounds it may stop after (its first look, `Plan.first_look`, to max_rounds). `reps`, half_width and
    max_reps as in `design_grid`."""
    plan = Plan(
        arms=("A", "B"),
        reference="A",
        workloads=("sim",),
        kind=kind,
        seed=1,
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        margin=margin,
        alpha=alpha,
    )
    rng = np.random.default_rng([seed, runs, 7])
    t = {"null_false": 0, "null_same": 0, "power": 0, "undetermined": 0, "r1": 0, "r0": 0}
    i = 0
    for size in _batches(reps, half_width, max_reps):
        for _ in range(size):
            for eff in (1.0, effect):
                frame = from_table(
                    simulate(
                        kind,
                        effect=eff,
                        rounds=max_rounds,
                        runs=runs,
                        block_sd=block_sd,
                        run_sd=run_sd,
                        drift=drift,
                        rng=rng,
                        seed=i,
                    )
                )
                [c] = assess(frame, plan)["comparisons"]
                used = c["settled_round"] or max_rounds
                if eff == 1.0:
                    t["null_false"] += c["verdict"] in (FASTER, SLOWER)
                    t["null_same"] += c["verdict"] == NO_EFFECT
                    t["r0"] += used
                else:
                    t["power"] += c["verdict"] == (FASTER if effect > 1 else SLOWER)
                    t["undetermined"] += c["verdict"] == UNDETERMINED
                    t["r1"] += used
            i += 1
        if not reps and _settled([t["power"], t["null_false"]], i, half_width):
            break
    return {
        "design": f"adaptive {plan.first_look}-{max_rounds} rounds",
        "rounds": max_rounds,
        "runs per block": runs,
        "blocks": 2 * max_rounds,
        **_rates(t, i),
        "mean rounds (effect)": t["r1"] / i,
        "mean rounds (no effect)": t["r0"] / i,
    }


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


def write_design(
    experiment_path: str | Path, out_path: str | Path, design: dict, warning: str | None = None
) -> Experiment:
    """Write the experiment with `design` (merged over its own) to out_path, validated first; a `warning`
    (power_warning) goes into the file's header, where whoever runs it reads it. Returns the validated
    experiment. The file's own YAML is edited, not the validated experiment: what the user wrote stays as
    written, without the defaults validation fills."""
    raw = config.read_yaml(experiment_path)  # as the workflow reads it: a key written twice is refused
    raw["design"] = {**(raw.get("design") or {}), **design}
    if raw["design"].get("rounds") != "adaptive":
        for k in ("min_rounds", "max_rounds", "target", "margin"):
            raw["design"].pop(k, None)
    experiment = config.validate(raw, source=str(out_path))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(
        f"# design chosen in notebooks/design.py from {Path(experiment_path).name}\n"
        + (f"# WARNING: {warning}\n" if warning else "")
        + yaml.safe_dump(raw, sort_keys=False)
    )
    return experiment
