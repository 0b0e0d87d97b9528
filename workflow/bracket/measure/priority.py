"""Priority of a natively launched server and of bracket's client while it measures (`engine.nice`).

Linux puts every session in an autogroup (kernel.sched_autogroup_enabled) and shares the CPU fairly
between autogroups: a process's own nice value only orders it within its session. The server runs in a
session of its own (server.py starts it with start_new_session), so another user's `nice -n 19` job,
started from another session, competes with it as an equal. engine.nice sets the nice value of the
server's process and of its autogroup, and of bracket's client and its autogroup while it measures.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def _autogroup(pid: int | str) -> Path:
    return Path(f"/proc/{pid}/autogroup")


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice value of `pid`'s autogroup, or None where there are none (not Linux, or autogroups off)."""
    try:
        return int(_autogroup(pid).read_text().split("nice")[-1])
    except (OSError, ValueError):
        return None


def no_autogroup_why(pid: int | str = "self") -> str:
    """Why `pid` has no autogroup of its own, as precisely as /proc tells. A process whose session never
    called setsid (a container's first session, CI's test runner) sits in the root group, whose
    /proc/PID/autogroup reads empty and cannot be reniced."""
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    try:
        text = _autogroup(pid).read_text()
    except FileNotFoundError:
        if not Path("/proc/self").exists():
            return "no autogroup (not Linux)"
        if not Path(f"/proc/{pid}").exists():
            return f"no autogroup (no process {pid})"
        return "no autogroup (a kernel built without CONFIG_SCHED_AUTOGROUP)"
    except OSError as exc:
        return f"no autogroup ({exc.strerror or exc})"
    if enabled.exists() and enabled.read_text().strip() == "0":
        return "no autogroup (kernel.sched_autogroup_enabled is 0)"
    if not text.strip():
        return "no autogroup of its own (its session is the root group's: it never called setsid)"
    return f"no autogroup (unreadable: {text.strip()[:60]!r})"


def set_autogroup_nice(pid: int | str, nice: int) -> str | None:
    """Set it; None when done, else why not (the server then runs at its process nice only)."""
    if autogroup_nice(pid) is None:
        return no_autogroup_why(pid)
    try:
        _autogroup(pid).write_text(str(nice))
        return None
    except OSError as exc:
        return f"{exc.strerror or exc} (a negative nice needs root or CAP_SYS_NICE)"


def nice_argv(nice: int | None, argv: list[str] | None) -> list[str] | None:
    """`argv` under `nice` so that the server runs at the nice value `nice` itself: `nice -n` adds to the
    launching process's own value, so the increment is `nice` less that (a workflow started with
    `nice -n 5` and engine.nice 3 gives `nice -n -2`, not a server at 8)."""
    if nice is None or not argv or not shutil.which("nice"):
        return argv
    return ["nice", "-n", str(nice - os.getpriority(os.PRIO_PROCESS, 0)), *argv]


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
