"""A load workload as the experiment states it: its levels and settings with defaults, and what makes it unrunnable.

The schema (workloads.NAME.load) describes every key; absent keys take DEFAULTS here, so no default is filled into
experiments that have no load workload. The driver (bracket.measure.load) runs a `LoadSpec`, a frozen value that
tests can also build by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from bracket.typed.experiment import Experiment, Workload

DEFAULTS = {
    "arrivals": "poisson",
    "think_s": 0.0,
    "warmup_s": 5.0,
    "steady_s": 30.0,
    "lag_tolerance_s": 0.05,
    "cpu_limit": 0.9,
}
# One block runs every level of every load workload: their warm-ups and windows together are held to this, so a
# design of many blocks still finishes in days (an experiment that needs more is several experiments).
MAX_LEVEL_SECONDS_PER_BLOCK = 6 * 3600
# Engines whose stream the driver reads: the OpenAI-style SSE completions stream. Ollama's ndjson is not read yet.
STREAMS_READ = ("vllm", "sglang", "llamacpp", "openai", "reference", "auto")
# Whether a block runs a load workload's levels (bracket.measure.load.run_levels): it does (bracket.block.runner._load).
# False refuses a load workload at validation, for a runner that would send its prompts one at a time.
RUN_BY_BLOCKS = True


@dataclass(frozen=True)
class LoadSpec:
    """One load workload's settings, defaults filled (see the schema's workloads.NAME.load)."""

    name: str
    level_kind: str  # "users" (closed loop) or "rate" (open loop, requests per second)
    levels: tuple[float, ...]
    arrivals: str = "poisson"
    seed: int = 0
    think_s: float = 0.0
    warmup_s: float = 5.0
    steady_s: float = 30.0
    drain_s: float = 60.0
    output_tokens: tuple[int, int] = (128, 128)
    prompt_words: tuple[int, int] | None = None
    lag_tolerance_s: float = 0.05
    cpu_limit: float = 0.9
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None

    @property
    def closed(self) -> bool:
        return self.level_kind == "users"

    def level_seconds(self) -> float:
        """The warm-ups and steady windows of every level, the drains left out: a block's least time on this workload."""
        return len(self.levels) * (self.warmup_s + self.steady_s)


def is_load(wl: Workload | None) -> bool:
    return wl is not None and wl.kind == "load"


def spec(exp: Experiment, name: str) -> LoadSpec:
    """The load workload `name` with its defaults: output length request.max_tokens, seed design.seed, drain
    request.timeout_s where the experiment states none."""
    ld = exp.workloads[name].load
    if ld is None:
        raise ValueError(f"workloads.{name} has no load settings; set workloads.{name}.load")
    closed = ld.users is not None
    levels = tuple(float(v) for v in (ld.users if closed else ld.rate or ()))
    n = exp.request.max_tokens
    slo = ld.slo
    return LoadSpec(
        name=name,
        level_kind="users" if closed else "rate",
        levels=levels,
        arrivals=ld.arrivals or DEFAULTS["arrivals"],
        seed=exp.design.seed if ld.seed is None else int(ld.seed),
        think_s=float(DEFAULTS["think_s"] if ld.think_s is None else ld.think_s),
        warmup_s=float(DEFAULTS["warmup_s"] if ld.warmup_s is None else ld.warmup_s),
        steady_s=float(DEFAULTS["steady_s"] if ld.steady_s is None else ld.steady_s),
        drain_s=float(exp.request.timeout_s if ld.drain_s is None else ld.drain_s),
        output_tokens=(int(ld.output_tokens[0]), int(ld.output_tokens[1])) if ld.output_tokens else (n, n),
        prompt_words=(int(ld.prompt_words[0]), int(ld.prompt_words[1])) if ld.prompt_words else None,
        lag_tolerance_s=float(DEFAULTS["lag_tolerance_s"] if ld.lag_tolerance_s is None else ld.lag_tolerance_s),
        cpu_limit=float(DEFAULTS["cpu_limit"] if ld.cpu_limit is None else ld.cpu_limit),
        slo_ttft_s=None if slo is None or slo.ttft_s is None else float(slo.ttft_s),
        slo_tpot_s=None if slo is None or slo.tpot_s is None else float(slo.tpot_s),
    )


def problems(exp: Experiment) -> list[str]:
    """What makes a load workload unrunnable, one sentence each naming the key and the fix, before anything starts."""
    out = []
    seconds = 0.0
    for name, wl in exp.workloads.items():
        where = f"workloads.{name}"
        if not is_load(wl):
            if wl.load is not None:
                out.append(
                    f"{where}.load is set, but {where}.kind is {wl.kind or 'single'!r}; set {where}.kind: load, "
                    f"or remove {where}.load."
                )
            continue
        ld = wl.load
        if ld is None:
            out.append(
                f"{where}.kind is load without {where}.load; give its levels: {where}.load.users: [1, 2, 4, 8] "
                f"(closed loop) or {where}.load.rate: [1, 2, 4] (requests per second, open loop)."
            )
            continue
        out += _level_problems(where, ld)
        for key in ("output_tokens", "prompt_words"):
            pair = getattr(ld, key)
            if pair is not None and pair[0] > pair[1]:
                out.append(
                    f"{where}.load.{key} is [{pair[0]}, {pair[1]}]: the first is the least, the second the "
                    f"most; write [{pair[1]}, {pair[0]}] (equal values for a fixed length)."
                )
        if exp.engine.kind not in STREAMS_READ:
            out.append(
                f"{where} is a load workload, but engine.kind {exp.engine.kind!r} streams what the load driver "
                f"does not read yet (it reads the OpenAI-style completions stream); use vllm, sglang, llamacpp "
                f"or an OpenAI-compatible server (engine.kind: openai)."
            )
        if ld.users is not None or ld.rate is not None:
            seconds += spec(exp, name).level_seconds()
        if not RUN_BY_BLOCKS:
            out.append(
                f"{where} is a load workload, which the block runner does not run yet (bracket.measure.load runs its "
                f"levels against a server: run_levels); remove it from the experiment for now."
            )
    if seconds > MAX_LEVEL_SECONDS_PER_BLOCK:
        out.append(
            f"the load workloads' levels take {seconds / 3600:.1f} h of warm-up and steady windows in every "
            f"block, more than {MAX_LEVEL_SECONDS_PER_BLOCK // 3600} h; shorten warmup_s or steady_s, use "
            f"fewer levels, or split the experiment."
        )
    return out


def _level_problems(where: str, ld) -> list[str]:
    out = []
    if (ld.users is None) == (ld.rate is None):
        both = "both users and rate" if ld.users is not None else "neither users nor rate"
        out.append(
            f"{where}.load gives {both}; give one: users (closed loop, e.g. [1, 2, 4, 8, 16]) or rate "
            f"(open loop, requests per second, e.g. [1, 2, 4])."
        )
        return out
    levels = list(ld.users if ld.users is not None else ld.rate)
    key = "users" if ld.users is not None else "rate"
    if len(set(levels)) != len(levels):
        twice = sorted({v for v in levels if levels.count(v) > 1})
        out.append(
            f"{where}.load.{key} lists {twice} more than once; each level is one cell of the design: list each once."
        )
    if ld.users is not None and ld.arrivals is not None:
        out.append(
            f"{where}.load.arrivals ({ld.arrivals}) is for an open loop (rate), but the levels are users; "
            f"remove arrivals, or give rate levels instead of users."
        )
    if ld.rate is not None and ld.think_s is not None:
        out.append(
            f"{where}.load.think_s is for a closed loop (users), but the levels are rates; remove think_s, "
            f"or give users levels instead of rate."
        )
    return out
