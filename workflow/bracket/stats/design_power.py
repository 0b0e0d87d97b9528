"""Power and false positives of each design, by simulation with known truth (bracket.stats.simulate).

Each simulated A/B experiment is analysed by the functions the workflow's analyze step uses
(bracket.stats.cells.compare_arms for a fixed design, bracket.stats.sequential.assess for an adaptive one),
so the rates are those bench/results/design_efficiency.md reports for the same settings. Every rate comes
with its Monte Carlo interval (Wilson, statsmodels), and by default is run until that interval is
+/- MC_HALF_WIDTH narrow. What notebooks/design.py shows, through bracket.stats.planning.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from bracket.stats.cells import compare_arms
from bracket.stats.compare import FASTER, NO_EFFECT, SLOWER, UNDETERMINED
from bracket.stats.io import from_table
from bracket.stats.sequential import Plan, assess
from bracket.stats.simulate import simulate


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


def design_table(
    noise: dict,
    *,
    effect: float,
    rounds_options=(2, 3, 4, 6, 8),
    runs_options=(3, 5, 10),
    adaptive: bool = True,
    min_rounds: int = 2,
    max_rounds: int = 8,
    margin: float | None = None,
    alpha: float = 0.05,
    **mc,
) -> pd.DataFrame:
    """Every design listed, simulated at the noise designed with (`design_grid` for the fixed ones, `adaptive_row`
    per runs per block for the adaptive one) and, where the pilot's point estimate of block noise differs, at it
    too ("power at the point estimate" with its interval): the power a design has lies between the two as far as
    the pilot can tell. `mc`: reps, half_width, seed, kind, max_reps as in `design_grid`."""

    def designs(sd: float) -> pd.DataFrame:
        common = dict(block_sd=sd, run_sd=noise["run_sd"], drift=noise["drift"], effect=effect, **mc)
        rows = [design_grid(rounds=tuple(rounds_options), runs=tuple(runs_options), **common)]
        for n in runs_options if adaptive else ():
            one = adaptive_row(
                runs=n, min_rounds=min_rounds, max_rounds=max_rounds, margin=margin, alpha=alpha, **common
            )
            rows.append(pd.DataFrame([one]))
        return pd.concat(rows, ignore_index=True)

    table = designs(noise["block_sd"])
    point = noise.get("block_sd_point")
    if point is not None and point != noise["block_sd"]:
        at_point = designs(point).set_index(["design", "runs per block"])
        key = list(zip(table["design"], table["runs per block"]))
        for suffix in ("", " low", " high"):
            table["power at the point estimate" + suffix] = [at_point["power" + suffix].get(k) for k in key]
    return table
