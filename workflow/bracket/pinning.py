"""Where the embedded engine's processes run: its model worker in-process, and optional CPU pinning.

vLLM's CPU build runs the model in a worker process and the engine core (the scheduler) in another
that busy-waits, with sched_yield, for the worker's results ("TODO: make scheduler proc sleep when
idle" in vllm/utils/ompmultiprocessing.py); it reserves a core for that. On a 2-core machine the
API server and bracket's client then share the spinning core, and when each gets to run varies
from request to request: the stream reaches the client in one burst at the end of some requests,
steadily in others, at different rates (bench/results/quiet_engine.md). `engine.inproc_worker`:
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
(bench/results/quiet_engine.md): it changes how the stream is delivered (tokens reach the client
in one burst at the end), and what it does to the spread varied between runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


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


@dataclass(frozen=True)
class Worker:
    """The model worker inside the engine core's process, with this many compute threads."""

    threads: int

    def record(self) -> dict:
        return {"worker": "in the engine core's process", "compute_threads": self.threads,
                "env": self.env()}

    def env(self) -> dict[str, str]:
        return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(self.threads)}


WORKER_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND")


def worker(cfg: dict, arm: dict | None = None, pin: Pinning | None = None) -> Worker | None:
    """The in-process worker a block of this experiment gets, or None (not the embedded engine, off,
    pinned, or the user set the engine's process or thread layout in engine.env or the arm's env)."""
    eng = cfg["engine"]
    if eng.get("inproc_worker", "off") != "auto" or pin is not None or not eng.get("embedded") \
            or eng["kind"] != "vllm" or eng["launch"] != "native":
        return None
    env = {**eng.get("env", {}), **((arm or {}).get("env") or {})}
    if any(k in env for k in WORKER_ENV):
        return None
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return Worker(threads=max(len(cpus) - 1, 1))


# ---- priority: engine.nice ------------------------------------------------------------------------------
# Linux puts every session in an autogroup (kernel.sched_autogroup_enabled) and shares the CPU fairly
# between autogroups: a process's own nice value only orders it within its session. The server runs in a
# session of its own (server.py starts it with start_new_session), so another user's `nice -n 19` job,
# started from another session, competes with it as an equal. engine.nice sets the nice value of the
# server's process and of its autogroup, and of bracket's client and its autogroup while it measures.

def _autogroup(pid: int | str) -> Path:
    return Path(f"/proc/{pid}/autogroup")


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice value of `pid`'s autogroup, or None where there are none (not Linux, or autogroups off)."""
    try:
        return int(_autogroup(pid).read_text().split("nice")[-1])
    except (OSError, ValueError):
        return None


def set_autogroup_nice(pid: int | str, nice: int) -> str | None:
    """Set it; None when done, else why not (the server then runs at its process nice only)."""
    if autogroup_nice(pid) is None:
        return "no autogroup (kernel.sched_autogroup_enabled is off, or not Linux)"
    try:
        _autogroup(pid).write_text(str(nice))
        return None
    except OSError as exc:
        return f"{exc.strerror or exc} (a negative nice needs root or CAP_SYS_NICE)"


def nice_argv(nice: int | None, argv: list[str] | None) -> list[str] | None:
    return argv if nice is None or not argv or not shutil.which("nice") else ["nice", "-n", str(nice), *argv]


@contextlib.contextmanager
def client_nice(nice: int | None, notes: dict):
    """The measuring client (this process and its autogroup) at `nice` for the duration; the old values after."""
    if nice is None or not hasattr(os, "setpriority"):
        yield
        return
    before, group = os.getpriority(os.PRIO_PROCESS, 0), autogroup_nice()
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as exc:
        notes["client"] = f"not set: {exc.strerror or exc}"
    else:
        problem = set_autogroup_nice("self", nice)
        notes["client"] = "set" if problem is None else f"process nice set; autogroup not: {problem}"
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, before)
        if group is not None:
            set_autogroup_nice("self", group)
