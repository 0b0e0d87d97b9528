"""What ran, recorded beside every block: engine and version, server arguments, model, host, driver.

A number without its provenance cannot be reproduced or compared (seed 000 reran a figure "in a
fresh container" and got another one). Everything here is read, never guessed: a field the
engine or the host does not offer is null.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
from pathlib import Path

import httpx

from bracket import embedded, engines
from bracket.engines.base import Engine
from bracket.typed.experiment import Experiment
from bracket.wire.client import get_text

# Small files that define a model besides its tensors.
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "params.json")
GGUF_HEAD_BYTES = 4 << 20  # header and metadata of a GGUF file; its tensors follow


def _safetensors_header(path: Path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return head
        (n,) = struct.unpack("<Q", head)
        return head + f.read(min(n, 100 << 20))


def model_fingerprint(path: str | Path | None) -> dict | None:
    """sha256 over a model's config files and tensor headers: names, dtypes, shapes and offsets.

    Two directories with the same fingerprint declare the same tensors in the same layout under the
    same configuration; weights that differ only in their values are not told apart (reading them
    whole would cost a minute per 10 GB). Safetensors: the 8-byte length and the JSON header of
    each file; GGUF: the file size and its first 4 MiB (header, metadata, tensor table). None when
    the path is not on this host (a hub name, an Ollama tag).
    """
    if not path:
        return None
    p = Path(path)
    if not p.exists():
        return None
    files = (
        [p]
        if p.is_file()
        else sorted(
            [f for f in p.iterdir() if f.name in CONFIG_FILES or f.suffix in (".safetensors", ".gguf")],
            key=lambda f: f.name,
        )
    )
    h = hashlib.sha256()
    parts = []
    for f in files:
        h.update(f.name.encode() + b"\0")
        if f.suffix == ".safetensors":
            h.update(_safetensors_header(f))
            parts.append(f"{f.name} (header)")
        elif f.suffix == ".gguf":
            h.update(str(f.stat().st_size).encode())
            with open(f, "rb") as fh:
                h.update(fh.read(GGUF_HEAD_BYTES))
            parts.append(f"{f.name} (size and first 4 MiB)")
        else:
            h.update(f.read_bytes())
            parts.append(f.name)
    if not parts:
        return None
    return {"sha256": h.hexdigest(), "path": str(p), "covers": parts}


def host_model_path(exp: Experiment, model: str) -> str:
    """Where the model a container serves lies on this host, from engine.docker.volumes (host:container)."""
    eng = exp.engine
    if eng.launch != "docker":
        return model
    for vol in eng.docker.volumes:
        bits = vol.split(":")
        if len(bits) >= 2 and (model == bits[1] or model.startswith(bits[1].rstrip("/") + "/")):
            return bits[0].rstrip("/") + model[len(bits[1].rstrip("/")) :]
    return model


def gpu_driver(timeout_s: float = 10.0) -> list[dict] | None:
    """Each GPU's name, driver and memory from nvidia-smi; None where there is no nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run(
            [exe, "--query-gpu=index,name,driver_version,memory.total,pci.bus_id", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.strip().splitlines():
        bits = [b.strip() for b in line.split(",")]
        if len(bits) >= 5:
            out.append({"index": bits[0], "name": bits[1], "driver": bits[2], "memory_mib": bits[3], "bus_id": bits[4]})
    return out or None


def host_info() -> dict:
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or None
    mem = None
    try:
        mem = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gib": mem, "kernel": platform.release()}


def collect(
    exp: Experiment,
    adapter: Engine,
    http: httpx.Client,
    base: str,
    model_name: str,
    model: str,
    notes: dict | None = None,
) -> dict:
    """Provenance fields for a block's meta, read from the running server and this host.

    `version` and `models` keep the raw answers of /version and /v1/models (what earlier records
    hold); `engine_version` is the engine's own version string wherever it states it.
    """
    meta = {"version": get_text(http, base + "/version"), "models": get_text(http, base + "/v1/models")}
    try:
        info = adapter.provenance(http, base, model_name)
    except httpx.HTTPError:
        info = {}
    meta["engine_version"] = info.pop("engine_version", None)
    if meta["version"] is None and meta["engine_version"]:
        meta["version"] = meta["engine_version"]
    meta.update({"server_info": info.pop("server_info", None), **info})
    meta["base_url"] = base
    meta["served_model"] = model_name
    meta["model"] = model
    meta["model_fingerprint"] = model_fingerprint(host_model_path(exp, model))
    # the whole weights file's sha256 where it is small (the embedded model), and whether it is the pinned one
    meta["model_sha256"] = embedded.model_hash(host_model_path(exp, model))
    meta["gpus"] = gpu_driver()
    meta["host_info"] = host_info()
    for key, value in (notes or {}).items():
        meta[key] = value
    return json.loads(json.dumps(meta, default=str))


def with_server_state(meta: dict, experiment: Experiment) -> dict:
    """A block's meta with its `server_state` (the caches its server kept between requests) always present.

    The block runner records it as launched (Engine.server_state); a block measured before it did carries
    none, and the engine's adapter reads it here from the block's launch command and environment, with the
    arm as the experiment states it. None for an engine no adapter knows or a command it cannot read. The
    analysis reads the state from the meta alone (bracket.stats.provenance), knowing no engine."""
    if meta.get("server_state") is not None or not meta.get("engine"):
        return meta
    arm = experiment.arms.get(str(meta.get("arm")))
    try:
        state = engines.get(meta["engine"]).server_state(meta.get("argv"), meta.get("env") or {}, arm)
    except (KeyError, ValueError):
        state = None
    return {**meta, "server_state": state}


def read_block_metas(paths: list[str | Path], experiment: Experiment) -> list[dict]:
    """The blocks' meta files (raw/block-K.meta.json) as the analysis takes them: each its number from the file's
    name where it lacks one, and its server state read where the block recorded none (with_server_state)."""
    out = []
    for path in paths:
        meta = {"block": int(Path(path).name.split(".")[0].split("-")[1]), **json.loads(Path(path).read_text())}
        out.append(with_server_state(meta, experiment))
    return out
