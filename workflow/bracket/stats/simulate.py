"""Simulated experiments with known truth, to check that the analysis says what is true.

Used by bench/design_efficiency.py (the committed design-efficiency table) and, lighter, by the
tests. The model of one run's decode rate, for arm a in the block at schedule position t:

    rate = base * effect_a * exp(drift * t + step * [t >= step_at] + u_block + e_run)

u_block ~ N(0, block_sd^2) (one draw per block: launch, thermal and cache state) and
e_run ~ N(0, run_sd^2). Arm "A" has effect 1, arm "B" has `effect`. Two departures seen on real
servers can be added: the first timed run of each block slower by `first_slow` (the H200
llama.cpp data: about 5 % at the client when no warmup absorbs it), and `wild` runs multiplied
by `wild_factor` (one 10x run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bracket.experiment.design import draw

#: Designs compared in the efficiency table, by the schedule kinds of bracket.experiment.design.
DESIGNS = ("sequential", "abab", "abba", "random")


def simulate(
    design: str,
    *,
    effect: float = 1.0,
    drift: float = 0.0,
    step: float = 0.0,
    step_at: float | None = None,
    rounds: int = 2,
    runs: int = 5,
    block_sd: float = 0.003,
    run_sd: float = 0.005,
    base: float = 50.0,
    rng: np.random.Generator,
    seed: int = 1,
    first_slow: float = 0.0,
    wild: int = 0,
    wild_factor: float = 10.0,
    two_speed: float = 0.0,
    fast_share: float = 0.5,
) -> pd.DataFrame:
    """One simulated A vs B experiment as a tidy frame (arm, block, round, position, run, value).

    `drift` is the log change per block (0.01 is 1 % per block); `step` a log jump applied from
    position `step_at` on (default: the middle of the schedule). `seed` draws the random design.
    `two_speed` > 0 makes every arm's requests take one of two stable paths (seed 000): each run,
    independently with chance `fast_share`, is faster by the ratio 1 + two_speed; the true ratio of
    the arms stays `effect` on either path.
    """
    if effect <= 0:
        raise ValueError(f"`effect` must be a positive ratio, got {effect!r}.")
    if rounds < 1 or runs < 1:
        raise ValueError(f"`rounds` and `runs` must be at least 1, got {rounds} and {runs}.")
    blocks = draw(["A", "B"], "A", design, rounds, seed)
    at = len(blocks) / 2 if step_at is None else step_at
    rows = []
    for b in blocks:
        t = b.position
        level = (
            np.log(base)
            + (np.log(effect) if b.arm == "B" else 0.0)
            + drift * t
            + (step if t >= at else 0.0)
            + rng.normal(0.0, block_sd)
        )
        vals = np.exp(level + rng.normal(0.0, run_sd, size=runs))
        if two_speed:
            vals *= np.where(rng.random(runs) < fast_share, 1.0 + two_speed, 1.0)
        vals[0] *= 1.0 - first_slow
        rows += [
            {"arm": b.arm, "workload": "sim", "block": t, "round": b.round, "position": t, "run": i, "value": float(v)}
            for i, v in enumerate(vals)
        ]
    df = pd.DataFrame(rows)
    if wild:
        at = rng.choice(len(df), size=wild, replace=False)
        df.loc[at, "value"] *= wild_factor
    return df


def simulate_arms(
    effects: dict[str, float],
    *,
    rounds: int,
    drift: float = 0.0,
    runs: int = 5,
    block_sd: float = 0.003,
    run_sd: float = 0.005,
    base: float = 50.0,
    rng: np.random.Generator,
    seed: int = 1,
    kind: str = "abab",
    workload: str = "sim",
) -> pd.DataFrame:
    """Several arms interleaved (the first is the reference), each with its true ratio `effects[arm]`:
    the model of `simulate` with one effect per arm, for experiments of several comparisons."""
    arms = list(effects)
    if any(not e > 0 for e in effects.values()):
        raise ValueError(f"every effect must be a positive ratio, got {effects!r}.")
    rows = []
    for b in draw(arms, arms[0], kind, rounds, seed):
        level = np.log(base) + np.log(effects[b.arm]) + drift * b.position + rng.normal(0.0, block_sd)
        rows += [
            {
                "arm": b.arm,
                "workload": workload,
                "block": b.position,
                "round": b.round,
                "position": b.position,
                "run": i,
                "value": float(v),
            }
            for i, v in enumerate(np.exp(level + rng.normal(0.0, run_sd, runs)))
        ]
    return pd.DataFrame(rows)
