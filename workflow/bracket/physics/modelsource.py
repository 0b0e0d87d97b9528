"""Where the served model's tensor headers can be read, whatever the user's setup.

The ceiling needs the bytes a token reads, and those come from tensor headers. A user's box names
its model in one of several ways; each is tried in turn, and the first that finds headers wins:

  local      engine.model is a directory, a .safetensors or a .gguf on this host
  container  under engine.launch docker, engine.model is a path inside the container, mapped to the
             host through engine.docker.volumes (HOST:CONTAINER[:ro])
  hf-cache   a hub id (org/name) whose snapshot is in the local Hugging Face cache, found through
             huggingface_hub's own cache resolution with no network (HF_HUB_CACHE, HF_HOME honoured)
  hub        the same hub id read remotely: only the safetensors headers, by range requests
             (huggingface_hub.get_safetensors_metadata). Tried only where the hub answers, and
             never when HF_HUB_OFFLINE is set.
  unknown    none of these: the reason, and the experiment key that would give the bytes.

Under attach the model is what the user says (engine.model), else the name the requests use
(engine.served_model), else the first name the running server lists at /v1/models.

Physics never costs the article: an unknown source is recorded, not raised, and the article says
the ceiling is unknown and why. Only a path that the experiment itself says must be on this host
(a native launch) fails, and it fails before the first block (bracket.experiment.preflight).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from bracket.engines.launch import base_url

# `exp` is the validated experiment (bracket.typed.experiment.Experiment), read by attribute; not imported
# here: experiment/ stands above this layer (ARCHITECTURE.md, the floor plan).

# org/name as the hub spells repositories; a path never matches because it is checked first.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
WEIGHT_SUFFIXES = (".safetensors", ".gguf")


@dataclass(frozen=True)
class Source:
    """Where the headers are: ``kind`` (local, container, hf-cache, hub, unknown), the ``name`` the
    experiment gives, the host ``path`` to read (None for hub and unknown), the ``repo_id`` of a hub
    model, a sentence ``detail`` of how it was found (or, for unknown, why not) and the ``key`` that
    would give it."""

    kind: str
    name: str
    path: str | None = None
    repo_id: str | None = None
    detail: str = ""
    key: str = ""

    @property
    def found(self) -> bool:
        return self.kind != "unknown"

    def to_dict(self) -> dict:
        return asdict(self)


def is_pathlike(name: str) -> bool:
    """A name the user meant as a path: absolute, relative with ./ or ../, ~, or a weights file."""
    return name.startswith(("/", "./", "../", "~")) or name.endswith(WEIGHT_SUFFIXES) or name in (".", "..")


def is_hub_id(name: str) -> bool:
    return bool(HUB_ID.match(name)) and not is_pathlike(name)


def container_to_host(exp, model: str) -> tuple[str | None, str | None]:
    """(host path, the volume that maps it) for a path inside the container; (None, None) when no
    mount of engine.docker.volumes covers it."""
    docker = exp.engine.docker
    for vol in docker.volumes if docker is not None else ():
        bits = vol.split(":")
        if len(bits) < 2:
            continue
        host, inside = bits[0].rstrip("/") or "/", bits[1].rstrip("/") or "/"
        if model == inside or model.startswith(inside.rstrip("/") + "/"):
            return host + model[len(inside) :] if inside != "/" else host.rstrip("/") + model, vol
    return None, None


def hf_cache_snapshot(repo_id: str, revision: str | None = None) -> str | None:
    """The local snapshot folder of ``repo_id`` in the Hugging Face cache, or None; never a network call.

    huggingface_hub's own resolution (refs/<revision> -> snapshots/<commit>), so HF_HUB_CACHE and
    HF_HOME are honoured exactly as the engines that downloaded the model honour them.
    """
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - a dependency of the package
        return None
    try:
        path = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir(), local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError):
        return None
    p = Path(path)
    if any(p.glob("*.safetensors")) or any(p.glob("*.gguf")) or (p / "model.safetensors.index.json").is_file():
        return str(p)
    return None


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the hub answers here; False under HF_HUB_OFFLINE, without a network, or behind a wall."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        return httpx.head(endpoint + "/api/models", timeout=timeout_s, follow_redirects=True).status_code < 500
    except httpx.HTTPError:
        return False


def served_name(exp, timeout_s: float = 3.0) -> tuple[str | None, str]:
    """Under attach: the model name the requests use, and where it came from."""
    eng = exp.engine
    if eng.served_model:
        return eng.served_model, "engine.served_model"
    import httpx

    url = base_url(exp) + "/v1/models"
    headers = {}
    key_env = eng.api_key_env
    if key_env and os.environ.get(key_env):
        headers["Authorization"] = f"Bearer {os.environ[key_env]}"
    try:
        data = httpx.get(url, timeout=timeout_s, headers=headers).json().get("data") or []
        name = data[0].get("id") if data and isinstance(data[0], dict) else None
        return (str(name), f"the first model {url} lists") if name else (None, f"{url} lists no model")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return None, f"{url} did not answer ({type(exc).__name__})"


def resolve(exp, root: str | Path = ".", *, model: str | None = None, remote: bool | None = None) -> Source:
    """Find the headers of the experiment's model (see the module doc for the order).

    ``model`` replaces the name the experiment gives (the workflow passes the embedded model's
    directory). ``remote`` forces the hub read on or off; None tries it only where the hub answers.
    """
    eng = exp.engine
    launch = eng.launch
    how = "engine.model"
    name = model if model is not None else eng.model
    if launch == "attach" and (not name or name == "embedded"):
        name, how = served_name(exp)
        if not name:
            return Source(
                "unknown",
                "",
                detail=f"the attached server's model is not named ({how})",
                key="engine.model (the model's directory on this host, or its hub id)",
            )
    if not name or name == "embedded":
        return Source("unknown", name or "", detail="no model is named", key="engine.model")

    if launch == "docker" and name.startswith("/"):
        host, vol = container_to_host(exp, name)
        if host and Path(host).exists():
            return Source(
                "container",
                name,
                path=host,
                detail=f"{name} inside the container is {host} on this host (volume {vol})",
            )
        if host:
            return Source(
                "unknown",
                name,
                detail=f"{name} inside the container maps to {host} on this host (volume {vol}), which does not exist",
                key="engine.docker.volumes",
            )
        return Source(
            "unknown",
            name,
            detail=f"{name} is a path inside the container that no mount of "
            f"engine.docker.volumes covers (it may be in the image)",
            key="engine.docker.volumes (mount the model's host directory at that path)",
        )

    local = Path(name).expanduser()
    if not local.is_absolute():
        local = Path(root) / local
    if local.exists():
        return Source("local", name, path=str(local), detail=f"{how} {name} on this host")
    if is_pathlike(name) or not is_hub_id(name):
        return Source(
            "unknown",
            name,
            detail=f"{how} {name} does not exist on this host",
            key="engine.model (a directory that holds the weights, or a .gguf file)",
        )

    snap = hf_cache_snapshot(name)
    if snap:
        return Source(
            "hf-cache",
            name,
            path=snap,
            repo_id=name,
            detail=f"{how} {name}, found in the local Hugging Face cache at {snap}",
        )
    if remote is None:
        remote = hub_reachable()
    if remote:
        return Source(
            "hub",
            name,
            repo_id=name,
            detail=f"{how} {name}, headers read from the hub (safetensors headers only, no weights downloaded)",
        )
    return Source(
        "unknown",
        name,
        repo_id=name,
        detail=f"{how} {name} is a hub id that is not in the local Hugging Face cache "
        f"({cache_dir()}) and the hub is not reachable from here",
        key="engine.model (the model's directory on this host), or download it into the cache",
    )


def cache_dir() -> str:
    """The hub cache as huggingface_hub resolves it, read now.

    Kept beside huggingface_hub rather than read from it: huggingface_hub.constants.HF_HUB_CACHE is fixed when
    the package is imported, so an environment set later (a test's HF_HUB_CACHE, a caller that points
    HF_HOME elsewhere) would not be seen, and huggingface_hub has no public call that reads it again. The
    snapshot itself is found by huggingface_hub (hf_cache_snapshot). tests/test_hf_cache_dir.py checks this
    equals constants.HF_HUB_CACHE for nine environments (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME,
    XDG_CACHE_HOME, ~, none), each given to a fresh interpreter before the import."""
    env = os.environ
    if env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        return os.path.expanduser(env.get("HF_HUB_CACHE") or env["HUGGINGFACE_HUB_CACHE"])
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return os.path.join(os.path.expanduser(home), "hub")
