"""Server processes: launch in their own process group, wait until ready, always tear down.

Ready means the process is still alive AND the health check passes. A process that exits during
start-up fails at once with the last lines of its log, so a bad flag is never mistaken for a slow
start (seed 000's eight lost minutes).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bracket import secrets


class ServerError(RuntimeError):
    """The server could not be started or died; the message carries the log tail and its path."""


def program_problem(program: str, exc: OSError, key: str = "the server program") -> str:
    """Why `program` could not be started (the OSError of its exec), and the fix: a file without its execute
    bit is that, not a disk that refused a write."""
    found = Path(program).expanduser()
    if "/" not in program:  # looked up on PATH as exec does, a file without its execute bit included
        dirs = os.environ.get("PATH", os.defpath).split(os.pathsep)
        found = Path(
            shutil.which(program) or next((Path(d) / program for d in dirs if (Path(d) / program).is_file()), found)
        )
    if exc.errno == errno.EACCES and found.is_file() and not os.access(found, os.X_OK):
        return (
            f"{key} {program} cannot be started: the file has no execute bit (mode "
            f"{found.stat().st_mode & 0o7777:04o}); run `chmod +x {found}`, or name the program that starts the server"
        )
    if exc.errno == errno.EACCES and found.is_dir():
        return f"{key} {program} is a directory, not a program; name the program inside it that starts the server"
    if exc.errno == errno.EACCES:
        return (
            f"{key} {program} cannot be started ({exc.strerror}): its file system may not allow running programs "
            f"(mounted noexec), or a folder on its path is closed to this user; move it, or fix the permissions"
        )
    if exc.errno == errno.ENOENT:
        return (
            f"{key} {program} was not found (nor, if it is a script, the interpreter its #! line names); install "
            f"it, or give its full path"
        )
    if exc.errno == errno.ENOEXEC:
        return (
            f"{key} {program} is not a program this machine can run (a script without a #! line, or a binary "
            f"built for another machine); give the program that starts the server"
        )
    return f"{key} {program} could not be started: {exc.strerror or exc}"


def log_tail(path: str | Path, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(text.rstrip().splitlines()[-lines:])


def error_line(path: str | Path, lines: int = 200) -> str | None:
    """The engine's own complaint: the last line of the log's tail that mentions an error."""
    for line in reversed(log_tail(path, lines).splitlines()):
        if "error" in line.lower() and line.strip():
            return line.strip()
    return None


def port_owner(host: str, port: int) -> str | None:
    """Describe who holds host:port, or None when it is free to bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return None
        except OSError:
            pass
    try:
        import psutil

        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    p = psutil.Process(conn.pid)
                    return f"pid {conn.pid} ({' '.join(p.cmdline()[:4])})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except Exception:  # noqa: BLE001 - best effort: permissions vary
        pass
    return "another process"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|\x1b\[[0-9;?]*[A-Za-z]")


def last_line(path: str | Path, values: dict[str, str] | None = None, width: int = 160) -> str:
    """The engine's latest log line, safe for a terminal: escape codes stripped, secrets masked, cut short."""
    for line in reversed(log_tail(path, 20).splitlines()):
        line = _CONTROL.sub("", line).strip()
        if line and line != "(no log written)":
            for value in (values or {}).values():
                if value:
                    line = line.replace(value, "***")
            line = secrets.redact(line)  # every registered secret, in every form (escaped, encoded)
            return line if len(line) <= width else line[: width - 3] + "..."
    return "(nothing logged yet)"


def heartbeat(elapsed_s: float, timeout_s: float, line: str) -> str:
    """One progress line while a server loads (minutes for a large model): elapsed time and what the engine says."""
    return f"  loading: {elapsed_s:.0f} s (of at most {timeout_s:.0f} s); the engine's last line: {line}"


@dataclass
class Server:
    """A launched server. Use as a context manager so teardown always runs."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    base_url: str
    health_path: str = "/health"
    secret_names: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    watchdog: subprocess.Popen | None = None
    started_at: float | None = None
    ready_s: float | None = None
    heartbeat_s: float = float(os.environ.get("BRACKET_HEARTBEAT_S", "15"))  # 0: no heartbeat

    def beat(self, elapsed_s: float, timeout_s: float) -> None:
        """Say, on stderr, how long the server has been loading and what its log says last."""
        values = {k: v for k, v in self.env.items() if k in self.secret_names}
        print(heartbeat(elapsed_s, timeout_s, last_line(self.log_path, values)), file=sys.stderr, flush=True)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(self.env)
        log = open(self.log_path, "ab")
        self.started_at = time.time()
        # start_new_session: the server and every worker it forks share one process group,
        # which teardown signals as a whole.
        # That also detaches it from its client: the parent-death signal and the watchdog take the
        # server down when the client is killed outright (SIGKILL runs no teardown).
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:  # the program could not be run: said as that, never as a write that failed
            problem = program_problem(self.argv[0], exc)
            with contextlib.suppress(OSError):
                log.write(f"{problem}\n".encode())
            raise ServerError(problem) from None
        finally:
            log.close()
        self.watchdog = start_watchdog(self.proc.pid, log_path=self.log_path)

    def wait_ready(self, timeout_s: float, poll_s: float = 0.25) -> float:
        """Block until ready; return seconds waited. Raise ServerError on early exit or timeout."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        t0 = time.monotonic()
        url = self.base_url + self.health_path
        next_beat = t0 + self.heartbeat_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.heartbeat_s > 0 and time.monotonic() >= next_beat:
                    self.beat(time.monotonic() - t0, timeout_s)
                    next_beat += self.heartbeat_s
                code = self.proc.poll()
                if code is not None:
                    said = error_line(self.log_path)
                    raise ServerError(
                        f"server exited with code {code} during start-up after {time.monotonic() - t0:.1f} s"
                        + (f": `{said}`" if said else "")
                        + f"; last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                try:
                    if client.get(url).status_code == 200:
                        self.ready_s = time.monotonic() - t0
                        return self.ready_s
                except httpx.HTTPError:
                    pass  # refused or reset while loading
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"server did not become ready within {timeout_s:.0f} s (process {self.proc.pid} still "
                        f"running, {url} not answering 200); raise engine.startup_timeout_s if the model is "
                        f"large. Last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                time.sleep(poll_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace_s`."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # leader of its own session, so pgid == pid
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end:
                if self.proc.poll() is not None and not _group_alive(pgid):
                    break
                time.sleep(0.1)
            else:
                continue
            break
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        stop_watchdog(self.watchdog)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


WATCHDOG = Path(__file__).with_name("watchdog.py")


def _die_with_parent() -> None:
    """In the server's child, before exec: SIGTERM when the thread that launched it exits (Linux only).

    It reaches the server's first process only; the watchdog takes care of the rest of its group."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_watchdog(
    pgid: int | None,
    grace_s: float = 5.0,
    docker: tuple[str, str] | None = None,
    env: dict | None = None,
    log_path: str | Path | None = None,
) -> subprocess.Popen | None:
    """A process, in a session of its own, that stops group `pgid` (or the container `docker` =
    (docker program, container name)) if this process dies, then redacts the secrets this process
    knows from `log_path` (bracket/wire/watchdog.py). The secrets travel on its stdin, never its argv."""
    target = ["--docker", *docker] if docker else [str(pgid)]
    known = sorted(s for s in secrets.known() if "\n" not in s)
    log = ["--log", str(log_path)] if log_path and known else []
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", str(WATCHDOG), str(os.getpid()), *target, str(grace_s), *log],
            env=env,
            stdin=subprocess.PIPE if log else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    if log:
        try:
            proc.stdin.write("".join(s + "\n" for s in known).encode())
            proc.stdin.close()
        except OSError:
            pass
    return proc


def stop_watchdog(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
