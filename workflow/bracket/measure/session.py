"""One server session: credentials, the port lock, launch, readiness and teardown.

Everything that starts a server goes through here: the block runner (bracket.block.runner), the
determinism control (bracket.controls.determinism) and `bracket launch` (which only prints the command).
So the rules are written once:

- Secrets (engine.secret_env) and the API key (engine.api_key_env) come from the caller's
  environment, never from a file; they reach the server by environment (never argv, which is
  recorded), are registered for redaction (bracket.secrets), and the key is sent on every
  request. An API key the adapter cannot take by environment is refused, not dropped.
- One server per port at a time on this host (a file lock), and the port must be free before a
  launch (an attached server is expected to hold it); one measurement at a time per host, whichever
  checkout, experiment or port (`host_lock`, in a host-wide folder).
- Readiness notices a dead process at once (bracket.wire.server); the server is stopped and its log
  redacted however the session ends, SIGTERM included.
- Requests name the model as the adapter says (`served_name`).
- The embedded engine's compute runs on its own cores, the rest of the server and the client
  beside it (bracket.measure.pinning), recorded with the block.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import httpx

from bracket import engines, secrets
from bracket.engines import launch
from bracket.measure import pinning, priority
from bracket.typed.experiment import Engine, Experiment
from bracket.wire.server import ServerError, port_owner
from bracket.wire.transport import timed_client


class BlockFailed(RuntimeError):
    """A server session could not run (bad environment, busy port, server died or never got ready)."""


@dataclass
class Credentials:
    """What a session needs from the caller's environment: secrets for the server, headers for requests."""

    env: dict[str, str] = field(default_factory=dict)  # name -> value, given to the server
    headers: dict[str, str] = field(default_factory=dict)  # sent on every request

    @property
    def names(self) -> list[str]:
        return list(self.env)


def secret_names(exp: Experiment, adapter) -> list[str]:
    """The environment names a server of this experiment gets secrets under (values never needed)."""
    names = list(exp.engine.secret_env)
    if exp.engine.api_key_env and adapter.api_key_env:
        names.append(adapter.api_key_env)
    return names


def credentials(exp: Experiment, adapter) -> Credentials:
    """Read engine.secret_env and engine.api_key_env from the environment; register them for redaction."""
    eng = exp.engine
    out = Credentials()
    for name in eng.secret_env:
        if name not in os.environ:
            raise BlockFailed(
                f"engine.secret_env names {name!r}, but it is not set in this environment; export it before running."
            )
        out.env[name] = os.environ[name]
    name = eng.api_key_env
    if name:
        key = os.environ.get(name)
        if not key:
            raise BlockFailed(
                f"engine.api_key_env names {name!r}, but it is not set (or empty) in this "
                f"environment; export it before running."
            )
        if not adapter.api_key_env:
            raise BlockFailed(
                f"engine.kind {eng.kind!r} takes no API key by environment; leave engine.api_key_env empty."
            )
        out.env[adapter.api_key_env] = key
        out.headers["Authorization"] = f"Bearer {key}"
    for env_name, value in [(n, out.env[n]) for n in eng.secret_env] + ([(name, key)] if name else []):
        problem = secrets.short_problem(env_name, value)
        if problem:
            raise BlockFailed(f"engine.{'api_key_env' if env_name == name else 'secret_env'}: {problem}")
    secrets.register(*out.env.values())
    return out


def served_name(adapter, exp: Experiment, http, base: str) -> str:
    """The model name requests carry (the adapter's, when it can ask the server)."""
    ask = getattr(adapter, "request_model", None)
    return ask(exp, http, base) if ask else "bracket-model"


def ensure_port_free(eng: Engine) -> None:
    """Before a launch: the engine's port must be free (an attached server is expected to hold it)."""
    owner = port_owner(eng.host, eng.port) if eng.launch != "attach" else None
    if owner:
        raise BlockFailed(
            f"port {eng.port} on {eng.host} is already in use by {owner}; stop it or set engine.port to a free port."
        )


def host_lock_dir(root: str | Path = "results") -> Path:
    """This host's lock folder under results/: named by host, so the hosts of a cluster that share
    results/ never contend for one another's ports (see workflow/profiles/README.md)."""
    return Path(root) / ".locks" / socket.gethostname()


@contextlib.contextmanager
def port_lock(lock_dir: Path, port: int):
    """One server per port at a time, across jobs and invocations on this host."""
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"port-{port}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# Host-wide, not per checkout: two experiments in two checkouts (or one) on different ports share the cores.
HOST_LOCK_DIR = Path("/tmp/bracket-locks")
LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}


def host_lock_path(exp: Experiment, folder: str | Path | None = None) -> Path:
    """The lock every measurement on the same cores takes: one block at a time per host, whichever checkout,
    experiment or port. A launched server, or one attached on this host, runs on this host's cores: the lock
    is this host's. An attached server elsewhere runs on that host's cores: the lock is named for it, so two
    experiments attached to one remote server take turns, and blocks attached to different servers run side by
    side. $BRACKET_LOCK_DIR moves the folder (default /tmp/bracket-locks: per node under SLURM, whose nodes each
    have their own /tmp)."""
    folder = Path(folder or os.environ.get("BRACKET_LOCK_DIR") or HOST_LOCK_DIR)
    host = socket.gethostname()
    if exp.engine.launch == "attach":
        target = (urlsplit(launch.base_url(exp)).hostname or "").lower()
        if target not in LOOPBACK and target not in (host.lower(), socket.getfqdn().lower()):
            host = target
    return folder / f"host-{re.sub(r'[^A-Za-z0-9._-]', '_', host)}.lock"


@contextlib.contextmanager
def host_lock(path: Path, holder: str, say: Callable[[str], None] | None = None):
    """Hold the host-wide lock at `path` (host_lock_path); yields what waiting for it cost, for the block's
    meta, with the epoch times it was taken and, once the block's server is gone, given up (`acquired_at`,
    `released_at`: set just before the next holder can take it). While another holds it, `say` is told who
    (the holder writes its name into the file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # one folder for every user of the host
        path.parent.chmod(0o1777)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    t0 = time.monotonic()
    held: dict | None = None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited_for = None
        except BlockingIOError:
            waited_for = os.pread(fd, 1000, 0).decode(errors="replace").strip() or "another process"
            if say:
                say(
                    f"waiting for the host-wide lock {path}: another measurement uses this host's cores "
                    f"({waited_for}); blocks on one host run one at a time"
                )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{holder}, pid {os.getpid()}\n".encode(), 0)
        held = {
            "path": str(path),
            "waited_s": round(time.monotonic() - t0, 3),
            "waited_for": waited_for,
            "acquired_at": time.time(),
        }
        yield held
    finally:
        if held is not None:
            held["released_at"] = time.time()
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def terminate_on_signal():
    """Turn SIGTERM into SystemExit so `finally` blocks (server teardown) run."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@dataclass
class Plan:
    """A server about to be started: the adapter, its command (None under attach), environment and URL,
    and where it and the client run (bracket.measure.pinning; None: wherever the OS puts them)."""

    adapter: object
    argv: list[str] | None
    env: dict[str, str]
    base: str
    creds: Credentials
    pinning: pinning.Pinning | None = None
    worker: pinning.Worker | None = None
    nice: int | None = None  # engine.nice, applied (server and client); what happened goes to priority
    priority: dict | None = None
    host_lock: dict | None = None  # the host-wide lock once held: its path and how long the block waited


def plan(
    exp: Experiment,
    arm_name: str,
    *,
    model: str,
    python: str,
    name: str,
    argv: list[str] | None = None,
    extra_args: list[str] = (),
) -> Plan:
    """The launch of `arm_name`: natively, inside `docker run`, or attached (no command).

    `argv` replaces the adapter's command (a server started some other way, or a stand-in in tests);
    `extra_args` are appended to the adapter's (they cannot apply under attach).
    """
    adapter = engines.get(exp.engine.kind)
    arm = exp.arms[arm_name]
    creds = credentials(exp, adapter)
    pin = work = nice = None
    if argv is None:  # the adapter's command (a given argv is a server started some other way: not pinned)
        argv = launch.server_argv(exp, adapter, arm, model, python, name=name, env_names=creds.names)
        if argv:
            pin = pinning.plan(exp, arm)
            argv = pinning.server_argv(pin, list(argv) + list(extra_args))
            work = pinning.worker(exp, arm, pin)
            nice = exp.engine.nice if exp.engine.launch == "native" else None
            argv = priority.nice_argv(nice, argv)
    env = launch.launch_env(exp, adapter, arm)
    env.update(pinning.server_env(pin))
    env.update(work.env() if work else {})
    env.update(creds.env)
    return Plan(
        adapter,
        list(argv) if argv is not None else None,
        env,
        launch.base_url(exp),
        creds,
        pin,
        work,
        nice,
        {"nice": nice} if nice is not None else None,
    )


@dataclass
class Session:
    """A ready server: its process handle, the client to talk to it with, and how long it took."""

    plan: Plan
    server: object
    http: httpx.Client
    ready_s: float

    @property
    def base(self) -> str:
        return self.plan.base


@contextlib.contextmanager
def serve(
    exp: Experiment,
    p: Plan,
    *,
    log_path: Path,
    lock_dir: Path,
    before_start: Callable[[], None] | None = None,
    on_start: Callable[[object], None] | None = None,
    cooldown: Callable[[], None] | None = None,
    holder: str = "bracket",
    say: Callable[[str], None] | None = None,
):
    """A fresh server under the port lock and the host-wide lock (host_lock_path; `holder` names this
    session in it, `say` hears whom it waits for): yields a ready Session; stops it and redacts its log after.

    `cooldown` runs under the lock before the port check; `before_start` after the log is cleared
    (write provenance there, so a client killed outright still leaves it); `on_start(server)` once
    the process exists. A server that dies or never gets ready raises BlockFailed with its reason.
    """
    eng = exp.engine
    log_path = Path(log_path)
    with port_lock(lock_dir, eng.port), host_lock(host_lock_path(exp), holder, say) as held, terminate_on_signal():
        p.host_lock = held
        if cooldown:
            cooldown()
        ensure_port_free(eng)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        if before_start:
            before_start()
        server = launch.make_server(
            exp, p.adapter, argv=p.argv, env=p.env, log_path=log_path, base_url=p.base, secret_names=p.creds.names
        )
        try:
            server.start()
            if p.nice is not None:  # the server's session: its autogroup (the process nice came with `nice -n`)
                problem = priority.set_autogroup_nice(server.proc.pid, p.nice)
                p.priority["server"] = "set" if problem is None else f"process nice set; autogroup not: {problem}"
            if on_start:
                on_start(server)
            try:
                ready = server.wait_ready(eng.startup_timeout_s)
            except ServerError as exc:
                raise BlockFailed(secrets.redact(str(exc))) from None
            p.adapter = (
                getattr(server, "adapter", None) or p.adapter
            )  # an attached server's engine, identified once it answered
            with (
                pinning.client(p.pinning),
                priority.client_nice(p.nice, p.priority or {}),
                timed_client(timeout=10.0, headers=p.creds.headers) as http,  # the timed read: wire/transport.py
            ):
                yield Session(p, server, http, ready)
        finally:
            server.stop()
            secrets.redact_file(log_path)
