"""Generators with known truth for the load statistics' calibration (bench/load_quantiles.py, load_capacity.py).

Per-request latency = the block's scale x a draw from a stated shape:

    latency_ij = exp(mu + u_j + drift x position_j + level_drift x level_position_j) x X_ij,

u_j ~ N(0, tau^2) the fresh server's effect, position_j the block's place in the schedule (one arm's blocks at
0, 2, 4, ... as in A/B/A/B), level_position_j the level's place inside block j (rotated across blocks), X from
SHAPES. The truth a block interval estimates is the typical server's quantile at the arm's mean position:
exp(mu + drift x mean position + level_drift x mean level position) x Q_X(p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

#: Latency shapes (median about 1): lognormal body; a body with 3 % of requests 3x slower (preempted, queued
#: behind a long prefill); a shifted exponential (queueing wait on top of a fixed cost).
SHAPES = ("lognormal", "slow_tail", "queue")


def draw(shape: str, rng: np.random.Generator, size) -> np.ndarray:
    if shape == "lognormal":
        return np.exp(0.3 * rng.standard_normal(size))
    if shape == "slow_tail":
        x = np.exp(0.2 * rng.standard_normal(size))
        return np.where(rng.random(size) < 0.03, 3.0 * x, x)
    if shape == "queue":
        return 0.5 + rng.exponential(0.7, size)
    raise ValueError(f"unknown shape {shape!r}; choose one of {SHAPES}.")


def cdf(shape: str, x: float) -> float:
    if shape == "lognormal":
        return float(stats.norm.cdf(math.log(x) / 0.3))
    if shape == "slow_tail":
        return float(0.97 * stats.norm.cdf(math.log(x) / 0.2) + 0.03 * stats.norm.cdf(math.log(x / 3.0) / 0.2))
    if shape == "queue":
        return float(stats.expon.cdf(x - 0.5, scale=0.7))
    raise ValueError(f"unknown shape {shape!r}; choose one of {SHAPES}.")


def true_quantile(shape: str, p: float) -> float:
    """Q_X(p) of a shape, exactly (root of its CDF)."""
    return float(optimize.brentq(lambda x: cdf(shape, x) - p, 1e-6, 1e3, xtol=1e-12))


def block_quantiles(
    rng: np.random.Generator,
    *,
    sims: int,
    blocks: int,
    requests: int,
    p: float,
    shape: str,
    tau: float,
    drift: float,
    level_drift: float = 0.0,
    levels: int = 5,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Each simulated experiment's per-block type-8 quantile (sims, blocks), the blocks' positions, and the truth."""
    pos = 2.0 * np.arange(blocks)
    lpos = (np.arange(blocks) + rng.integers(levels)) % levels
    u = tau * rng.standard_normal((sims, blocks))
    scale = np.exp(u + drift * pos + level_drift * lpos)
    q = np.quantile(draw(shape, rng, (sims, blocks, requests)), p, axis=-1, method="median_unbiased")
    truth = math.exp(drift * pos.mean() + level_drift * lpos.mean()) * true_quantile(shape, p)
    return q * scale, pos, truth


@dataclass(frozen=True)
class BatchServer:
    """A server with a known batching law: one decode step of a batch of N takes step_s(N) = a + b N seconds.

    Closed loop, N users, no think time: the batch is N. A request's TPOT is the step time x exp(sigma Z) (Z standard
    normal), its TTFT the prefill time plus step time x E (E ~ Exp(1): waiting for the next slot), both scaled by the
    block's server effect and drift. So at scale 1 the true p99 TPOT is step_s(N) exp(2.326 sigma) and the true p99
    TTFT is prefill_s + step_s(N) ln(100)."""

    a: float = 0.010
    b: float = 0.0015
    prefill_s: float = 0.05
    sigma: float = 0.05
    tokens: int = 16

    def step_s(self, n):
        return self.a + self.b * np.asarray(n, dtype=float)

    def true_tpot(self, n, p: float = 0.99):
        return self.step_s(n) * math.exp(stats.norm.ppf(p) * self.sigma)

    def true_ttft(self, n, p: float = 0.99):
        return self.prefill_s + self.step_s(n) * -math.log(1 - p)


def closed_loop_level(
    rng: np.random.Generator, server: BatchServer, users: int, scale: float, warmup_s: float, window_s: float
) -> dict:
    """One level of one block, as the driver's records would hold it (columns of the load contract; no token lists:
    the statistics interpolate arrivals between first token and end)."""
    step = server.step_s(users)
    mean = server.prefill_s + step + (server.tokens - 1) * step
    m = int(math.ceil((warmup_s + window_s) / (scale * mean * 0.5))) + 4
    ttft = scale * (server.prefill_s + step * rng.exponential(1.0, (users, m)))
    tpot = scale * step * np.exp(server.sigma * rng.standard_normal((users, m)))
    dur = ttft + (server.tokens - 1) * tpot
    sent = np.cumsum(dur, axis=1) - dur + rng.uniform(0, step, (users, 1))
    end = sent + dur
    stop = warmup_s + window_s
    keep = sent < stop
    phase = np.where(sent < warmup_s, "ramp", np.where(end <= stop, "steady", "drain"))
    return dict(
        user=np.broadcast_to(np.arange(users)[:, None], (users, m))[keep],
        sent_s=sent[keep],
        first_token_s=(sent + ttft)[keep],
        end_s=end[keep],
        ttft_s=ttft[keep],
        tpot_s=tpot[keep],
        load_phase=phase[keep],
    )


def bracketed_experiment(
    rng: np.random.Generator,
    server: BatchServer,
    *,
    levels=(1, 2, 4, 8, 16, 32),
    blocks: int = 6,
    arms=("A", "B"),
    effect: float = 1.0,
    tau: float = 0.03,
    drift: float = 0.005,
    level_drift: float = 0.005,
    warmup_s: float = 5.0,
    window_s: float = 30.0,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """A/B/A/B blocks (`blocks` per arm), each a fresh server running every level, the order rotated across blocks.

    The second arm's latencies are divided by `effect` (effect 1: the arms are identical). Returns the request frame,
    the level summaries and, per arm, the scale at its mean schedule and level position (the truth's scale)."""
    reqs, lv = [], []
    order = np.arange(len(levels))
    truth = {}
    for pos in range(blocks * len(arms)):
        arm = arms[pos % len(arms)]
        u = tau * rng.standard_normal()
        rot = np.roll(order, pos // len(arms))
        for lpos, li in enumerate(rot):
            scale = math.exp(u + drift * pos + level_drift * lpos) / (effect if arm == arms[-1] else 1.0)
            r = closed_loop_level(rng, server, levels[li], scale, warmup_s, window_s)
            n = r["sent_s"].size
            reqs.append(pd.DataFrame({"arm": arm, "block": pos, "level": float(levels[li]), **r}))
            reqs[-1]["completion_tokens"] = server.tokens
            reqs[-1]["error"] = None
            lv.append(
                dict(
                    arm=arm,
                    block=pos,
                    round=pos // len(arms),
                    position=pos,
                    level=float(levels[li]),
                    level_position=lpos,
                    steady_start_s=warmup_s,
                    steady_end_s=warmup_s + window_s,
                    valid=True,
                    requests=n,
                )
            )
    for i, arm in enumerate(arms):
        pos = np.arange(i, blocks * len(arms), len(arms))
        truth[arm] = math.exp(drift * pos.mean() + level_drift * (len(levels) - 1) / 2) / (
            effect if arm == arms[-1] else 1.0
        )
    return pd.concat(reqs, ignore_index=True), pd.DataFrame(lv), truth
