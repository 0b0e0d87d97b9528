"""A plain rerun after Snakemake was killed outright (kill -9, a lost terminal, a machine that went down).

A snakemake killed outright leaves two things in `.snakemake/`: its locks (`locks/`: the next run stops at
LockException until `snakemake --unlock`) and the marks of the jobs it was running (`incomplete/`: the next
run stops at IncompleteFilesException). The workflow's profile sets rerun-incomplete
(profiles/default/config.yaml), so a marked job runs again, Snakemake deleting its outputs first; `recover`,
called by the Snakefile when it is read, settles the rest before Snakemake looks:

- Every snakemake of the workflow holds a shared flock on `.snakemake/bracket.alive` while it lives (the
  kernel lets go of it when the process dies, however it dies), and leaves its host and pid in
  `.snakemake/bracket.alive.d/`. One that takes the flock exclusively knows that no other snakemake of this
  folder lives on this host: locks present then are a dead run's, and are removed, as `snakemake --unlock`
  does, unless a run on another host sharing the folder may hold them (its record is there; flock is not
  coherent across hosts on every file system), which stays Snakemake's own message.
- A block's records reach their final name (raw/block-K.jsonl, after its meta) only when the block is complete
  (bracket.block.runner renames them last). Snakemake killed between that rename and its own bookkeeping
  (about half a second a block, measured on the reference engine) would rerun the finished block and
  delete its records first; its marks are removed instead, as `snakemake --cleanup-metadata` does, and the
  block stays as it finished.

Only the file layout of Snakemake's file persistence is read (pinned: pyproject.toml): a marker is a file
named by the urlsafe base64 of the output's path, in parts of at most NAME_MAX with `@` before all but the
last (snakemake/persistence/file.py, `_record_path`).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import fcntl
import json
import os
import re
import socket
import sys
from pathlib import Path

BLOCK_FILE = re.compile(r"results/[^/]+/raw/block-\d+\.(?:jsonl|meta\.json)")
_held: list[int] = []  # the flock's descriptor, held for the life of this process


def _marked(folder: Path) -> dict[str, Path]:
    """Snakemake's records under `folder` (incomplete/ or metadata/), by the output path each one names."""
    out = {}
    for path in folder.rglob("*") if folder.is_dir() else ():
        if not path.is_file():
            continue
        parts = path.relative_to(folder).parts
        if any(not p.startswith("@") for p in parts[:-1]):
            continue  # not a record (migration_underway, a folder of another layout)
        try:
            key = base64.urlsafe_b64decode("".join(p.removeprefix("@") for p in parts)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        out[key] = path
    return out


def _complete(meta: Path) -> bool:
    try:
        return json.loads(meta.read_text()).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


def finished_blocks(state: Path, root: Path) -> list[str]:
    """Blocks whose records and meta are there and complete although Snakemake holds them incomplete."""
    marked = _marked(state / "incomplete")
    done = []
    for key in sorted(marked):
        if BLOCK_FILE.fullmatch(key) and key.endswith(".jsonl"):
            meta = key.removesuffix(".jsonl") + ".meta.json"
            if (root / key).is_file() and _complete(root / meta):
                done.append(key)
    records = _marked(state / "metadata") if done else {}
    for key in done:  # as `snakemake --cleanup-metadata` does: neither incomplete nor with an old record
        meta = key.removesuffix(".jsonl") + ".meta.json"
        for name in (key, meta):
            for path in (marked.get(name), records.get(name)):
                if path is not None:
                    path.unlink(missing_ok=True)
    return done


def _records(alive: Path) -> list[tuple[str, int, Path]]:
    out = []
    for path in alive.glob("*") if alive.is_dir() else ():
        host, _, pid = path.name.rpartition(".")
        if host and pid.isdigit():
            out.append((host, int(pid), path))
    return out


def hold(root: str | Path = ".") -> None:
    """Hold the folder's flock, shared, for the life of this process: a block's own process (workflow/scripts/
    run_block.py) does, so a snakemake killed alone, whose block goes on measuring, is not taken for dead by
    the next run (which would remove its locks and start the same block beside it)."""
    try:
        fd = os.open(Path(root) / ".snakemake" / "bracket.alive", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return  # no folder, no flock, or a recover() taking it this instant: Snakemake's own locks still hold
    _held.append(fd)


def recover(root: str | Path = ".", say=None) -> list[str]:
    """Clear what a snakemake of `root` killed outright left (see the module's docstring) and hold this process's
    flock; returns what was done, each as a sentence (also said on stderr)."""
    say = say or (lambda text: print(text, file=sys.stderr))
    root = Path(root)
    state = root / ".snakemake"
    alive = state / "bracket.alive.d"
    host = socket.gethostname()
    done: list[str] = []
    try:
        alive.mkdir(parents=True, exist_ok=True)
        fd = os.open(state / "bracket.alive", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return done  # a folder this process cannot write: Snakemake will say so itself
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # another snakemake of this folder lives, or a block whose snakemake was killed alone (hold): its locks
        # and marks are its own
        if sorted((state / "locks").glob("*.lock")):
            done.append(
                "another process of this folder still runs (a snakemake, or a block whose snakemake was killed "
                "alone, which ends by itself with its block): wait for it, or stop it, then run again."
            )
    except OSError:  # no flock on this file system: nothing can be told, nothing is touched
        os.close(fd)
        return done
    else:
        others = []
        for h, pid, path in _records(alive):
            if h == host:
                path.unlink(missing_ok=True)  # a process of this host that held no flock: dead
            else:
                others.append(f"{h} (pid {pid})")
        locks = sorted((state / "locks").glob("*.lock"))
        if locks and others:
            done.append(
                f"Snakemake's locks in {state / 'locks'} may be held by a run on another host ({', '.join(others)}); "
                f"if none runs there any more, remove them with `snakemake --unlock` and run again."
            )
        elif locks:
            for lock in locks:
                lock.unlink(missing_ok=True)
            done.append(
                "a snakemake run in this folder was killed outright (its locks stayed); its locks are removed, as "
                "`snakemake --unlock` would, and its unfinished jobs run again."
            )
        if not others:
            kept = finished_blocks(state, root)
            if kept:
                done.append(
                    f"{', '.join(kept)} finished before Snakemake was killed, and are kept as they are (not run again)."
                )
    fcntl.flock(fd, fcntl.LOCK_SH)  # from exclusive (or nothing) to shared: held until this process ends
    _held.append(fd)
    record = alive / f"{host}.{os.getpid()}"
    with contextlib.suppress(OSError):
        record.touch()
        atexit.register(record.unlink, missing_ok=True)
    for text in done:
        say(text)
    return done
