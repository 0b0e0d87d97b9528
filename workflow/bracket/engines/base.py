"""The interface every engine adapter implements."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative speculative-decoding counters of a server at one instant.

    drafts: verify steps; draft_tokens: tokens proposed; accepted: proposals accepted (the
    target's own bonus token excluded). Per-request values are deltas between two readings.
    """

    drafts: float
    draft_tokens: float
    accepted: float


class Engine:
    kind = "base"
    health_path = "/health"
    # Environment variable the server reads its API key from (keys on argv would be recorded).
    api_key_env: str | None = None

    def launch_argv(self, cfg: dict, arm: dict, model: str, python: str) -> list[str]:
        raise NotImplementedError

    def launch_env(self, cfg: dict, arm: dict) -> dict[str, str]:
        env = {k: str(v) for k, v in cfg["engine"]["env"].items()}
        env.update({k: str(v) for k, v in arm.get("env", {}).items()})
        return env

    def request_body(self, model_name: str, prompt: str, request: dict, seed: int) -> dict:
        raise NotImplementedError

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        return None


_PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def prometheus_sums(text: str, names: set[str]) -> dict[str, float]:
    """Sum each named Prometheus sample over all its label sets (e.g. several engines)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if m and m.group(1) in names:
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + float(m.group(3))
    return sums
