"""What a load level plans before it sends anything, and how it reads what came back: the seeded arrival schedule,
the drawn lengths, each request's phase, and the level's send lag and client cost.

Pure functions of numbers (numpy), so each is tested alone; bracket.measure.load runs them against a server.
"""

from __future__ import annotations

import hashlib

import numpy as np

# A level is invalid when the client fell behind; these are its codes (the record's invalid_reason.code).
CLIENT_BEHIND = "client_behind"  # send lag p99 past the tolerance
CLIENT_CPU = "client_cpu_saturated"  # the client's CPU busy past its limit of one core
NO_REQUESTS = "no_steady_requests"  # the window held no request that was sent and ended inside it


def level_seed(seed: int, workload: str, level: float, round_: int) -> int:
    """The seed of one level's schedule and draws: the same for every arm of a round (the arms see one schedule),
    different across rounds, levels and workloads. A hash, so nearby seeds give unrelated streams."""
    key = f"{seed}:{workload}:{level!r}:{round_}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


def arrival_schedule(rate: float, duration_s: float, arrivals: str, seed: int) -> np.ndarray:
    """Send times (seconds from the level's start) of an open loop at `rate` requests per second over duration_s.

    poisson: gaps drawn independently from Exp(mean 1/rate) (numpy's PCG64 from `seed`), the first gap included, so
    the count in any interval is Poisson(rate x its length); constant: i / rate for i = 0, 1, ...
    """
    if rate <= 0 or duration_s <= 0:
        raise ValueError(f"need rate > 0 and duration_s > 0, got {rate} and {duration_s}")
    if arrivals == "constant":
        return np.arange(0.0, duration_s, 1.0 / rate)
    if arrivals != "poisson":
        raise ValueError(f"arrivals must be 'poisson' or 'constant', got {arrivals!r}")
    rng = np.random.default_rng(seed)
    expected = rate * duration_s
    n = int(expected + 10 * np.sqrt(expected) + 20)  # enough gaps to pass duration_s but for ~1e-20 odds
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    while times[-1] < duration_s:  # the odds above, kept exact
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / rate, n))])
    return times[times < duration_s]


def draw_lengths(bounds: tuple[int, int] | None, n: int, seed: int, stream: int) -> np.ndarray | None:
    """n lengths drawn uniformly from bounds[0]..bounds[1] inclusive (all equal to it when fixed); None for None.
    `stream` separates the output lengths' draws from the prompts' under one seed."""
    if bounds is None:
        return None
    lo, hi = bounds
    if lo == hi:
        return np.full(n, lo, dtype=np.int64)
    return np.random.default_rng([seed, stream]).integers(lo, hi + 1, n)


def sized_prompt(text: str, words: int | None) -> str:
    """The prompt cut or repeated to `words` whitespace-separated words (None: as written)."""
    if words is None:
        return text
    parts = text.split() or ["."]
    reps = -(-words // len(parts))
    return " ".join((parts * reps)[:words])


def phase(sent_s: float, end_s: float | None, steady_start_s: float, steady_end_s: float) -> str:
    """A request's load_phase: warmup (ended before the window opened), ramp (sent before it opened, ended after),
    steady (sent in the window and ended by its close), drain (sent in the window, not ended by its close)."""
    ended = end_s is not None and end_s <= steady_end_s
    if sent_s < steady_start_s:
        return "warmup" if end_s is not None and end_s < steady_start_s else "ramp"
    return "steady" if ended else "drain"


def lag_stats(scheduled_s, sent_s) -> dict:
    """sent - scheduled over a level's requests: p50, p99, max (seconds; None without requests)."""
    lag = np.asarray(sent_s, dtype=float) - np.asarray(scheduled_s, dtype=float)
    lag = lag[np.isfinite(lag)]
    if not lag.size:
        return {"send_lag_p50_s": None, "send_lag_p99_s": None, "send_lag_max_s": None}
    p50, p99 = np.quantile(lag, [0.5, 0.99])
    return {"send_lag_p50_s": float(p50), "send_lag_p99_s": float(p99), "send_lag_max_s": float(lag.max())}


def verdict(lag: dict, cpu_s: float, wall_s: float, n_steady: int, tolerance_s: float, cpu_limit: float) -> dict:
    """valid and invalid_reason of a level: the client fell behind (send lag p99 past tolerance_s), its CPU was
    busy past cpu_limit of one core (cpu_s / wall_s), or no request counted; the first that holds is the reason."""
    busy = cpu_s / wall_s if wall_s > 0 else 0.0
    p99 = lag["send_lag_p99_s"]
    if p99 is not None and p99 > tolerance_s:
        return {
            "valid": False,
            "invalid_reason": {"code": CLIENT_BEHIND, "send_lag_p99_s": p99, "tolerance_s": tolerance_s},
        }
    if busy > cpu_limit:
        return {"valid": False, "invalid_reason": {"code": CLIENT_CPU, "cpu_per_wall_s": busy, "limit": cpu_limit}}
    if n_steady == 0:
        return {"valid": False, "invalid_reason": {"code": NO_REQUESTS, "n_steady": 0}}
    return {"valid": True, "invalid_reason": None}


def excluded_spans(rows: list[dict], steady_start_s: float, steady_end_s: float) -> dict:
    """How long the excluded parts lasted: warmup (level start to the window), ramp (the window's opening to the
    last ramp request's end), drain (the window's close to the last request's end); seconds, 0 when none."""
    ramp_ends = [r["end_s"] for r in rows if r["load_phase"] == "ramp" and r["end_s"] is not None]
    ends = [r["end_s"] for r in rows if r["end_s"] is not None]
    return {
        "warmup_s": steady_start_s,
        "ramp_s": max(0.0, max(ramp_ends, default=steady_start_s) - steady_start_s),
        "drain_s": max(0.0, max(ends, default=steady_end_s) - steady_end_s),
    }
