"""Run one block: a fresh server for one arm, warmups, then timed requests for every workload.

Every request becomes one raw record, appended and fsynced as it arrives. The block writes to
`block-K.jsonl.partial` and renames it to `block-K.jsonl` only when the block completes. A block
that fails (server died, Ctrl-C, SIGTERM, a request error under on_error: stop) keeps what it
measured: the next invocation moves the attempt's records, provenance and server log to
`failed/block-K.attempt-N.*` beside the raw files and reruns the block from scratch in a fresh
server, while finished blocks are never redone.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from bracket import records, secrets, version
from bracket.arena import run as arena
from bracket.controls import neutrality
from bracket.engines import launch, provenance
from bracket.experiment import arena_workload, config, prompts
from bracket.experiment.config import draft_budget
from bracket.experiment.design import Block
from bracket.experiment.prompts import unique_prefix
from bracket.measure import eta, session
from bracket.measure.session import BlockFailed
from bracket.measure.telemetry import Telemetry, summarize
from bracket.typed.experiment import Arm, Experiment
from bracket.wire.server import ServerError, log_tail

console = Console(stderr=True, highlight=False)


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


def _link_log(log_path: Path, raw_path: Path) -> None:
    link = log_link(raw_path)
    link.unlink(missing_ok=True)
    try:
        os.link(log_path, link)
    except OSError:  # another file system, or one without hard links: the log is copied when the block fails
        pass


@contextlib.contextmanager
def _signals_deferred():
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


def block_name(block: Block, n_blocks: int) -> str:
    """How messages name a block: counted from 1 like the progress lines, with its files' index."""
    return f"block {block.position + 1}/{n_blocks} (block-{block.position})"


def _write_meta(meta: dict, meta_path: Path) -> None:
    """The block's provenance, redacted; `.partial` beside the final name until the block completes."""
    target = meta_path.with_name(meta_path.name + ("" if meta["status"] == "complete" else ".partial"))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(secrets.redact_obj(meta), indent=1, default=str))
    tmp.replace(target)


def _write_failed_meta(meta: dict, meta_path: Path) -> str | None:
    """A failed attempt's provenance, however full the disk: in a new file, else over the attempt's own
    (its blocks are reused), else the status and reason alone. Returns why it could not be written, or None."""
    try:
        _write_meta(meta, meta_path)
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


def _disk_problem(exc: OSError, block: Block, n_blocks: int, partial: Path) -> str:
    """One line for a write that failed (a full disk, a file too large, a folder that went away)."""
    n = _count_lines(partial) if partial.exists() else 0
    where = exc.filename or partial
    return (
        f"{block_name(block, n_blocks)} stopped: cannot write {where}: {exc.strerror or exc}. The {n} whole "
        f"records written before are kept; free space (or fix the folder) and run the same target again: this "
        f"block reruns in a fresh server."
    )


def run_block(
    exp: Experiment,
    experiment: str,
    block: Block,
    n_blocks: int,
    *,
    raw_path: str | Path,
    meta_path: str | Path,
    log_path: str | Path,
    model: str,
    python: str,
    root: str | Path = ".",
    lock_dir: str | Path = "results/.locks",
    argv: list[str] | None = None,
) -> Path:
    """Run `block` and write its raw records to `raw_path` and its provenance to `meta_path`.

    `argv` replaces the engine adapter's server command (a server started some other way, or a
    stand-in server in tests); everything else (readiness, requests, teardown) is unchanged.
    """
    raw_path, meta_path, log_path, root = Path(raw_path), Path(meta_path), Path(log_path), Path(root)
    partial = raw_path.with_name(raw_path.name + ".partial")
    eng = exp.engine
    # The adapter's command, natively or inside `docker run` (none under attach): the seam to engines/launch.py.
    # The block's servers: one, or a second for its prefix-caching arena cells (bracket.experiment.arena_workload.servers).
    groups = [(_with_arm(exp, block.arm, a), names) for a, names in arena_workload.servers(exp, block.arm)]
    p = session.plan(
        groups[0][0],
        block.arm,
        model=model,
        python=python,
        argv=argv,
        name=launch.container_name(experiment, block.arm, block.position),
    )
    kept = archive_attempt(raw_path, meta_path, log_path)
    if kept:
        console.print(
            f"[yellow]{block_name(block, n_blocks)}: an earlier attempt did not finish; its records are "
            f"kept in {kept} and the block starts again in a fresh server[/]",
            soft_wrap=True,
        )
    arm = groups[0][0].arms[block.arm]
    try:  # before any server starts: the prompts parse and fit the arm's context
        notes = prompts.check(exp, root, model_dir=model if eng.launch == "native" else None)
        if eng.launch != "attach":  # an attached server's tokens were counted by the preflight (its /tokenize)
            for note in notes:
                console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)
        workloads = {name: prompts.load(root / wl.prompts) for name, wl in exp.workloads.items()}
    except prompts.PromptError as exc:
        raise BlockFailed(f"{block_name(block, n_blocks)} was not started: {exc}") from None
    server_id = f"{experiment}-p{block.position}-{int(time.time())}"
    meta = {
        "experiment": experiment,
        "block": block.position,
        "arm": block.arm,
        "round": block.round,
        "seed": block.seed,
        "server_id": server_id,
        "engine": eng.kind,
        "launch": eng.launch,
        "argv": p.argv,
        "env": {k: ("***" if k in p.creds.env else v) for k, v in p.env.items()},
        "pinning": p.pinning.record() if p.pinning else None,
        "engine_layout": p.worker.record() if p.worker else None,
        "priority": p.priority,
        "server_state": p.adapter.server_state(p.argv, p.env, arm),  # caches kept between requests, as launched
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "client_python": sys.version.split()[0],
        "bracket": version.info(),  # which bracket measured: version, commit, dirty (bracket.version)
        # the CPUs this block (and the server it starts) may run on: a scheduler's job step can confine it
        "cpus_allowed": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "log": str(log_path),
        "status": "started",
        "neutrality": neutrality.when_off(exp, stand_in=argv is not None) or "on",
    }
    design = exp.design
    req = exp.request
    writer = None

    def cooldown():
        if block.position > 0 and design.cooldown_s > 0:
            console.print(f"cooldown {design.cooldown_s:.0f} s before block {block.position + 1}/{n_blocks}")
            time.sleep(design.cooldown_s)

    def before_start():
        nonlocal writer
        meta["host_lock"] = p.host_lock  # whom this block waited for, and how long, before it measured
        _write_meta(meta, meta_path)  # a client killed outright still leaves the attempt's provenance
        _link_log(log_path, raw_path)
        writer = records.RecordWriter(partial)
        console.print(
            f"[bold]block {block.position + 1}/{n_blocks}[/] arm [cyan]{block.arm}[/] round "
            f"{block.round}: starting {eng.kind}"
        )
        left = eta.left_in_experiment(meta_path.parent, n_blocks - block.position, design.cooldown_s)
        if left:
            console.print(
                f"  about {eta.duration(left[0])} left in the experiment, this block included "
                f"(at the mean of {left[1]} finished block(s))",
                soft_wrap=True,
            )

    def on_start(server):
        meta["pid"] = server.proc.pid
        _write_meta(meta, meta_path)

    try:
        with session.serve(
            exp,
            p,
            log_path=log_path,
            lock_dir=Path(lock_dir),
            cooldown=cooldown,
            before_start=before_start,
            on_start=on_start,
            holder=f"{experiment} {block_name(block, n_blocks)} in {Path.cwd()}",
            say=lambda text: console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True),
        ) as s:
            meta["ready_s"] = round(s.ready_s, 2)
            meta["engine"] = p.adapter.kind  # under attach, the engine identified (engine.kind auto)
            meta["started_at"] = s.server.started_at
            with Telemetry(interval_s=0.5) as tel:
                meta.update(
                    provenance.collect(
                        exp,
                        p.adapter,
                        s.http,
                        s.base,
                        session.served_name(p.adapter, exp, s.http, s.base),
                        model,
                        s.server.notes,
                    )
                )
                _write_meta(meta, meta_path)  # written before the first request
                _measure(
                    groups[0][0],
                    experiment,
                    block,
                    n_blocks,
                    arm,
                    p.adapter,
                    {n: workloads[n] for n in groups[0][1]},
                    s.http,
                    s.base,
                    s.server,
                    writer,
                    server_id,
                    req,
                    design,
                )
                if meta["neutrality"] == "on":
                    _neutrality(
                        exp, experiment, block, n_blocks, p.adapter, workloads, s.http, s.base, writer, server_id
                    )
            # GPU clocks, temperature and power beside the block, so drift can be explained (null on CPU).
            meta["telemetry"] = summarize(tel.samples)
            meta["telemetry_samples"] = tel.samples
        for i, (exp_i, names) in enumerate(groups[1:], start=1):
            _serve_more(
                exp_i,
                experiment,
                block,
                n_blocks,
                names,
                workloads,
                meta,
                meta_path,
                writer,
                log_path,
                lock_dir,
                model,
                python,
                argv,
                f"{server_id}-s{i}",
                req,
                design,
            )
        meta["status"] = "complete"
    except BaseException as exc:
        meta["status"] = "failed"
        if isinstance(exc, ServerError):  # its program could not be run (no execute bit, not found): said so
            err = BlockFailed(f"{block_name(block, n_blocks)} was not started: {exc}")
        elif isinstance(exc, OSError):  # a write that failed: one line naming the file, not a chain of tracebacks
            err = BlockFailed(_disk_problem(exc, block, n_blocks, partial))
        else:
            err = exc
        meta["error"] = secrets.redact(f"{type(err).__name__}: {err}")
        if isinstance(err, BlockFailed):
            err.args = (secrets.redact(str(err)),)
        if err is exc:
            raise
        raise err from None
    finally:
        if writer is not None:  # the server was (about to be) started: the attempt is recorded
            try:
                writer.close()
            except OSError:  # the buffered tail of a record the disk refused; whole records are on disk
                pass
            meta["ended_at"] = time.time()
            meta["log_tail"] = secrets.redact(log_tail(log_path, 5))
            if meta["status"] == "complete":
                _write_meta(meta, meta_path)
                meta_path.with_name(meta_path.name + ".partial").unlink(missing_ok=True)
                log_link(raw_path).unlink(missing_ok=True)
            else:
                _write_failed_meta(meta, meta_path)
                # Set aside now, log included: Snakemake clears a job's log before rerunning it.
                try:
                    kept = archive_attempt(raw_path, meta_path, log_path, copy_log=True)
                except OSError as exc:  # a full disk: the next attempt sets it aside (it moves, never copies)
                    console.print(
                        f"[red]{block_name(block, n_blocks)} failed; its records, provenance and server log "
                        f"stay beside {escape(str(partial))} ({escape(exc.strerror or str(exc))}) and are "
                        f"set aside by the next attempt.[/]",
                        soft_wrap=True,
                    )
                else:
                    n = _count_lines(kept) if kept.exists() else 0
                    console.print(
                        f"[red]{block_name(block, n_blocks)} failed; the {n} records it measured, its "
                        f"provenance and server log are kept in {escape(str(kept.with_suffix('.*')))}. Run "
                        f"the same target again to rerun this block in a fresh server.[/]",
                        soft_wrap=True,
                    )
    partial.rename(raw_path)
    return raw_path


def _with_arm(exp: Experiment, arm_name: str, arm: Arm) -> Experiment:
    """The experiment with arm `arm_name` as given (the same experiment where it is already that arm): a new
    experiment, validated as the file's was, so the arm's keys left out get their defaults."""
    if exp.arms[arm_name] is arm:
        return exp
    data = config.as_data(exp)
    data["arms"][arm_name] = config.as_data(arm)
    return config.validate(data, source=f"arms.{arm_name} as the block launches it")


def _serve_more(
    exp,
    experiment,
    block,
    n_blocks,
    names,
    workloads,
    meta,
    meta_path,
    writer,
    log_path,
    lock_dir,
    model,
    python,
    argv,
    server_id,
    req,
    design,
) -> None:
    """A further server of the block (its prefix-caching arena cells, bracket.experiment.arena_workload.servers): launched after the
    first has stopped, its log beside the block's (block-K.sN.log), its command and state in meta["servers"]."""
    arm = exp.arms[block.arm]
    p = session.plan(
        exp,
        block.arm,
        model=model,
        python=python,
        argv=argv,
        name=launch.container_name(experiment, block.arm, block.position) + f"-{server_id[-2:]}",
    )
    log = Path(log_path).with_name(Path(log_path).stem + f".{server_id.rsplit('-', 1)[-1]}.log")
    entry = {
        "server_id": server_id,
        "workloads": names,
        "argv": p.argv,
        "log": str(log),
        "server_state": p.adapter.server_state(p.argv, p.env, arm),
    }
    meta.setdefault("servers", []).append(entry)
    console.print(
        f"  block {block.position + 1}/{n_blocks}: a server of its own for {len(names)} prefix-caching "
        f"arena cell(s), its prefix cache on"
    )
    with session.serve(
        exp,
        p,
        log_path=log,
        lock_dir=Path(lock_dir),
        holder=f"{experiment} {block_name(block, n_blocks)} in {Path.cwd()}",
        say=lambda text: console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True),
    ) as s:
        entry["ready_s"] = round(s.ready_s, 2)
        entry["pid"] = s.server.proc.pid
        _write_meta(meta, meta_path)
        _measure(
            exp,
            experiment,
            block,
            n_blocks,
            arm,
            p.adapter,
            {n: workloads[n] for n in names},
            s.http,
            s.base,
            s.server,
            writer,
            server_id,
            req,
            design,
        )


def _neutrality(exp, experiment, block, n_blocks, adapter, workloads, http, base, writer, server_id):
    """The neutrality control's pairs on this block's server, after the arm's own requests (bracket.controls.neutrality)."""
    model_name = session.served_name(adapter, exp, http, base)
    per_block = block.position if exp.engine.launch == "attach" else None

    def tag(workload, pair):
        return unique_prefix(exp.design.seed, f"{neutrality.CONTROL}:{workload}", pair, per_block)

    for rec in neutrality.run(
        exp,
        experiment,
        block,
        adapter,
        http,
        base,
        model_name,
        server_id,
        workloads,
        tag,
        draft_budget(exp.arms[block.arm]),
    ):
        with _signals_deferred():
            writer.append(rec)
        per_tok = (
            f"server {1e3 * rec['server_decode_s'] / rec['server_tokens']:.3f} ms/token"
            if rec["server_decode_s"]
            else "no server timing"
        )
        err = f"  [red]{escape(secrets.redact(rec['error']))}[/]" if rec["error"] else ""
        console.print(
            f"  block {block.position + 1}/{n_blocks} neutrality pair {rec['pair'] + 1} {rec['body']:<7} "
            f"{per_tok}{err}",
            soft_wrap=True,
        )


def _count_lines(path: Path) -> int:
    """Whole records: lines that end in a newline (a write cut short leaves a torn last line)."""
    with open(path, "rb") as f:
        return sum(line.endswith(b"\n") for line in f)


def _measure(
    exp, experiment, block, n_blocks, arm, adapter, workloads, http, base, server, writer, server_id, req, design
):
    model_name = session.served_name(adapter, exp, http, base)
    total = design.warmup_runs + design.runs_per_block
    t0, done, requests = time.monotonic(), 0, total * len(workloads)
    for run in range(total):
        warm = run < design.warmup_runs
        for wl_name, texts in workloads.items():
            if not server.alive():
                raise BlockFailed(
                    f"server exited with code {server.proc.poll()} in the middle of "
                    f"{block_name(block, n_blocks)}; records so far are kept. Last lines of "
                    f"{server.log_path}:\n{log_tail(server.log_path)}"
                )
            if arena_workload.is_arena(exp.workloads[wl_name]):  # concurrent users at a context depth
                for rec in arena.run_cell(
                    exp,
                    experiment,
                    block,
                    arm,
                    adapter,
                    wl_name,
                    texts,
                    http,
                    base,
                    server_id,
                    run,
                    warm,
                    draft_budget(arm),
                ):
                    with _signals_deferred():
                        writer.append(rec)
                continue
            p = texts[run % len(texts)]
            per_block = block.position if exp.engine.launch == "attach" else None
            text = (unique_prefix(design.seed, wl_name, run, per_block) if req.unique_prefix else "") + p["prompt"]
            measured = adapter.measure(http, base, model_name, text, req, req.seed, arm)
            m = measured.measurement
            check = records.cache_check(measured.cache_check, req)
            rec = records.new_record(
                experiment=experiment,
                arm=block.arm,
                block=block.position,
                round=block.round,
                position=block.position,
                run=run,
                warmup=warm,
                workload=wl_name,
                prompt_id=p["id"],
                server_id=server_id,
                draft_budget=draft_budget(arm),
                max_tokens=req.max_tokens,
                host=block.host or None,
                cache_check=check,
                **m.fields(),
                **measured.spec.fields(),
            )
            with _signals_deferred():
                writer.append(rec)
            rate = f"{m.decode_tok_s:8.1f} tok/s" if m.decode_tok_s else "   (no rate)"
            al = f"  AL {rec['acceptance_length']:.2f}" if rec["acceptance_length"] else ""
            tag = "warmup" if warm else f"run {run - design.warmup_runs + 1}/{design.runs_per_block}"
            err = f"  [red]{escape(secrets.redact(m.error))}[/]" if m.error else ""
            done += 1
            left = eta.left_in_block(done, requests, time.monotonic() - t0)
            when = f"  ({eta.duration(left)} left in block)" if left else ""
            console.print(
                f"  block {block.position + 1}/{n_blocks} {block.arm:<12} {wl_name:<6} {tag:<9} {rate}{al}{err}{when}",
                soft_wrap=True,
            )
            if m.error and req.on_error == "stop":
                raise BlockFailed(f"request failed and request.on_error is 'stop': {m.error}")
