"""Build llama.cpp's CPU llama-server for the tests in the background, at the lowest CPU priority, for as long
as the process that started it lives.

`make test` (and CI, before it installs its packages) starts it first: the build (about 1,000 s of CPU, 9
minutes of both cores) then takes the CPU time the suite leaves idle (package downloads, the fast tier's
gaps, the engine's install, servers waited on) instead of holding a worker for its whole length when the
first llama.cpp test asks for it. In a cold CI run on 2 cores it was done before any llama.cpp test started;
the rest of the suite did not finish sooner for it (1,995 s against 1,928 s without it, in runs that differed
in the model's training too): the tests leave little of the CPU idle. That test's fixture (tests/conftest.py: llama_server) runs the same build
script with the same options: it waits on the script's lock while this build runs, then finds it cached
(~/.cache/bracket/llama.cpp, or $BRACKET_CACHE). Where the build is cached already, this ends at once.

When PID ends first (the fast tier failed, a user pressed Ctrl-C), the build is stopped: ninja resumes it
where it stopped on the next run. It needs only the standard library (and two package modules that need no more),
so CI can start it before the analysis environment exists.

    python3 tests/prebuild.py --while PID
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workflow" / "scripts" / "build_llamacpp.sh"
sys.path.insert(0, str(ROOT / "workflow"))  # the two modules below import only the standard library

from bracket.embedded import LLAMACPP_VERSION  # noqa: E402
from bracket.measure import priority  # noqa: E402


def cache_root() -> Path:
    """The build script's cache root (build_llamacpp.sh: $BRACKET_CACHE, else $XDG_CACHE_HOME/bracket)."""
    base = os.environ.get("BRACKET_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bracket"
    )
    return Path(base) / "llama.cpp"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def pidfile() -> Path:
    """Where a running background build leaves its process group's id, for hurry()."""
    return cache_root() / f"prebuild-{LLAMACPP_VERSION}.pid"


def running_build() -> int | None:
    """The process group of a background build that runs now, if any."""
    try:
        pgid = int(pidfile().read_text())
    except (OSError, ValueError):
        return None
    try:  # alive, and still the build (not a process that took a stale file's id)
        return pgid if SCRIPT.name.encode() in Path(f"/proc/{pgid}/cmdline").read_bytes() else None
    except OSError:
        return pgid if alive(pgid) else None  # no /proc


def hurry() -> bool:
    """A test needs llama.cpp now (tests/conftest.py: llama_server): put a background build that still runs back
    at normal priority, so the worker waiting for it does not wait on the lowest share of the CPU. Lowering a
    nice value takes privilege (root, as in CI); elsewhere the build goes on at its own pace. True when a build
    was hurried."""
    pgid = running_build()
    if pgid is None:
        return False
    priority.set_autogroup_nice(pgid, 0)
    try:
        os.setpriority(os.PRIO_PGRP, pgid, 0)  # ninja's children inherit ninja's
    except OSError:
        return False
    return True


def lowest_priority(pid: int) -> None:
    """Give the session `pid` leads the lowest CPU share. Where the kernel groups processes by session
    (autogroup: /proc/sys/kernel/sched_autogroup_enabled), a nice value counts only inside its session: a new
    session of nice-19 compilers still gets as much CPU as all the test workers together (the fast tier ran in
    85 s beside it instead of 42). The session's own nice, set here as for a launched server
    (bracket.measure.priority), ranks it below them; without autogroup, nice alone ranks the build last."""
    priority.set_autogroup_nice(pid, 19)


def run(owner: int, poll_s: float = 1.0) -> int:
    """Build (the tests' backend: cpu, 2 jobs) until it ends or `owner` does; the build's exit status, or 143
    when it was stopped. Output goes to the cache root's prebuild log."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    if running_build():  # CI's, when make test starts its own: one build, whose process group hurry() finds
        return 0
    with open(root / f"prebuild-{LLAMACPP_VERSION}.log", "a") as log:
        print(f"prebuild: {time.strftime('%Y-%m-%d %H:%M:%S')}, while process {owner} lives", file=log, flush=True)
        proc = subprocess.Popen(
            ["nice", "-n", "19", "bash", str(SCRIPT), LLAMACPP_VERSION, "cpu", "2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole (cmake, ninja, the compilers)
        )
        lowest_priority(proc.pid)
        pidfile().write_text(str(proc.pid))
        try:
            return wait(proc, owner, poll_s, log)
        finally:
            pidfile().unlink(missing_ok=True)


def wait(proc: subprocess.Popen, owner: int, poll_s: float, log) -> int:
    """The build's exit status, or 143 once `owner` has ended and the build is stopped."""
    while proc.poll() is None:
        if not alive(owner):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            print(f"prebuild: process {owner} ended; the llama.cpp build stopped", file=log)
            return 143
        time.sleep(poll_s)
    return proc.returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--while", dest="owner", type=int, required=True, help="build while this process lives")
    a = p.parse_args(argv)
    return run(a.owner)


if __name__ == "__main__":
    sys.exit(main())
