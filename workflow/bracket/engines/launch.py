"""How a block gets its server: a native command, `docker run`, or attaching to one already running.

native  the adapter's command in its own process group on this host (bracket.wire.server.Server).
docker  `docker run -d` of engine.docker.image with the adapter's command as entrypoint and
        arguments; environment passed by name only (`-e NAME`, the value coming from the docker
        client's own environment), so no value, secret or not, is on the recorded command line.
        Liveness is the container's state (`docker inspect`), the log is `docker logs`, teardown
        is `docker stop` then `docker rm -f`.
attach  nothing is launched or stopped: the server the user started at engine.base_url is
        checked for readiness and its prefix cache flushed at the start of each block. Its flags
        cannot change between blocks, which config validation enforces.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx

from bracket import engines
from bracket.engines import identify
from bracket.engines.base import Engine
from bracket.typed.experiment import Arm, Experiment
from bracket.wire.server import Server, ServerError, start_watchdog, stop_watchdog


def base_url(exp: Experiment) -> str:
    eng = exp.engine
    if eng.launch == "attach" and eng.base_url:
        return eng.base_url.rstrip("/")
    return f"http://{eng.host}:{eng.port}"


def container_name(experiment: str, arm: str, position: int | None = None) -> str:
    raw = f"bracket-{experiment}-{arm}" + (f"-b{position}" if position is not None else "")
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)


def _inside(exp: Experiment) -> Experiment:
    """The experiment as the engine inside a container sees it: listening on every interface of the
    container (its port is published on engine.host only), unless it shares the host's network."""
    if exp.engine.docker.network == "host":
        return exp
    return exp.model_copy(update={"engine": exp.engine.model_copy(update={"host": "0.0.0.0"})})


def docker_argv(exp: Experiment, inner_argv: list[str], env_names: list[str], name: str) -> list[str]:
    """`docker run -d ...` for the engine command `inner_argv` (its first word becomes the entrypoint)."""
    eng, d = exp.engine, exp.engine.docker
    argv = ["docker", "run", "-d", "--name", name, "--label", "org.bracket.managed=1"]
    if d.pull:
        argv += ["--pull", d.pull]
    if d.gpus:
        argv += ["--gpus", d.gpus]
    if d.shm_size:
        argv += ["--shm-size", d.shm_size]
    if d.ipc:
        argv += ["--ipc", d.ipc]
    if d.network == "host":
        argv += ["--network", "host"]
    else:
        argv += ["-p", f"{eng.host}:{eng.port}:{eng.port}"]
    for v in d.volumes:
        argv += ["-v", v]
    for n in env_names:
        argv += ["-e", n]  # by name: docker reads the value from its own environment
    argv += list(d.extra_args)
    return argv + ["--entrypoint", inner_argv[0], d.image, *inner_argv[1:]]


def server_argv(
    exp: Experiment, adapter: Engine, arm: Arm, model: str, python: str, *, name: str, env_names: list[str] = ()
) -> list[str]:
    """The exact command a block runs: the engine's own, wrapped in `docker run`, or none under attach."""
    launch = exp.engine.launch
    if launch == "attach":
        return []
    if launch == "docker":
        inner = adapter.launch_argv(_inside(exp), arm, model, python)
        env = adapter.launch_env(_inside(exp), arm)
        return docker_argv(exp, inner, sorted({*env, *env_names}), name)
    return adapter.launch_argv(exp, arm, model, python)


def launch_env(exp: Experiment, adapter: Engine, arm: Arm) -> dict[str, str]:
    return adapter.launch_env(_inside(exp) if exp.engine.launch == "docker" else exp, arm)


@dataclass
class NativeServer(Server):
    """A server process on this host; after readiness, whatever the engine still needs (Ollama's preload)."""

    adapter: Engine | None = None
    model_name: str = ""
    notes: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)  # the Bearer header of engine.api_key_env, for probes

    def wait_ready(self, timeout_s: float, poll_s: float = 0.25) -> float:
        t0 = time.monotonic()
        super().wait_ready(timeout_s, poll_s)
        self._after_ready(max(timeout_s - (time.monotonic() - t0), 30.0))
        self.ready_s = time.monotonic() - t0
        return self.ready_s

    def _after_ready(self, timeout_s: float) -> None:
        if self.adapter is None:
            return
        with httpx.Client(headers=self.headers) as http:
            try:
                info = self.adapter.after_ready(http, self.base_url, self.model_name, timeout_s=timeout_s)
            except httpx.HTTPError as exc:
                raise ServerError(
                    f"{self.adapter.kind} answered its health check but failed after it: {type(exc).__name__}: {exc}"
                ) from None
        if info:
            self.notes["after_ready"] = info


class Container:
    """A detached container, seen through the part of subprocess.Popen the runner uses (pid, poll, wait)."""

    def __init__(self, docker: str, name: str, env: dict, on_exit=None):
        self.docker, self.name, self.env, self.on_exit = docker, name, env, on_exit
        self.pid: int | None = None
        self.returncode: int | None = None

    def inspect(self, fmt: str) -> object:
        r = subprocess.run(
            [self.docker, "inspect", "--format", fmt, self.name],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        state = self.inspect("{{json .State}}")
        if not isinstance(state, dict):
            self.returncode = 125  # the container is gone (removed behind our back)
        elif state.get("Status") in ("exited", "dead", "removing"):
            self.returncode = int(state.get("ExitCode") or 0)
        else:
            self.pid = self.pid or state.get("Pid") or None
            return None
        if self.on_exit:
            self.on_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(self.name, timeout)
            time.sleep(0.5)
        return self.returncode


@dataclass
class DockerServer(NativeServer):
    """`docker run -d`: liveness from `docker inspect`, the log from `docker logs`, teardown `docker rm -f`."""

    _follower: subprocess.Popen | None = None

    @property
    def docker(self) -> str:
        return self.argv[0]

    @property
    def name(self) -> str:
        return self.argv[self.argv.index("--name") + 1]

    def _env(self) -> dict:
        env = dict(os.environ)
        env.update(self.env)
        return env

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = self._env()
        # A container of this name is a leftover of an interrupted run of the same block.
        subprocess.run([self.docker, "rm", "-f", self.name], capture_output=True, env=env, timeout=120)
        self.started_at = time.time()
        self.proc = Container(self.docker, self.name, env, on_exit=self.sync_log)
        # No timeout: the first run may pull an image of several GB.
        r = subprocess.run(self.argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            # docker's own refusal (no such image, no GPU runtime, name taken): wait_ready reports it.
            self.log_path.write_text(f"$ docker run failed with code {r.returncode}\n{r.stdout}{r.stderr}")
            self.proc.returncode = r.returncode
            self.proc.on_exit = None
            return
        cid = (r.stdout.strip().splitlines() or [""])[-1]
        image_id = self.proc.inspect("{{json .Image}}")
        digests = _image_digests(self.docker, self.argv[self.argv.index("--entrypoint") + 2], env)
        self.notes["container"] = {
            "name": self.name,
            "id": cid or None,
            "image": self.argv[self.argv.index("--entrypoint") + 2],
            "image_id": image_id,
            "image_digests": digests,
        }
        # The container is the docker daemon's, not a process of ours: should this process be killed
        # outright (no teardown), the watchdog stops and removes it.
        self.watchdog = start_watchdog(None, docker=(self.docker, self.name), env=env, log_path=self.log_path)
        with open(self.log_path, "ab") as log:
            self._follower = subprocess.Popen(
                [self.docker, "logs", "-f", self.name],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.proc.poll()

    def wait_ready(self, timeout_s: float, poll_s: float = 1.0) -> float:
        return super().wait_ready(timeout_s, poll_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sync_log(self) -> None:
        """Replace the followed log by the container's whole log (both streams), once it has stopped."""
        self._stop_follower()
        r = subprocess.run(
            [self.docker, "logs", self.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self._env(),
            timeout=120,
        )
        if r.returncode == 0:
            self.log_path.write_bytes(r.stdout)

    def _stop_follower(self) -> None:
        f, self._follower = self._follower, None
        if f is None:
            return
        try:
            f.wait(timeout=2)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(f.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                f.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(f.pid, signal.SIGKILL)
                f.wait()

    def stop(self, grace_s: float = 15.0) -> None:
        if self.proc is None:
            return
        env = self._env()
        if self.proc.returncode is None or self._follower is not None:
            subprocess.run(
                [self.docker, "stop", "-t", str(int(grace_s)), self.name],
                capture_output=True,
                env=env,
                timeout=grace_s + 60,
            )
            self.sync_log()
        subprocess.run([self.docker, "rm", "-f", self.name], capture_output=True, env=env, timeout=120)
        self._stop_follower()
        stop_watchdog(self.watchdog)


def _image_digests(docker: str, image: str, env: dict) -> list[str] | None:
    r = subprocess.run(
        [docker, "image", "inspect", "--format", "{{json .RepoDigests}}", image],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        return None


# How long an attached URL may refuse connections (or leave them unanswered) before a block gives up on it.
ATTACH_REFUSED_S = 20.0
ATTACH_CONNECT_S = 2.0


def _unreached(http: httpx.Client, base_url: str) -> identify.Unreachable | None:
    """Why no server can be reached at base_url now (refused, a handshake that never completes, TLS), with the
    fix; None when one answers, however (a server that is up but busy answers late, or with an error)."""
    try:  # the response's head is enough: its body is left unread
        with http.stream("GET", base_url + "/v1/models", timeout=httpx.Timeout(2.0, connect=ATTACH_CONNECT_S)):
            pass
    except httpx.HTTPError as exc:
        return identify.unreachable(exc, base_url, ATTACH_CONNECT_S)
    return None


class _Attached:
    pid = None
    returncode = None

    def poll(self):
        return None

    def wait(self, timeout=None):
        return None


@dataclass
class AttachedServer(NativeServer):
    """A server the user runs: readiness is checked, the engine identified (bracket.engines.identify), its
    prefix cache flushed where the engine allows, and nothing is started or stopped.

    Its cache holds whatever earlier blocks left; every prompt carries a prefix unique in the whole
    experiment (bracket.block.runner.unique_prefix), so none of it can serve a later block's prompt."""

    exp: Experiment | None = None
    declared_kind: str = "auto"
    unique_prefixes: bool = True

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text(
            f"engine.launch is attach: bracket started no server; it attached to "
            f"{self.base_url}, whose log is wherever you started it.\n"
        )
        self.started_at = time.time()
        self.proc = _Attached()

    def wait_ready(self, timeout_s: float, poll_s: float = 0.5) -> float:
        t0 = time.monotonic()
        next_beat = t0 + self.heartbeat_s
        refused_since = None
        with httpx.Client(headers=self.headers) as http:
            while not self.adapter.ready(http, self.base_url):
                # A server that is up but busy answers late; a URL where nothing listens refuses at once, one whose
                # handshake never completes stays silent, and a certificate this host does not trust never heals.
                why = _unreached(http, self.base_url)
                if why is not None and why.cause == "tls":
                    raise ServerError(f"engine.base_url is {self.base_url}, and {why}")
                refused_since = (refused_since or time.monotonic()) if why is not None else None
                if refused_since is not None and time.monotonic() - refused_since > ATTACH_REFUSED_S:
                    if why.cause == "refused":
                        raise ServerError(
                            f"nothing listens at {self.base_url}: connections were refused for "
                            f"{ATTACH_REFUSED_S:.0f} s (engine.launch is attach, so bracket starts no server); start "
                            f"the server there, or set engine.base_url to where it listens"
                        )
                    raise ServerError(
                        f"no server could be reached at {self.base_url} for {ATTACH_REFUSED_S:.0f} s: {why}"
                    )
                if self.heartbeat_s > 0 and time.monotonic() >= next_beat:
                    print(
                        f"  waiting for the attached server at {self.base_url}: {time.monotonic() - t0:.0f} s "
                        f"(of at most {timeout_s:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                    next_beat += self.heartbeat_s
                if time.monotonic() - t0 > timeout_s:
                    raise ServerError(
                        f"no {self.adapter.kind} server is ready at {self.base_url} (engine.launch is attach, so "
                        f"bracket starts none): start it, or set engine.base_url to where it listens; waited "
                        f"{timeout_s:.0f} s (engine.startup_timeout_s)" + (f"; the last attempt: {why}" if why else "")
                    )
                time.sleep(poll_s)
        self._identify()
        self._after_ready(max(timeout_s - (time.monotonic() - t0), 30.0))
        with httpx.Client(headers=self.headers) as http:
            # One server for every block: what an earlier block left in the prefix cache goes now.
            flushed = self.adapter.flush_cache(http, self.base_url, self.model_name)
        self.notes["cache_flush"] = flushed
        if not flushed.startswith("flushed") and not self.unique_prefixes:
            warning = (
                f"attach: the prefix cache of {self.base_url} was not flushed ({flushed}), and "
                f"request.unique_prefix is false, so the same prompts run in every block and a later block "
                f"may be served from what an earlier one left; set request.unique_prefix: true."
            )
            self.notes.setdefault("warnings", []).append(warning)
            print(warning, file=sys.stderr)
        self.ready_s = time.monotonic() - t0
        return self.ready_s

    def _identify(self) -> None:
        """Which engine answers (engine.kind auto): its adapter measures from here on, and provenance says so."""
        with httpx.Client(headers=self.headers) as http:
            try:
                found = identify.identify(http, self.base_url)
            except identify.Unreachable as exc:
                raise ServerError(f"the server at {self.base_url} stopped answering: {exc}") from None
            problem = identify.contradiction(self.declared_kind, found, self.base_url)
            if problem:
                raise ServerError(problem)
            self.adapter = engines.for_server(self.declared_kind, found)
            self.model_name = self.adapter.request_model(self.exp, http, self.base_url)
        self.notes["engine_identified"] = found.record()

    def alive(self) -> bool:
        return True

    def stop(self, grace_s: float = 15.0) -> None:
        pass


def make_server(
    exp: Experiment,
    adapter: Engine,
    *,
    argv: list[str],
    env: dict[str, str],
    log_path,
    base_url: str,
    secret_names: list[str],
) -> NativeServer:
    """The server object for a block under engine.launch; the runner treats all three alike."""
    kind = {"native": NativeServer, "docker": DockerServer, "attach": AttachedServer}[exp.engine.launch]
    if kind is DockerServer and "--name" not in argv:
        kind = NativeServer  # a command given in place of the adapter's (tests, engine overrides)
    key = os.environ.get(exp.engine.api_key_env)
    if kind is AttachedServer:
        return AttachedServer(
            argv=argv,
            env=env,
            log_path=log_path,
            base_url=base_url,
            health_path=adapter.health_path,
            secret_names=secret_names,
            adapter=adapter,
            model_name=adapter.request_model(exp),
            headers={"Authorization": f"Bearer {key}"} if key else {},
            exp=exp,
            declared_kind=exp.engine.kind,
            unique_prefixes=exp.request.unique_prefix,
        )
    return kind(
        argv=argv,
        env=env,
        log_path=log_path,
        base_url=base_url,
        health_path=adapter.health_path,
        secret_names=secret_names,
        adapter=adapter,
        model_name=adapter.request_model(exp),
        headers={"Authorization": f"Bearer {key}"} if key else {},
    )
