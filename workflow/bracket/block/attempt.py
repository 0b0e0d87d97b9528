"""A block's attempt on disk: its records written whole, its provenance, and an unfinished attempt set aside.

The block writes to `block-K.jsonl.partial` and renames it to `block-K.jsonl` only when the block completes; its
provenance is `block-K.meta.json.partial` until then. An attempt that did not finish (a failure, or a process
killed outright) is moved to `failed/block-K.attempt-N.*` beside the raw files, never deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

from bracket import secrets
from bracket.experiment.design import Block
from bracket.measure.context import block_name


def archive_attempt(raw_path: Path, meta_path: Path, log_path: Path, copy_log: bool = False) -> Path | None:
    """Move an unfinished attempt of a block to `failed/` beside the raw files; return its records' path.

    Records, provenance and server log of attempt N become failed/block-K.attempt-N.{jsonl,meta.json,log},
    out of the way of globs over raw/ but never deleted. A failing block sets itself aside (copying
    the log, which its job still names); a block whose process was killed outright is set aside by the
    next attempt.
    """
    partial = raw_path.with_name(raw_path.name + ".partial")
    meta_partial = meta_path.with_name(meta_path.name + ".partial")
    log_partial = log_link(raw_path)
    if not partial.exists() and not meta_partial.exists():
        log_partial.unlink(missing_ok=True)
        return None
    folder = raw_path.parent / "failed"
    folder.mkdir(parents=True, exist_ok=True)
    stem = raw_path.name.removesuffix(".jsonl")
    n = 1
    while any(folder.glob(f"{stem}.attempt-{n}.*")):
        n += 1
    dest = folder / f"{stem}.attempt-{n}"
    # The attempt's server log by its second name under raw/ when it has one: Snakemake deletes the job's
    # declared log (log_path) before it reruns a job whose process was killed outright.
    log_src = log_partial if log_partial.exists() else log_path
    for src, suffix in ((partial, ".jsonl"), (meta_partial, ".meta.json"), (log_src, ".log")):
        if src.exists():
            target = dest.with_name(dest.name + suffix)
            if src == log_path and copy_log:
                shutil.copy2(src, target)
            else:
                src.replace(target)
            if suffix == ".log":  # an attempt killed outright wrote its log unredacted
                secrets.redact_file(target)
    return dest.with_name(dest.name + ".jsonl")


def log_link(raw_path: Path) -> Path:
    """The server log's second name beside the attempt's records (`raw/block-K.log.partial`), a hard link
    made before the server starts, so the log outlives Snakemake deleting the job's declared log."""
    return raw_path.with_name(raw_path.name.removesuffix(".jsonl") + ".log.partial")


def link_log(log_path: Path, raw_path: Path) -> None:
    link = log_link(raw_path)
    link.unlink(missing_ok=True)
    try:
        os.link(log_path, link)
    except OSError:  # another file system, or one without hard links: the log is copied when the block fails
        pass


@contextlib.contextmanager
def signals_deferred():
    """Hold SIGINT/SIGTERM while one record is written, so an interrupted raw file ends on a whole record."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError, OSError):  # no pthreads: the torn-line guard in records.read remains
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_meta(meta: dict, meta_path: Path) -> None:
    """The block's provenance, redacted; `.partial` beside the final name until the block completes."""
    target = meta_path.with_name(meta_path.name + ("" if meta["status"] == "complete" else ".partial"))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(secrets.redact_obj(meta), indent=1, default=str))
    tmp.replace(target)


def write_failed_meta(meta: dict, meta_path: Path) -> str | None:
    """A failed attempt's provenance, however full the disk: in a new file, else over the attempt's own
    (its blocks are reused), else the status and reason alone. Returns why it could not be written, or None."""
    try:
        write_meta(meta, meta_path)
        return None
    except OSError:
        pass
    target = meta_path.with_name(meta_path.name + ".partial")
    target.with_name(target.name + ".tmp").unlink(missing_ok=True)
    small = {k: meta.get(k) for k in ("experiment", "block", "arm", "round", "server_id", "status", "error", "log")}
    for doc in (meta, small):
        try:
            with open(target, "r+" if target.exists() else "w") as f:
                f.truncate(0)
                f.write(json.dumps(secrets.redact_obj(doc), indent=1, default=str))
            return None
        except OSError as exc:
            why = f"{exc.strerror or exc}"
    return why


def disk_problem(exc: OSError, block: Block, n_blocks: int, partial: Path) -> str:
    """One line for a write that failed (a full disk, a file too large, a folder that went away)."""
    n = count_lines(partial) if partial.exists() else 0
    where = exc.filename or partial
    return (
        f"{block_name(block, n_blocks)} stopped: cannot write {where}: {exc.strerror or exc}. The {n} whole "
        f"records written before are kept; free space (or fix the folder) and run the same target again: this "
        f"block reruns in a fresh server."
    )


def count_lines(path: Path) -> int:
    """Whole records: lines that end in a newline (a write cut short leaves a torn last line)."""
    with open(path, "rb") as f:
        return sum(line.endswith(b"\n") for line in f)
