"""Where the embedded engine's processes run: its model worker in-process, and optional CPU pinning.

vLLM's CPU build runs the model in a worker process and the engine core (the scheduler) in another
that busy-waits, with sched_yield, for the worker's results ("TODO: make scheduler proc sleep when
idle" in vllm/utils/ompmultiprocessing.py); it reserves a core for that. On a 2-core machine the
API server and bracket's client then share the spinning core, and when each gets to run varies
from request to request: the stream reaches the client in one burst at the end of some requests,
steadily in others, at different rates (studies/quiet_engine/results/quiet_engine.md). `engine.inproc_worker`:
auto runs the worker inside the engine core's process instead
(VLLM_ENABLE_V1_MULTIPROCESSING=0, which in vLLM 0.32 changes only the CPU executor of an API
server: the engine core stays a process of its own), with OMP_NUM_THREADS set to the compute
threads vLLM would have bound (all cores but one, at least one), so nothing spins. It is opt-in
(default off): every stream then arrives steadily, but the within-block spread of the decode rate
was not narrower in two runs of the bench.

vLLM's CPU build binds its OpenMP compute thread(s) to all cores but the last and reserves the last
"for other processes", but nothing then keeps the other processes there: the API server, the
engine's own helper threads and bracket's client float over every core. Pinned, the server's
processes start on the reserved core (`taskset`), the compute thread is bound explicitly to the
others (VLLM_CPU_OMP_THREADS_BIND), and bracket's client runs on the reserved core while it
measures.

CPU pinning, `engine.pin_cpus`: off (the default) or auto (pin the embedded vLLM engine when launched natively
on a machine with two cores or more and `taskset` present). It is opt-in because measurement has
not shown it narrows the spread of the default experiment on a 2-core machine
(studies/quiet_engine/results/quiet_engine.md): it changes how the stream is delivered (tokens reach the client
in one burst at the end), and what it does to the spread varied between runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass

from bracket.typed.experiment import Arm, Experiment


@dataclass(frozen=True)
class Pinning:
    compute: str  # cores of the compute threads, as VLLM_CPU_OMP_THREADS_BIND reads them ("0", "0-14")
    reserved: str  # cores of everything else: the server's other processes and threads, and the client

    def record(self) -> dict:
        return {"compute": self.compute, "server": self.reserved, "client": self.reserved}


def _ids(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


def plan(exp: Experiment, arm: Arm | None = None) -> Pinning | None:
    """The pinning a block of this experiment gets, or None (not the embedded engine, off, or no room)."""
    eng = exp.engine
    if (
        eng.pin_cpus != "auto"
        or not eng.embedded
        or eng.kind != "vllm"
        or eng.launch != "native"
        or not hasattr(os, "sched_getaffinity")
        or not shutil.which("taskset")
    ):
        return None
    env = {**eng.env, **(arm.env if arm else {})}
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


@dataclass(frozen=True)
class Worker:
    """The model worker inside the engine core's process, with this many compute threads."""

    threads: int

    def record(self) -> dict:
        return {"worker": "in the engine core's process", "compute_threads": self.threads, "env": self.env()}

    def env(self) -> dict[str, str]:
        return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(self.threads)}


WORKER_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND")


def worker(exp: Experiment, arm: Arm | None = None, pin: Pinning | None = None) -> Worker | None:
    """The in-process worker a block of this experiment gets, or None (not the embedded engine, off,
    pinned, or the user set the engine's process or thread layout in engine.env or the arm's env)."""
    eng = exp.engine
    if (
        eng.inproc_worker != "auto"
        or pin is not None
        or not eng.embedded
        or eng.kind != "vllm"
        or eng.launch != "native"
    ):
        return None
    env = {**eng.env, **(arm.env if arm else {})}
    if any(k in env for k in WORKER_ENV):
        return None
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return Worker(threads=max(len(cpus) - 1, 1))
