"""CPU pinning of the embedded engine: its compute on its own cores, everything else beside it.

vLLM's CPU build binds its OpenMP compute thread(s) to all cores but the last and reserves the last
"for other processes", but nothing then keeps the other processes there: the API server, the
engine's own helper threads and bracket's client float over every core. Pinned, the server's
processes start on the reserved core (`taskset`), the compute thread is bound explicitly to the
others (VLLM_CPU_OMP_THREADS_BIND), and bracket's client runs on the reserved core while it
measures.

`engine.pin_cpus`: off (the default) or auto (pin the embedded vLLM engine when launched natively
on a machine with two cores or more and `taskset` present). It is opt-in because measurement has
not shown it narrows the spread of the default experiment on a 2-core machine
(bench/results/quiet_engine.md): it changes how the stream is delivered (tokens reach the client
in one burst at the end), and what it does to the spread varied between runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Pinning:
    compute: str   # cores of the compute threads, as VLLM_CPU_OMP_THREADS_BIND reads them ("0", "0-14")
    reserved: str  # cores of everything else: the server's other processes and threads, and the client

    def record(self) -> dict:
        return {"compute": self.compute, "server": self.reserved, "client": self.reserved}


def _ids(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


def plan(cfg: dict, arm: dict | None = None) -> Pinning | None:
    """The pinning a block of this experiment gets, or None (not the embedded engine, off, or no room)."""
    eng = cfg["engine"]
    if eng.get("pin_cpus", "off") != "auto" or not eng.get("embedded") or eng["kind"] != "vllm" \
            or eng["launch"] != "native" or not hasattr(os, "sched_getaffinity") or not shutil.which("taskset"):
        return None
    env = {**eng.get("env", {}), **((arm or {}).get("env") or {})}
    if "VLLM_CPU_OMP_THREADS_BIND" in env:  # the user bound the compute threads: theirs to keep
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return Pinning(compute=_ids(cpus[:-1]), reserved=_ids(cpus[-1:]))


def server_argv(p: Pinning | None, argv: list[str] | None) -> list[str] | None:
    return argv if p is None or not argv else ["taskset", "-c", p.reserved, *argv]


def server_env(p: Pinning | None) -> dict[str, str]:
    return {} if p is None else {"VLLM_CPU_OMP_THREADS_BIND": p.compute}


@contextlib.contextmanager
def client(p: Pinning | None):
    """Run the measuring client on the reserved core for the duration; the old affinity after."""
    if p is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {int(c) for c in p.reserved.split(",")})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
