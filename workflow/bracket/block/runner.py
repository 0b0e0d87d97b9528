"""Run one block: a fresh server for one arm, warmups, then timed requests for every workload (a load workload:
every level of it, bracket.measure.load).

Every request becomes one raw record, appended and fsynced as it arrives. The block writes to
`block-K.jsonl.partial` and renames it to `block-K.jsonl` only when the block completes. A block
that fails (server died, Ctrl-C, SIGTERM, a request error under on_error: stop) keeps what it
measured: the next invocation moves the attempt's records, provenance and server log to
`failed/block-K.attempt-N.*` beside the raw files and reruns the block from scratch in a fresh
server, while finished blocks are never redone (bracket.block.attempt).

`run_block` reads as its steps: the block's servers, a plan for the first, an earlier attempt set aside, the
prompts checked, the provenance begun, each server served and measured, the attempt finished. Every record is
made by the block's frozen context (bracket.measure.context.BlockContext), one per server.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.markup import escape

from bracket import records, secrets, version
from bracket.arena import run as arena
from bracket.block.attempt import (
    archive_attempt,
    count_lines,
    disk_problem,
    link_log,
    log_link,
    signals_deferred,
    write_failed_meta,
    write_meta,
)
from bracket.controls import neutrality
from bracket.engines import launch, provenance
from bracket.engines.base import Engine
from bracket.experiment import arena_workload, config, load_workload, prompts
from bracket.experiment.design import Block
from bracket.experiment.prompts import unique_prefix
from bracket.measure import eta, load, session
from bracket.measure.context import BlockContext, block_name
from bracket.measure.session import BlockFailed
from bracket.measure.telemetry import Telemetry, summarize
from bracket.typed.experiment import Arm, Experiment
from bracket.wire.server import Server, ServerError, log_tail

__all__ = ["BlockFailed", "archive_attempt", "block_name", "log_link", "run_block", "unique_prefix"]

console = Console(stderr=True, highlight=False)


@dataclass(frozen=True)
class BlockJob:
    """One invocation of a block: the block on its first server (`ctx`), the experiment as the file states it
    (`exp`), where its files go, and how its servers start (`argv` replaces the adapter's command)."""

    ctx: BlockContext
    exp: Experiment
    raw_path: Path
    meta_path: Path
    log_path: Path
    model: str
    python: str
    root: Path
    lock_dir: Path
    argv: list[str] | None

    @property
    def partial(self) -> Path:
        return self.raw_path.with_name(self.raw_path.name + ".partial")

    def holder(self) -> str:
        """Who holds the host's lock while this block measures (what a waiting block prints)."""
        return f"{self.ctx.experiment} {self.ctx.name} in {Path.cwd()}"

    def plan(self, ctx: BlockContext, suffix: str = "") -> session.Plan:
        """The launch plan of one of the block's servers: the adapter's command, natively or inside `docker run`
        (none under attach), the seam to engines/launch.py."""
        block = ctx.block
        name = launch.container_name(ctx.experiment, block.arm, block.position) + suffix
        return session.plan(ctx.exp, block.arm, model=self.model, python=self.python, argv=self.argv, name=name)


@dataclass
class Attempt:
    """What an attempt of the block changes as it runs: its provenance (`meta`) and its records' writer, opened
    once the host's lock is held, just before the first server starts."""

    meta: dict
    writer: records.RecordWriter | None = None


@dataclass(frozen=True)
class Served:
    """The block on one running server: its context, the adapter, the HTTP client and URL, the server process,
    the name it serves the model under, and the writer every record goes to."""

    ctx: BlockContext
    adapter: Engine
    http: httpx.Client
    base: str
    server: Server
    model_name: str
    writer: records.RecordWriter

    def append(self, rec: dict) -> None:
        with signals_deferred():
            self.writer.append(rec)


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
    groups = _servers(exp, block.arm)
    server_id = f"{experiment}-p{block.position}-{int(time.time())}"
    job = BlockJob(
        ctx=BlockContext(groups[0][0], experiment, block, n_blocks, server_id),
        exp=exp,
        raw_path=Path(raw_path),
        meta_path=Path(meta_path),
        log_path=Path(log_path),
        model=model,
        python=python,
        root=Path(root),
        lock_dir=Path(lock_dir),
        argv=argv,
    )
    p = job.plan(job.ctx)
    _set_aside_earlier_attempt(job)
    workloads = _prompts(job)
    attempt = Attempt(_first_meta(job, p))
    try:
        _serve_first(job, p, attempt, {n: workloads[n] for n in groups[0][1]}, workloads)
        for i, (exp_i, names) in enumerate(groups[1:], start=1):
            ctx = job.ctx.on_server(f"{server_id}-s{i}", exp_i)
            _serve_more(job, ctx, attempt, {n: workloads[n] for n in names})
        attempt.meta["status"] = "complete"
    except BaseException as exc:
        err = _failure(job, attempt.meta, exc)
        if err is exc:
            raise
        raise err from None
    finally:
        _finish(job, attempt)
    job.partial.rename(job.raw_path)
    return job.raw_path


def _servers(exp: Experiment, arm_name: str) -> list[tuple[Experiment, list[str]]]:
    """The block's servers: one, or a second for its prefix-caching arena cells
    (bracket.experiment.arena_workload.servers), each as the experiment that launches it and its workloads."""
    return [(_with_arm(exp, arm_name, a), names) for a, names in arena_workload.servers(exp, arm_name)]


def _with_arm(exp: Experiment, arm_name: str, arm: Arm) -> Experiment:
    """The experiment with arm `arm_name` as given (the same experiment where it is already that arm): a new
    experiment, validated as the file's was, so the arm's keys left out get their defaults."""
    if exp.arms[arm_name] is arm:
        return exp
    data = config.as_data(exp)
    data["arms"][arm_name] = config.as_data(arm)
    return config.validate(data, source=f"arms.{arm_name} as the block launches it")


def _set_aside_earlier_attempt(job: BlockJob) -> None:
    kept = archive_attempt(job.raw_path, job.meta_path, job.log_path)
    if kept:
        console.print(
            f"[yellow]{job.ctx.name}: an earlier attempt did not finish; its records are "
            f"kept in {kept} and the block starts again in a fresh server[/]",
            soft_wrap=True,
        )


def _prompts(job: BlockJob) -> dict[str, list[dict]]:
    """Every workload's prompts, checked before any server starts: they parse and fit the arm's context."""
    eng = job.exp.engine
    try:
        notes = prompts.check(job.exp, job.root, model_dir=job.model if eng.launch == "native" else None)
        if eng.launch != "attach":  # an attached server's tokens were counted by the preflight (its /tokenize)
            for note in notes:
                console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)
        return {name: prompts.load(job.root / wl.prompts) for name, wl in job.exp.workloads.items()}
    except prompts.PromptError as exc:
        raise BlockFailed(f"{job.ctx.name} was not started: {exc}") from None


def _first_meta(job: BlockJob, p: session.Plan) -> dict:
    """The block's provenance as it starts (raw/block-K.meta.json; the server's own is added once it answers)."""
    ctx, eng = job.ctx, job.exp.engine
    return {
        "experiment": ctx.experiment,
        "block": ctx.block.position,
        "arm": ctx.block.arm,
        "round": ctx.block.round,
        "seed": ctx.block.seed,
        "server_id": ctx.server_id,
        "engine": eng.kind,
        "launch": eng.launch,
        "argv": p.argv,
        "env": {k: ("***" if k in p.creds.env else v) for k, v in p.env.items()},
        "pinning": p.pinning.record() if p.pinning else None,
        "engine_layout": p.worker.record() if p.worker else None,
        "priority": p.priority,
        "server_state": p.adapter.server_state(p.argv, p.env, ctx.arm),  # caches kept between requests, as launched
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "client_python": sys.version.split()[0],
        "bracket": version.info(),  # which bracket measured: version, commit, dirty (bracket.version)
        # the CPUs this block (and the server it starts) may run on: a scheduler's job step can confine it
        "cpus_allowed": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpus_online": os.cpu_count(),  # the host's CPUs: what a block holding the whole host asked (stats.cpus)
        "log": str(job.log_path),
        "status": "started",
        "neutrality": neutrality.when_off(job.exp, stand_in=job.argv is not None) or "on",
    }


def _serve_first(job: BlockJob, p: session.Plan, attempt: Attempt, own: dict, workloads: dict) -> None:
    """The block's first server: after the cooldown, under the host's lock; its requests (`own`: the workloads it
    serves), then the neutrality control's pairs on it (`workloads`: every workload's prompts), with telemetry."""
    ctx, meta, design = job.ctx, attempt.meta, job.exp.design

    def cooldown():
        if ctx.block.position > 0 and design.cooldown_s > 0:
            console.print(f"cooldown {design.cooldown_s:.0f} s before block {ctx.block.position + 1}/{ctx.n_blocks}")
            time.sleep(design.cooldown_s)

    def before_start():
        meta["host_lock"] = p.host_lock  # whom this block waited for, and how long, before it measured
        write_meta(meta, job.meta_path)  # a client killed outright still leaves the attempt's provenance
        link_log(job.log_path, job.raw_path)
        attempt.writer = records.RecordWriter(job.partial)
        _say_start(job)

    def on_start(server):
        meta["pid"] = server.proc.pid
        write_meta(meta, job.meta_path)

    with session.serve(
        job.exp,
        p,
        log_path=job.log_path,
        lock_dir=job.lock_dir,
        cooldown=cooldown,
        before_start=before_start,
        on_start=on_start,
        holder=job.holder(),
        say=lambda text: console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True),
    ) as s:
        meta["ready_s"] = round(s.ready_s, 2)
        meta["engine"] = p.adapter.kind  # under attach, the engine identified (engine.kind auto)
        meta["started_at"] = s.server.started_at
        served = Served(ctx, p.adapter, s.http, s.base, s.server, _served_name(ctx, p, s), attempt.writer)
        with Telemetry(interval_s=0.5) as tel:
            meta.update(
                provenance.collect(job.exp, p.adapter, s.http, s.base, served.model_name, job.model, s.server.notes)
            )
            write_meta(meta, job.meta_path)  # written before the first request
            _keep_levels(meta, _measure(served, own))
            if meta["neutrality"] == "on":
                _neutrality(served, workloads)
        # GPU clocks, temperature and power beside the block, so drift can be explained (null on CPU).
        meta["telemetry"] = summarize(tel.samples)
        meta["telemetry_samples"] = tel.samples


def _keep_levels(meta: dict, levels: list[dict]) -> None:
    """A load workload's level summaries in the block's meta (`load_levels`), as the driver returned them."""
    if levels:
        meta.setdefault("load_levels", []).extend(levels)


def _served_name(ctx: BlockContext, p: session.Plan, s) -> str:
    return session.served_name(p.adapter, ctx.exp, s.http, s.base)


def _say_start(job: BlockJob) -> None:
    ctx, design = job.ctx, job.exp.design
    console.print(
        f"[bold]block {ctx.block.position + 1}/{ctx.n_blocks}[/] arm [cyan]{ctx.block.arm}[/] round "
        f"{ctx.block.round}: starting {job.exp.engine.kind}"
    )
    left = eta.left_in_experiment(job.meta_path.parent, ctx.n_blocks - ctx.block.position, design.cooldown_s)
    if left:
        console.print(
            f"  about {eta.duration(left[0])} left in the experiment, this block included "
            f"(at the mean of {left[1]} finished block(s))",
            soft_wrap=True,
        )


def _serve_more(job: BlockJob, ctx: BlockContext, attempt: Attempt, own: dict) -> None:
    """A further server of the block (its prefix-caching arena cells, bracket.experiment.arena_workload.servers):
    launched after the first has stopped, its log beside the block's (block-K.sN.log), its command and state in
    meta["servers"]."""
    suffix = ctx.server_id.rsplit("-", 1)[-1]
    p = job.plan(ctx, suffix=f"-{ctx.server_id[-2:]}")
    log = job.log_path.with_name(job.log_path.stem + f".{suffix}.log")
    entry = {
        "server_id": ctx.server_id,
        "workloads": list(own),
        "argv": p.argv,
        "log": str(log),
        "server_state": p.adapter.server_state(p.argv, p.env, ctx.arm),
    }
    attempt.meta.setdefault("servers", []).append(entry)
    console.print(
        f"  block {ctx.block.position + 1}/{ctx.n_blocks}: a server of its own for {len(own)} prefix-caching "
        f"arena cell(s), its prefix cache on"
    )
    with session.serve(
        ctx.exp,
        p,
        log_path=log,
        lock_dir=job.lock_dir,
        holder=job.holder(),
        say=lambda text: console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True),
    ) as s:
        entry["ready_s"] = round(s.ready_s, 2)
        entry["pid"] = s.server.proc.pid
        write_meta(attempt.meta, job.meta_path)
        served = Served(ctx, p.adapter, s.http, s.base, s.server, _served_name(ctx, p, s), attempt.writer)
        _keep_levels(attempt.meta, _measure(served, own))


def _failure(job: BlockJob, meta: dict, exc: BaseException) -> BaseException:
    """The error the block stops with, its message redacted and recorded in the meta: a program that could not be
    run or a write that failed in one line naming it, anything else as raised."""
    meta["status"] = "failed"
    if isinstance(exc, ServerError):  # its program could not be run (no execute bit, not found): said so
        err: BaseException = BlockFailed(f"{job.ctx.name} was not started: {exc}")
    elif isinstance(exc, OSError):  # a write that failed: one line naming the file, not a chain of tracebacks
        err = BlockFailed(disk_problem(exc, job.ctx.block, job.ctx.n_blocks, job.partial))
    else:
        err = exc
    meta["error"] = secrets.redact(f"{type(err).__name__}: {err}")
    if isinstance(err, BlockFailed):
        err.args = (secrets.redact(str(err)),)
    return err


def _finish(job: BlockJob, attempt: Attempt) -> None:
    """Close the attempt's records and write its provenance: a complete block's under its final name, a failed
    one's set aside at once, log included (Snakemake clears a job's log before rerunning it)."""
    if attempt.writer is None:  # no server was (about to be) started: nothing of the attempt to record
        return
    meta = attempt.meta
    try:
        attempt.writer.close()
    except OSError:  # the buffered tail of a record the disk refused; whole records are on disk
        pass
    meta["ended_at"] = time.time()
    meta["log_tail"] = secrets.redact(log_tail(job.log_path, 5))
    if meta["status"] == "complete":
        write_meta(meta, job.meta_path)
        job.meta_path.with_name(job.meta_path.name + ".partial").unlink(missing_ok=True)
        log_link(job.raw_path).unlink(missing_ok=True)
        return
    write_failed_meta(meta, job.meta_path)
    name, partial = job.ctx.name, job.partial
    try:
        kept = archive_attempt(job.raw_path, job.meta_path, job.log_path, copy_log=True)
    except OSError as exc:  # a full disk: the next attempt sets it aside (it moves, never copies)
        console.print(
            f"[red]{name} failed; its records, provenance and server log stay beside {escape(str(partial))} "
            f"({escape(exc.strerror or str(exc))}) and are set aside by the next attempt.[/]",
            soft_wrap=True,
        )
        return
    n = count_lines(kept) if kept.exists() else 0
    console.print(
        f"[red]{name} failed; the {n} records it measured, its provenance and server log are kept in "
        f"{escape(str(kept.with_suffix('.*')))}. Run the same target again to rerun this block in a fresh "
        f"server.[/]",
        soft_wrap=True,
    )


def _neutrality(served: Served, workloads: dict[str, list[dict]]) -> None:
    """The neutrality control's pairs on this block's server, after the arm's own requests
    (bracket.controls.neutrality)."""
    ctx = served.ctx

    def tag(workload, pair):
        return unique_prefix(ctx.exp.design.seed, f"{neutrality.CONTROL}:{workload}", pair, ctx.per_block)

    for rec in neutrality.run(ctx, served.adapter, served.http, served.base, served.model_name, workloads, tag):
        served.append(rec)
        per_tok = (
            f"server {1e3 * rec['server_decode_s'] / rec['server_tokens']:.3f} ms/token"
            if rec["server_decode_s"]
            else "no server timing"
        )
        err = f"  [red]{escape(secrets.redact(rec['error']))}[/]" if rec["error"] else ""
        console.print(
            f"  block {ctx.block.position + 1}/{ctx.n_blocks} neutrality pair {rec['pair'] + 1} {rec['body']:<7} "
            f"{per_tok}{err}",
            soft_wrap=True,
        )


def _measure(served: Served, workloads: dict[str, list[dict]]) -> list[dict]:
    """The arm's requests on one server: its single-stream and arena workloads run after run (_runs), then every
    level of each load workload (_load). Returns the load levels' summaries, for the block's meta `load_levels`."""
    is_load = {n: load_workload.is_load(served.ctx.exp.workloads[n]) for n in workloads}
    _runs(served, {n: texts for n, texts in workloads.items() if not is_load[n]})
    return [level for n, texts in workloads.items() if is_load[n] for level in _load(served, n, texts)]


def _alive(served: Served) -> None:
    server = served.server
    if not server.alive():
        raise BlockFailed(
            f"server exited with code {server.proc.poll()} in the middle of {served.ctx.name}; records so far "
            f"are kept. Last lines of {server.log_path}:\n{log_tail(server.log_path)}"
        )


def _runs(served: Served, workloads: dict[str, list[dict]]) -> None:
    """The arm's warmups then timed runs on one server, every workload in turn each run; one record per request
    (an arena cell's: one per user). Stops when the server has died, or at a failed request under
    request.on_error: stop."""
    ctx, design = served.ctx, served.ctx.exp.design
    total = design.warmup_runs + design.runs_per_block
    t0, done, requests = time.monotonic(), 0, total * len(workloads)
    for run in range(total):
        warm = run < design.warmup_runs
        for wl_name, texts in workloads.items():
            _alive(served)
            if arena_workload.is_arena(ctx.exp.workloads[wl_name]):  # concurrent users at a context depth
                for rec in arena.run_cell(ctx, served.adapter, wl_name, served.http, served.base, run, warm):
                    served.append(rec)
                continue
            m, rec = _request(served, wl_name, texts[run % len(texts)], run, warm)
            done += 1
            _say_request(ctx, wl_name, run, warm, rec, eta.left_in_block(done, requests, time.monotonic() - t0))
            if m.error and ctx.exp.request.on_error == "stop":
                raise BlockFailed(f"request failed and request.on_error is 'stop': {m.error}")


def _load(served: Served, name: str, texts: list[dict]) -> list[dict]:
    """Every level of the load workload `name` on this server, in the order the block's round rotates them
    (bracket.measure.load.run_levels): its records through the block's writer, its levels' summaries returned."""
    _alive(served)
    ctx = served.ctx
    target = load.target_for(served.adapter, ctx, served.http, served.base, served.model_name)

    def say(line: str) -> None:
        console.print(f"  {ctx.name} {ctx.block.arm:<12} {name:<6} {escape(line)}", soft_wrap=True)

    return load.run_levels(target, load_workload.spec(ctx.exp, name), ctx, texts, served.append, say=say)


def _request(served: Served, wl_name: str, p: dict, run: int, warm: bool):
    """One timed request of a workload on the served arm: its prompt `p` behind the run's unique prefix, measured
    by the adapter, recorded. Returns the measurement and its record."""
    ctx, req = served.ctx, served.ctx.exp.request
    prefix = unique_prefix(ctx.exp.design.seed, wl_name, run, ctx.per_block) if req.unique_prefix else ""
    measured = served.adapter.measure(
        served.http, served.base, served.model_name, prefix + p["prompt"], req, req.seed, ctx.arm
    )
    m = measured.measurement
    rec = ctx.record(
        run=run,
        warmup=warm,
        workload=wl_name,
        prompt_id=p["id"],
        max_tokens=req.max_tokens,
        cache_check=records.cache_check(measured.cache_check, req),
        **m.fields(),
        **measured.spec.fields(),
    )
    served.append(rec)
    return m, rec


def _say_request(ctx: BlockContext, wl_name: str, run: int, warm: bool, rec: dict, left: float | None) -> None:
    design = ctx.exp.design
    rate = f"{rec['decode_tok_s']:8.1f} tok/s" if rec["decode_tok_s"] else "   (no rate)"
    al = f"  AL {rec['acceptance_length']:.2f}" if rec["acceptance_length"] else ""
    tag = "warmup" if warm else f"run {run - design.warmup_runs + 1}/{design.runs_per_block}"
    err = f"  [red]{escape(secrets.redact(rec['error']))}[/]" if rec["error"] else ""
    when = f"  ({eta.duration(left)} left in block)" if left else ""
    console.print(
        f"  block {ctx.block.position + 1}/{ctx.n_blocks} {ctx.block.arm:<12} {wl_name:<6} {tag:<9} {rate}{al}{err}"
        f"{when}",
        soft_wrap=True,
    )
