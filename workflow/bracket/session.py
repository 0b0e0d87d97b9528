"""One server session: credentials, the port lock, launch, readiness and teardown.

Everything that starts a server goes through here: the block runner (bracket.runner), the
determinism control (bracket.determinism) and `bracket launch` (which only prints the command).
So the rules are written once:

- Secrets (engine.secret_env) and the API key (engine.api_key_env) come from the caller's
  environment, never from a file; they reach the server by environment (never argv, which is
  recorded), are registered for redaction (bracket.secrets), and the key is sent on every
  request. An API key the adapter cannot take by environment is refused, not dropped.
- One server per port at a time on this host (a file lock), and the port must be free before a
  launch (an attached server is expected to hold it).
- Readiness notices a dead process at once (bracket.server); the server is stopped and its log
  redacted however the session ends, SIGTERM included.
- Requests name the model as the adapter says (`served_name`).
- The embedded engine's compute runs on its own cores, the rest of the server and the client
  beside it (bracket.pinning), recorded with the block.
"""

from __future__ import annotations

import contextlib
import socket
import fcntl
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

from bracket import engines, pinning, priority, secrets
from bracket.engines import launch
from bracket.server import ServerError, port_owner


class BlockFailed(RuntimeError):
    """A server session could not run (bad environment, busy port, server died or never got ready)."""


@dataclass
class Credentials:
    """What a session needs from the caller's environment: secrets for the server, headers for requests."""

    env: dict[str, str] = field(default_factory=dict)       # name -> value, given to the server
    headers: dict[str, str] = field(default_factory=dict)   # sent on every request

    @property
    def names(self) -> list[str]:
        return list(self.env)


def secret_names(cfg: dict, adapter) -> list[str]:
    """The environment names a server of this experiment gets secrets under (values never needed)."""
    names = list(cfg["engine"]["secret_env"])
    if cfg["engine"].get("api_key_env") and adapter.api_key_env:
        names.append(adapter.api_key_env)
    return names


def credentials(cfg: dict, adapter) -> Credentials:
    """Read engine.secret_env and engine.api_key_env from the environment; register them for redaction."""
    eng = cfg["engine"]
    out = Credentials()
    for name in eng["secret_env"]:
        if name not in os.environ:
            raise BlockFailed(f"engine.secret_env names {name!r}, but it is not set in this environment; "
                              f"export it before running.")
        out.env[name] = os.environ[name]
    name = eng.get("api_key_env")
    if name:
        key = os.environ.get(name)
        if not key:
            raise BlockFailed(f"engine.api_key_env names {name!r}, but it is not set (or empty) in this "
                              f"environment; export it before running.")
        if not adapter.api_key_env:
            raise BlockFailed(f"engine.kind {eng['kind']!r} takes no API key by environment; "
                              f"leave engine.api_key_env empty.")
        out.env[adapter.api_key_env] = key
        out.headers["Authorization"] = f"Bearer {key}"
    for env_name, value in [(n, out.env[n]) for n in eng["secret_env"]] + ([(name, key)] if name else []):
        problem = secrets.short_problem(env_name, value)
        if problem:
            raise BlockFailed(f"engine.{'api_key_env' if env_name == name else 'secret_env'}: {problem}")
    secrets.register(*out.env.values())
    return out


def served_name(adapter, cfg: dict, http, base: str) -> str:
    """The model name requests carry (the adapter's, when it can ask the server)."""
    ask = getattr(adapter, "request_model", None)
    return ask(cfg, http, base) if ask else "bracket-model"


def ensure_port_free(eng: dict) -> None:
    """Before a launch: the engine's port must be free (an attached server is expected to hold it)."""
    owner = port_owner(eng["host"], eng["port"]) if eng["launch"] != "attach" else None
    if owner:
        raise BlockFailed(f"port {eng['port']} on {eng['host']} is already in use by {owner}; stop it or set "
                          f"engine.port to a free port.")


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
    and where it and the client run (bracket.pinning; None: wherever the OS puts them)."""

    adapter: object
    argv: list[str] | None
    env: dict[str, str]
    base: str
    creds: Credentials
    pinning: pinning.Pinning | None = None
    worker: pinning.Worker | None = None
    nice: int | None = None  # engine.nice, applied (server and client); what happened goes to priority
    priority: dict | None = None


def plan(cfg: dict, arm_name: str, *, model: str, python: str, name: str,
         argv: list[str] | None = None, extra_args: list[str] = ()) -> Plan:
    """The launch of `arm_name`: natively, inside `docker run`, or attached (no command).

    `argv` replaces the adapter's command (a server started some other way, or a stand-in in tests);
    `extra_args` are appended to the adapter's (they cannot apply under attach).
    """
    adapter = engines.get(cfg["engine"]["kind"])
    arm = cfg["arms"][arm_name]
    creds = credentials(cfg, adapter)
    pin = work = nice = None
    if argv is None:  # the adapter's command (a given argv is a server started some other way: not pinned)
        argv = launch.server_argv(cfg, adapter, arm, model, python, name=name, env_names=creds.names)
        if argv:
            pin = pinning.plan(cfg, arm)
            argv = pinning.server_argv(pin, list(argv) + list(extra_args))
            work = pinning.worker(cfg, arm, pin)
            nice = cfg["engine"].get("nice") if cfg["engine"]["launch"] == "native" else None
            argv = priority.nice_argv(nice, argv)
    env = launch.launch_env(cfg, adapter, arm)
    env.update(pinning.server_env(pin))
    env.update(work.env() if work else {})
    env.update(creds.env)
    return Plan(adapter, list(argv) if argv is not None else None, env, launch.base_url(cfg), creds, pin, work, nice,
                {"nice": nice} if nice is not None else None)


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
def serve(cfg: dict, p: Plan, *, log_path: Path, lock_dir: Path,
          before_start: Callable[[], None] | None = None,
          on_start: Callable[[object], None] | None = None,
          cooldown: Callable[[], None] | None = None):
    """A fresh server under the port lock: yields a ready Session; stops it and redacts its log after.

    `cooldown` runs under the lock before the port check; `before_start` after the log is cleared
    (write provenance there, so a client killed outright still leaves it); `on_start(server)` once
    the process exists. A server that dies or never gets ready raises BlockFailed with its reason.
    """
    eng = cfg["engine"]
    log_path = Path(log_path)
    with port_lock(lock_dir, eng["port"]), terminate_on_signal():
        if cooldown:
            cooldown()
        ensure_port_free(eng)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        if before_start:
            before_start()
        server = launch.make_server(cfg, p.adapter, argv=p.argv, env=p.env, log_path=log_path, base_url=p.base,
                                    secret_names=p.creds.names)
        try:
            server.start()
            if p.nice is not None:  # the server's session: its autogroup (the process nice came with `nice -n`)
                problem = priority.set_autogroup_nice(server.proc.pid, p.nice)
                p.priority["server"] = "set" if problem is None else f"process nice set; autogroup not: {problem}"
            if on_start:
                on_start(server)
            try:
                ready = server.wait_ready(eng["startup_timeout_s"])
            except ServerError as exc:
                raise BlockFailed(secrets.redact(str(exc))) from None
            p.adapter = getattr(server, "adapter", None) or p.adapter  # an attached server's engine, identified once it answered
            with pinning.client(p.pinning), priority.client_nice(p.nice, p.priority or {}), \
                    httpx.Client(timeout=10.0, headers=p.creds.headers) as http:
                yield Session(p, server, http, ready)
        finally:
            server.stop()
            secrets.redact_file(log_path)
