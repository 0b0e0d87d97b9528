"""What can be checked before measuring is checked before the first block, in seconds.

Run when the workflow loads an experiment (workflow/rules/common.smk), after validation, and by
`bracket check`. Each check looks at this host: that the model a native launch serves exists,
that docker's mounts exist, that the engine's program is there and docker's daemon answers; and,
under engine.launch: attach, at the server itself (bracket.experiment.probe: one short request, in seconds). The engine's port is checked again
before every launch (bracket.measure.session.ensure_port_free), where it matters. The embedded engine needs
none of this: the workflow builds it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bracket.embedded import is_synthetic, uses_llamacpp_build
from bracket.experiment import arena_workload, probe, prompts, tokencount
from bracket.physics.modelsource import container_to_host, is_hub_id, is_pathlike
from bracket.secrets import short_problem
from bracket.typed.experiment import Experiment

ENGINE_MODULES = {"vllm": "vllm", "sglang": "sglang"}
DEFAULT_PROGRAMS = {"llamacpp": "llama-server", "ollama": "ollama"}


def _exists(name: str, root: Path) -> bool:
    p = Path(name).expanduser()
    return (p if p.is_absolute() else root / p).exists()


def model_problems(exp: Experiment, root: Path) -> list[str]:
    """The served model and draft models of a native launch must be on this host (a hub id may be
    downloaded by the engine); a docker launch's mounted model must exist at its host path."""
    eng, out = exp.engine, []
    launch = eng.launch
    names = [("engine.model", eng.model)]
    drafts = {}
    for a, arm in exp.arms.items():  # one line per draft model, however many arms share it
        draft = (arm.speculative.model if arm.speculative is not None else None) or ""
        drafts.setdefault(draft, f"arms.{a}.speculative.model")
    names += [(key, name) for name, key in drafts.items()]
    for key, name in names:
        if key == "engine.model" and name in ("", "embedded"):
            if launch != "attach" and eng.kind not in ("ollama", "reference"):  # their own model names
                out.append(
                    "engine.model is not set, and engine.embedded is false: name the model the engine "
                    "serves (a directory, a .gguf file, or a hub id such as Qwen/Qwen3-8B)."
                )
            continue
        if not name or (key == "engine.model" and eng.kind == "ollama"):  # an Ollama tag, not a path
            continue
        if is_synthetic(name) and launch == "native":  # the workflow writes it (rule synthetic_gguf)
            continue
        if launch == "native" and not _exists(name, root) and (is_pathlike(name) or not is_hub_id(name)):
            out.append(
                f"{key} is {name!r}, which does not exist on this host (looked in "
                f"{Path(name).expanduser() if Path(name).is_absolute() else root / name}); give the "
                f"directory that holds the weights or the .gguf file, or a hub id (org/name)."
            )
        if launch == "docker" and name.startswith("/"):
            host, vol = container_to_host(exp, name)
            if host and not Path(host).exists():
                out.append(
                    f"{key} is {name!r} inside the container, which engine.docker.volumes maps to {host} "
                    f"on this host ({vol!r}), and {host} does not exist; fix the mount or the path."
                )
    return list(dict.fromkeys(out))


def binary_problems(exp: Experiment, timeout_s: float = 20.0) -> list[str]:
    """The program that starts the server: docker for a docker launch; for a native one, llama-server or
    ollama on PATH, or the Python that must import vllm / sglang. A native llama.cpp with no executable
    named needs none: the workflow's own build serves it, made by a rule before the first block."""
    eng = exp.engine
    if eng.launch == "docker":
        if not shutil.which("docker"):
            return ["engine.launch is docker, but no `docker` program is on PATH; install docker or launch natively."]
        return docker_daemon_problems(timeout_s)
    if eng.launch != "native":
        return []
    kind = eng.kind
    if uses_llamacpp_build(exp):  # the workflow builds llama-server itself (rule llamacpp_build)
        return []
    if kind in DEFAULT_PROGRAMS:
        prog = eng.executable or DEFAULT_PROGRAMS[kind]
        bit = execute_bit_problem("engine.executable" if eng.executable else f"engine.kind {kind}'s program", prog)
        if bit:
            return [bit]
        if shutil.which(prog) or Path(prog).is_file():
            return []
        return [
            f"engine.kind {kind} runs {prog!r}, which is not on PATH (nor a file); install it or set "
            f"engine.executable to its full path."
        ]
    module = ENGINE_MODULES.get(kind)
    if eng.python and (module or kind == "reference"):  # the reference server runs on engine.python when set
        bit = execute_bit_problem("engine.python", eng.python)
        if bit:
            return [bit]
    if not module:
        return []
    python = eng.python or "python3"
    exe = shutil.which(python) or (python if Path(python).is_file() else None)
    if not exe:
        return [
            f"engine.python is {python!r}, which is not on PATH (nor a file); set engine.python to the "
            f"interpreter of the environment where {module} is installed."
        ]
    try:
        # find_spec looks the module up without importing it: a second, not the engine's minute.
        proc = subprocess.run(
            [exe, "-c", f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 3)"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"engine.python {exe} could not be run ({type(exc).__name__}: {exc}); set engine.python."]
    if proc.returncode == 3:
        return [
            f"engine.python {exe} cannot import {module}; set engine.python to the interpreter of the "
            f"environment where {module} is installed (pip install {module})."
        ]
    if proc.returncode != 0:
        return [
            f"engine.python {exe} failed to run ({proc.stderr.strip()[-200:] or proc.returncode}); "
            f"set engine.python to a working Python."
        ]
    return []


def execute_bit_problem(key: str, program: str) -> str | None:
    """A program a block would start that is a file without its execute bit: said as that, with the fix, before any
    block (a block would stop at its start). Looked up as exec does: a path as given, a bare name on PATH."""
    if "/" in program:
        found = Path(program).expanduser()
    else:
        dirs = os.environ.get("PATH", os.defpath).split(os.pathsep)
        if shutil.which(program):
            return None
        found = next((Path(d) / program for d in dirs if d and (Path(d) / program).is_file()), None)
    if found is None or not found.is_file() or os.access(found, os.X_OK):
        return None
    return (
        f"{key} is {program!r}, a file without its execute bit (mode {found.stat().st_mode & 0o7777:04o}), so no "
        f"block could start the server; run `chmod +x {found}`."
    )


def docker_daemon_problems(timeout_s: float = 20.0) -> list[str]:
    """`docker info` answers only when the client reaches a running daemon (the program alone is not enough)."""
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [
            f"engine.launch is docker, but `docker info` did not answer ({type(exc).__name__}); start the "
            f"docker daemon (or set DOCKER_HOST), or launch natively."
        ]
    if proc.returncode != 0 or not proc.stdout.strip():
        why = (proc.stderr.strip().splitlines() or ["no server version"])[-1][:300]
        return [
            f"engine.launch is docker, but no docker daemon answers ({why}); start it (or set DOCKER_HOST to "
            f"one that runs), or launch natively."
        ]
    return []


def attach_problems(exp: Experiment, root: Path) -> list[str]:
    """An attached server, probed in seconds as a block would use it (bracket.experiment.probe), then every prompt
    counted by the server's own tokenizer against the context it reports (prompt_fit_problems)."""
    if exp.engine.launch != "attach":
        return []
    rep = probe.run(exp, root)
    return rep.problems or prompt_fit_problems(exp, root, rep)


def prompt_fit_problems(exp: Experiment, root: Path, rep) -> list[str]:
    """Every prompt with its unique prefix and request.max_tokens, in the attached server's tokens (its
    /tokenize, bracket.experiment.tokencount), against the context it reports; where it has no tokenize route, the
    model's tokenizer.json if engine.model is here, else the byte bound (bracket.experiment.prompts.check)."""
    import httpx

    headers, _ = probe._headers(exp)
    kind, name = rep.identity.kind, rep.identity.name
    with httpx.Client(headers=headers, timeout=probe.PROBE_TIMEOUT_S) as http:
        counter, why = tokencount.server(http, rep.base, kind, rep.model, name)
        context = tokencount.server_context(http, rep.base, kind, rep.model)
        model = exp.engine.model or None
        try:
            prompts.check(exp, root, model_dir=model, counter=counter, server_context=context, why_not=why)
        except prompts.PromptError as exc:
            return exc.problems
    return []


def arena_problems(exp: Experiment) -> list[str]:
    """An arena cell this engine's adapter cannot send through its own stream (bracket.experiment.arena_workload.problems)."""
    return arena_workload.problems(exp)


def secret_problems(exp: Experiment, environ=None) -> list[str]:
    """Secrets too short to redact without changing the data (bracket.secrets.MIN_LENGTH), by the name they
    are exported under; their values are never part of the message."""
    environ = os.environ if environ is None else environ
    eng = exp.engine
    names = ([eng.api_key_env] if eng.api_key_env else []) + list(eng.secret_env)
    found = [short_problem(name, environ.get(name)) for name in names]
    return [
        f"engine.{'api_key_env' if name == eng.api_key_env else 'secret_env'}: {p}"
        for name, p in zip(names, found)
        if p
    ]


def problems(exp: Experiment, root: str | Path = ".") -> list[str]:
    """Everything wrong with this host for this experiment that can be seen without a server."""
    short = secret_problems(exp)
    if short:  # before the attach probe, which would send the key
        return short
    found = arena_problems(exp)
    if exp.engine.embedded:
        return found
    root = Path(root)
    return found + model_problems(exp, root) + binary_problems(exp) + attach_problems(exp, root)
