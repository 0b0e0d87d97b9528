"""Waiting on, finding and stopping the processes a test started."""

from __future__ import annotations

import os
import signal
import time

import psutil


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.1):
    """predicate()'s first true value, polled every `poll_s`; AssertionError naming `what` after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def alive(pids) -> list[int]:
    """The PIDs among `pids` that still run (zombies awaiting their parent count as gone)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def engine_processes(port: int) -> list[int]:
    """Every process whose command line names this port: what a leaked server would look like."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(port) in cmd and any("vllm" in c or "fake_engine" in c or "reference_server" in c for c in cmd):
            if p.pid != os.getpid():
                out.append(p.pid)
    return alive(out)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def as_from_a_terminal():
    """preexec_fn for a child that must react to Ctrl-C as it would in a terminal.

    A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored
    (no KeyboardInterrupt); CI and scripted runs are often such background jobs, so the test
    restores the default disposition a foreground process gets."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
