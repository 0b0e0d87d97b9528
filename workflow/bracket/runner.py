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
import fcntl
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.markup import escape

from bracket import arena, engines, eta, prompts, records, secrets
from bracket.config import draft_budget
from bracket.design import Block
from bracket.engines import launch, provenance
from bracket.server import ServerError, log_tail, port_owner
from bracket.telemetry import Telemetry, summarize

console = Console(stderr=True, highlight=False)


class BlockFailed(RuntimeError):
    pass


def unique_prefix(seed: int, workload: str, run: int, block: int | None = None) -> str:
    """A short tag that makes every prompt unique within a block, so the prefix cache cannot serve it.

    It depends on the experiment's design seed, the workload and the run index, not on the block:
    every arm sees the same prompt at the same run index, so greedy outputs can be compared
    across arms (bracket.agreement), and each block runs in a fresh server, whose cache is empty.
    An attached server is not restarted between blocks, so there the block is part of the tag
    (`block`): a later block must not find an earlier one's prompts in the cache.
    """
    key = f"{seed}:{workload}:{run}" + (f":{block}" if block is not None else "")
    nonce = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"# {nonce}\n"


def ensure_port_free(eng: dict) -> None:
    """Before a launch: the engine's port must be free (an attached server is expected to hold it)."""
    owner = port_owner(eng["host"], eng["port"]) if eng["launch"] != "attach" else None
    if owner:
        raise BlockFailed(f"port {eng['port']} on {eng['host']} is already in use by {owner}; stop it or set "
                          f"engine.port to a free port.")


@contextlib.contextmanager
def port_lock(lock_dir: Path, port: int):
    """One server per port at a time, across jobs and invocations on this host."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"port-{port}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _terminate_on_signal():
    """Turn SIGTERM into SystemExit so `finally` blocks (server teardown) run."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _secret_env(cfg: dict) -> dict[str, str]:
    out = {}
    for name in cfg["engine"]["secret_env"]:
        if name not in os.environ:
            raise BlockFailed(f"engine.secret_env names {name!r}, but it is not set in this environment; "
                              f"export it before running.")
        out[name] = os.environ[name]
    secrets.register(*out.values())
    return out


def _api_key(cfg: dict) -> str | None:
    """The API key named by engine.api_key_env, read from the caller's environment (never from a file)."""
    name = cfg["engine"].get("api_key_env")
    if not name:
        return None
    if not os.environ.get(name):
        raise BlockFailed(f"engine.api_key_env names {name!r}, but it is not set (or empty) in this "
                          f"environment; export it before running.")
    secrets.register(os.environ[name])
    return os.environ[name]


def archive_attempt(raw_path: Path, meta_path: Path, log_path: Path, copy_log: bool = False) -> Path | None:
    """Move an unfinished attempt of a block to `failed/` beside the raw files; return its records' path.

    Records, provenance and server log of attempt N become failed/block-K.attempt-N.{jsonl,meta.json,log},
    out of the way of globs over raw/ but never deleted. A failing block sets itself aside (copying
    the log, which its job still names); a block whose process was killed outright is set aside by the
    next attempt.
    """
    partial = raw_path.with_name(raw_path.name + ".partial")
    meta_partial = meta_path.with_name(meta_path.name + ".partial")
    if not partial.exists() and not meta_partial.exists():
        return None
    folder = raw_path.parent / "failed"
    folder.mkdir(parents=True, exist_ok=True)
    stem = raw_path.name.removesuffix(".jsonl")
    n = 1
    while any(folder.glob(f"{stem}.attempt-{n}.*")):
        n += 1
    dest = folder / f"{stem}.attempt-{n}"
    for src, suffix in ((partial, ".jsonl"), (meta_partial, ".meta.json"), (log_path, ".log")):
        if src.exists():
            target = dest.with_name(dest.name + suffix)
            if src == log_path and copy_log:
                shutil.copy2(src, target)
            else:
                src.replace(target)
            if suffix == ".log":  # an attempt killed outright wrote its log unredacted
                secrets.redact_file(target)
    return dest.with_name(dest.name + ".jsonl")


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


def redact(text: str, known: dict[str, str] | None = None) -> str:
    """`text` with every secret the run knows replaced (bracket.secrets); `known` are registered first."""
    if known:
        secrets.register(*known.values())
    return secrets.redact(text)


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


def run_block(cfg: dict, experiment: str, block: Block, n_blocks: int, *, raw_path: str | Path,
              meta_path: str | Path, log_path: str | Path, model: str, python: str, root: str | Path = ".",
              lock_dir: str | Path = "results/.locks", argv: list[str] | None = None) -> Path:
    """Run `block` and write its raw records to `raw_path` and its provenance to `meta_path`.

    `argv` replaces the engine adapter's server command (a server started some other way, or a
    stand-in server in tests); everything else (readiness, requests, teardown) is unchanged.
    """
    raw_path, meta_path, log_path, root = Path(raw_path), Path(meta_path), Path(log_path), Path(root)
    partial = raw_path.with_name(raw_path.name + ".partial")
    secrets_ = _secret_env(cfg)
    api_key = _api_key(cfg)
    kept = archive_attempt(raw_path, meta_path, log_path)
    if kept:
        console.print(f"[yellow]{block_name(block, n_blocks)}: an earlier attempt did not finish; its records are "
                      f"kept in {kept} and the block starts again in a fresh server[/]", soft_wrap=True)
    eng = cfg["engine"]
    adapter = engines.get(eng["kind"])
    arm = cfg["arms"][block.arm]
    try:  # before any server starts: the prompts parse and fit the arm's context
        prompts.check(cfg, root, model_dir=model if eng["launch"] == "native" else None)
        workloads = {name: prompts.load(root / wl["prompts"]) for name, wl in cfg["workloads"].items()}
    except prompts.PromptError as exc:
        raise BlockFailed(f"{block_name(block, n_blocks)} was not started: {exc}") from None
    headers = {}
    if api_key:
        if not adapter.api_key_env:
            raise BlockFailed(f"engine.kind {eng['kind']!r} takes no API key by environment; "
                              f"leave engine.api_key_env empty.")
        # Given to the server by environment (never on argv, which is recorded) and sent on every request.
        secrets_[adapter.api_key_env] = api_key
        headers["Authorization"] = f"Bearer {api_key}"
    # The adapter's command, natively or inside `docker run` (none under attach): the seam to engines/launch.py.
    argv = list(argv) if argv is not None else launch.server_argv(
        cfg, adapter, arm, model, python, name=launch.container_name(experiment, block.arm, block.position),
        env_names=list(secrets_))
    env = launch.launch_env(cfg, adapter, arm)
    env.update(secrets_)
    base = launch.base_url(cfg)
    server_id = f"{experiment}-p{block.position}-{int(time.time())}"
    meta = {
        "experiment": experiment, "block": block.position, "arm": block.arm, "round": block.round,
        "seed": block.seed, "server_id": server_id, "engine": eng["kind"], "launch": eng["launch"],
        "argv": argv, "env": {k: ("***" if k in secrets_ else v) for k, v in env.items()},
        "host": socket.gethostname(), "platform": platform.platform(), "client_python": sys.version.split()[0],
        "log": str(log_path), "status": "started",
    }
    design = cfg["design"]
    req = cfg["request"]
    with port_lock(Path(lock_dir), eng["port"]), _terminate_on_signal():
        if block.position > 0 and design["cooldown_s"] > 0:
            console.print(f"cooldown {design['cooldown_s']:.0f} s before block {block.position + 1}/{n_blocks}")
            time.sleep(design["cooldown_s"])
        ensure_port_free(eng)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        _write_meta(meta, meta_path)  # a client killed outright still leaves the attempt's provenance
        server = launch.make_server(cfg, adapter, argv=argv, env=env, log_path=log_path, base_url=base,
                                    secret_names=list(secrets_))
        writer = records.RecordWriter(partial)
        try:
            console.print(f"[bold]block {block.position + 1}/{n_blocks}[/] arm [cyan]{block.arm}[/] round "
                          f"{block.round}: starting {eng['kind']}")
            left = eta.left_in_experiment(meta_path.parent, n_blocks - block.position, design["cooldown_s"])
            if left:
                console.print(f"  about {eta.duration(left[0])} left in the experiment, this block included "
                              f"(at the mean of {left[1]} finished block(s))", soft_wrap=True)
            server.start()
            meta["pid"] = server.proc.pid
            _write_meta(meta, meta_path)
            try:
                ready = server.wait_ready(eng["startup_timeout_s"])
            except ServerError as exc:
                raise BlockFailed(secrets.redact(str(exc))) from None
            meta["ready_s"] = round(ready, 2)
            meta["started_at"] = server.started_at
            with httpx.Client(timeout=10.0, headers=headers) as http, Telemetry(interval_s=0.5) as tel:
                meta.update(provenance.collect(cfg, adapter, http, base, adapter.request_model(cfg, http, base),
                                               model, server.notes))
                _write_meta(meta, meta_path)  # written before the first request
                _measure(cfg, experiment, block, n_blocks, arm, adapter, workloads, http, base, server, writer,
                         server_id, req, design)
            # GPU clocks, temperature and power beside the block, so drift can be explained (null on CPU).
            meta["telemetry"] = summarize(tel.samples)
            meta["telemetry_samples"] = tel.samples
            meta["status"] = "complete"
        except BaseException as exc:
            meta["status"] = "failed"
            meta["error"] = secrets.redact(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, BlockFailed):
                exc.args = (secrets.redact(str(exc)),)
            raise
        finally:
            writer.close()
            server.stop()
            secrets.redact_file(log_path)
            meta["ended_at"] = time.time()
            meta["log_tail"] = secrets.redact(log_tail(log_path, 5))
            _write_meta(meta, meta_path)
            if meta["status"] == "complete":
                meta_path.with_name(meta_path.name + ".partial").unlink(missing_ok=True)
            else:
                # Set aside now, log included: Snakemake clears a job's log before rerunning it.
                kept = archive_attempt(raw_path, meta_path, log_path, copy_log=True)
                n = _count_lines(kept) if kept.exists() else 0
                console.print(f"[red]{block_name(block, n_blocks)} failed; the {n} records it measured, "
                              f"its provenance and server log are kept in {escape(str(kept.with_suffix('.*')))}. "
                              f"Run the same target again to rerun this block in a fresh server.[/]", soft_wrap=True)
    partial.rename(raw_path)
    return raw_path


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _measure(cfg, experiment, block, n_blocks, arm, adapter, workloads, http, base, server, writer, server_id,
             req, design):
    model_name = adapter.request_model(cfg, http, base)
    total = design["warmup_runs"] + design["runs_per_block"]
    t0, done, requests = time.monotonic(), 0, total * len(workloads)
    for run in range(total):
        warm = run < design["warmup_runs"]
        for wl_name, texts in workloads.items():
            if not server.alive():
                raise BlockFailed(f"server exited with code {server.proc.poll()} in the middle of "
                                  f"{block_name(block, n_blocks)}; records so far are kept. Last lines of "
                                  f"{server.log_path}:\n{log_tail(server.log_path)}")
            if arena.is_arena(cfg["workloads"][wl_name]):  # concurrent users at a context depth
                for rec in arena.run_cell(cfg, experiment, block, arm, adapter, wl_name, texts, http, base,
                                          server_id, run, warm, draft_budget(arm)):
                    with _signals_deferred():
                        writer.append(rec)
                continue
            p = texts[run % len(texts)]
            per_block = block.position if cfg["engine"]["launch"] == "attach" else None
            text = (unique_prefix(design["seed"], wl_name, run, per_block) if req["unique_prefix"] else "") + p["prompt"]
            measured = adapter.measure(http, base, model_name, text, req, req["seed"], arm)
            m = measured.measurement
            rec = records.new_record(
                experiment=experiment, arm=block.arm, block=block.position, round=block.round,
                position=block.position, run=run, warmup=warm, workload=wl_name, prompt_id=p["id"],
                server_id=server_id, draft_budget=draft_budget(arm), max_tokens=req["max_tokens"],
                host=block.host or None, **m.fields(), **measured.spec.fields())
            with _signals_deferred():
                writer.append(rec)
            rate = f"{m.decode_tok_s:8.1f} tok/s" if m.decode_tok_s else "   (no rate)"
            al = f"  AL {rec['acceptance_length']:.2f}" if rec["acceptance_length"] else ""
            tag = "warmup" if warm else f"run {run - design['warmup_runs'] + 1}/{design['runs_per_block']}"
            err = f"  [red]{escape(secrets.redact(m.error))}[/]" if m.error else ""
            done += 1
            left = eta.left_in_block(done, requests, time.monotonic() - t0)
            when = f"  ({eta.duration(left)} left in block)" if left else ""
            console.print(f"  block {block.position + 1}/{n_blocks} {block.arm:<12} {wl_name:<6} {tag:<9} {rate}{al}{err}"
                          f"{when}", soft_wrap=True)
            if m.error and req["on_error"] == "stop":
                raise BlockFailed(f"request failed and request.on_error is 'stop': {m.error}")
