"""The load driver: one level of many users against a server, and every level of a block in its rotated order.

Closed loop (`users` levels): N threads, one per user, each with a keep-alive connection of its own; a user sends
its next request when its last ends, plus think_s, and stops sending once the steady window closes. Its request's
scheduled time is its previous end + think_s (its first: the level's start), so the send lag (sent - scheduled) is
what the client itself added between two requests. Open loop (`rate` levels): the send times are drawn up front
from a seeded schedule (bracket.measure.load_plan.arrival_schedule) and kept in each record beside the actual send
time; one dispatcher thread wakes at each due time and hands the request to a worker thread (a pool that grows to
as many requests as are in flight), so a server slower than the rate makes requests pile up in flight, not late.

Each request is one streamed completion timed by the package's client (bracket.wire.client.timed_stream), the
body being the engine adapter's own (Engine.request_body) so the arm's sampling, ignore_eos and cache settings
are those of a single stream; every content event is timed by the network read that brought it. Times are
seconds since the level's start on time.perf_counter (CLOCK_MONOTONIC). Records (the load records' contract: one per
request, kind load_request, with its level, user, scheduled and sent times, first token, end, every event's time and
tokens, and load_phase; one per level, kind load_level; the columns bracket.stats.load.frame reads) go to a writer
thread through a queue, so the file's fsync never sits between a user's two requests.

The level's summary says whether the client kept up: the send lag's p50, p99 and max, the client's CPU time
(time.process_time, every thread of this process) and its CPU per token; `valid` is false with a code when the
lag's p99 passed spec.lag_tolerance_s or the CPU was busy past spec.cpu_limit of one core
(bracket.measure.load_plan.verdict).

Entry point for the block runner: `run_workload(context, adapter, http, base, model_name, workload, prompts, write)`
for a workload of kind load (bracket.experiment.load_workload.is_load), which is `run_levels(target, spec, context,
prompts, write)`: `target` a `Target` built by
`target_for(adapter, context, http, base, model_name)`, `spec` bracket.experiment.load_workload.spec(exp, name),
`context` the block on its server (bracket.measure.context.BlockContext), `prompts` the workload's prompts, `write`
what appends one record (the block's RecordWriter.append; called from one thread at a time).
"""

from __future__ import annotations

import queue
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import httpx
import numpy as np

from bracket import records
from bracket.experiment import load_workload
from bracket.experiment.design import level_order
from bracket.experiment.load_workload import LoadSpec
from bracket.experiment.prompts import unique_prefix
from bracket.measure import load_plan
from bracket.measure.context import BlockContext
from bracket.wire.client import _openai_counts, _openai_text, timed_stream
from bracket.wire.transport import timed_client

REQUEST_KIND = "load_request"
LEVEL_KIND = "load_level"
# The most event times one record keeps (a 1M-token stream would otherwise write megabytes per record).
TOKEN_TIMES_KEEP = 65536
# Threads an open loop may hold in flight at once: past it, a request waits for a worker and its lag shows it.
MAX_IN_FLIGHT = 1024
# Clients an open loop makes before its clock starts (more are made when more requests are in flight at once).
OPEN_CLIENTS = 8
# A closed-loop user whose request failed waits this long before its next (a refused connection fails at once).
ERROR_PAUSE_S = 0.05


@dataclass(frozen=True)
class Target:
    """Where and what to send: the completions URL, the body of a prompt at a length, the request's limit."""

    url: str
    body: Callable[[str, int], dict]
    timeout_s: float
    headers: tuple[tuple[str, str], ...] = ()
    # True: every content event timed by the read that brought it (token_times_s, so ITL), one wake-up per event;
    # False: the reads coalesce as a single stream's do (bracket.wire.client.COALESCE_BYTES), several times less CPU
    # per token, first token and end still exact, token_times_s null (bench/results/harness_streams.md).
    every_event: bool = True


def target_for(adapter, context: BlockContext, http: httpx.Client, base: str, model_name: str) -> Target:
    """The block's Target: the adapter's own body for the block's arm (its sampling, ignore_eos, cache settings)
    with max_tokens set per request, posted to its completions path with the session's credentials."""
    req, arm = context.exp.request, context.arm

    def body(prompt: str, max_tokens: int) -> dict:
        return adapter.request_body(
            model_name, prompt, req.model_copy(update={"max_tokens": max_tokens}), req.seed, arm
        )

    headers = tuple((k, v) for k, v in http.headers.items() if k.lower() == "authorization")
    return Target(base + adapter.request_path, body, req.timeout_s, headers)


# ---- one request -----------------------------------------------------------------------------------------------


def send(http: httpx.Client, target: Target, prompt: str, max_tokens: int, timeout_s: float, origin: float) -> dict:
    """One streamed request; its times (seconds since `origin`, a perf_counter reading) and counts, as the
    contract names them, with the client's error where it failed."""
    events: list[tuple[float, int | None]] = []

    def timed(event: dict, now: float) -> None:
        if _openai_text(event):
            ch = (event.get("choices") or [{}])[0] or {}
            ids = ch.get("token_ids") if isinstance(ch, dict) else None
            events.append((now, len(ids) if isinstance(ids, list) else None))

    body = target.body(prompt, max_tokens)
    before = time.perf_counter()
    m, _ = timed_stream(
        http,
        target.url,
        body,
        max(timeout_s, 0.001),
        framing="sse",
        new_text=_openai_text,
        is_last=lambda e: False,
        counts=_openai_counts,
        on_timed_event=timed if target.every_event else None,
        missing_counts="no usage in the response (the server must honour stream_options.include_usage)",
    )
    # the client's own t0: the first event's read, less its TTFT (where no event was timed, just before the call)
    sent = events[0][0] - m.ttft_s if events and m.ttft_s is not None else before
    first = sent + m.ttft_s if m.ttft_s is not None else None
    end = sent + m.wall_s if m.wall_s is not None else None
    n = m.completion_tokens
    counts = [c for _, c in events]
    if not target.every_event:
        counts = None
    elif any(c is None for c in counts):  # no ids: one token per event where the events account for every token
        counts = [1] * len(events) if n is not None and len(events) == n else None
    tpot = (end - first) / (n - 1) if n is not None and n >= 2 and first is not None and end is not None else None
    fields = m.fields()
    fields["output_text"] = None  # the hash is kept; a load level's texts would fill the records
    return {
        **fields,
        "sent_s": sent - origin,
        "first_token_s": None if first is None else first - origin,
        "end_s": None if end is None else end - origin,
        "tpot_s": tpot,
        "token_times_s": [t - sent for t, _ in events[:TOKEN_TIMES_KEEP]] if target.every_event else None,
        "token_counts": counts[:TOKEN_TIMES_KEEP] if counts is not None else None,
    }


# ---- one level -------------------------------------------------------------------------------------------------


@dataclass
class _Level:
    """What the threads of one level share."""

    target: Target
    spec: LoadSpec
    context: BlockContext
    level: float
    position: int
    origin: float
    prompts: list[dict]
    out_tokens: np.ndarray
    prompt_words: np.ndarray | None
    rows: list[dict]
    lock: threading.Lock

    @property
    def steady_start(self) -> float:
        return self.spec.warmup_s

    @property
    def steady_end(self) -> float:
        return self.spec.warmup_s + self.spec.steady_s

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def one(self, http: httpx.Client, i: int, user: int | None, scheduled: float) -> dict:
        """Request i of the level, sent now; its row (the contract's keys)."""
        p = self.prompts[i % len(self.prompts)]
        words = None if self.prompt_words is None else int(self.prompt_words[i % len(self.prompt_words)])
        text = load_plan.sized_prompt(p["prompt"], words)
        exp = self.context.exp
        if exp.request.unique_prefix:  # the level in the tag: a level's prompts are not another's in the cache
            text = unique_prefix(exp.design.seed, f"{self.spec.name}@{self.level:g}", i, self.context.per_block) + text
        left = self.steady_end + self.spec.drain_s - self.now()  # every request ends by the drain's end
        r = send(
            http,
            self.target,
            text,
            int(self.out_tokens[i % len(self.out_tokens)]),
            min(self.target.timeout_s, left),
            self.origin,
        )
        r.update(prompt_id=p.get("id"), user=user, request_index=i, scheduled_s=scheduled)
        with self.lock:
            self.rows.append(r)
        return r


def _client(target: Target) -> httpx.Client:
    """A user's own keep-alive client, bracket's timed transport (its body read by bracket.wire.http_stream)."""
    return timed_client(headers=dict(target.headers), timeout=target.timeout_s)


def _sleep_until(lv: _Level, t: float) -> None:
    while (left := t - lv.now()) > 0:
        time.sleep(left)


def _closed(lv: _Level, users: int) -> None:
    """N users, each sending its next request when its last ends (+ think_s), until the window closes."""
    counter = iter(range(1 << 62))
    take = threading.Lock()

    def user(u: int, http: httpx.Client) -> None:
        due = 0.0
        with http:
            start.wait()
            while due < lv.steady_end:
                _sleep_until(lv, due)
                with take:
                    i = next(counter)
                r = lv.one(http, i, u, due)
                end = r["end_s"] if r["end_s"] is not None else lv.now()
                due = end + lv.spec.think_s + (ERROR_PAUSE_S if r["error"] else 0.0)

    # The users' clients and threads are made before the level's clock starts: making them is the client's cost,
    # not a lag behind the first requests' schedule.
    start = threading.Event()
    threads = [
        threading.Thread(target=user, args=(u, _client(lv.target)), name=f"load-user-{u}", daemon=True)
        for u in range(users)
    ]
    for t in threads:
        t.start()
    lv.origin = time.perf_counter()
    start.set()
    for t in threads:
        t.join()


def _open(lv: _Level, schedule: np.ndarray) -> None:
    """One request at each scheduled time, each on a worker thread with a connection of its own."""
    idle: queue.SimpleQueue = queue.SimpleQueue()  # clients between requests; one is made where none is idle
    clients = [_client(lv.target) for _ in range(OPEN_CLIENTS)]
    for c in clients:
        idle.put(c)

    def work(i: int, due: float) -> None:
        try:
            http = idle.get_nowait()
        except queue.Empty:
            http = _client(lv.target)
            with lv.lock:
                clients.append(http)
        try:
            lv.one(http, i, None, due)
        finally:
            idle.put(http)

    with ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="load-open") as pool:
        lv.origin = time.perf_counter()
        for i, due in enumerate(schedule):
            _sleep_until(lv, float(due))
            pool.submit(work, i, float(due))
    for c in clients:
        c.close()


def run_level(
    target: Target,
    spec: LoadSpec,
    context: BlockContext,
    level: float,
    position: int,
    prompts: list[dict],
    write: Callable[[dict], None],
) -> dict:
    """Run one level (users or requests per second, by spec.level_kind): warm-up, steady window, drain; write each
    request's record as it ends and return the level's summary (also written, as a record of kind load_level)."""
    if not prompts:
        raise ValueError(f"workloads.{spec.name} has no prompts to send")
    seed = load_plan.level_seed(spec.seed, spec.name, level, context.block.round)
    duration = spec.warmup_s + spec.steady_s
    schedule = None if spec.closed else load_plan.arrival_schedule(level, duration, spec.arrivals, seed)
    n_draw = len(schedule) if schedule is not None else 4096  # a closed loop cycles through its draws
    lv = _Level(
        target=target,
        spec=spec,
        context=context,
        level=level,
        position=position,
        origin=0.0,
        prompts=prompts,
        out_tokens=load_plan.draw_lengths(spec.output_tokens, max(n_draw, 1), seed, 1),
        prompt_words=load_plan.draw_lengths(spec.prompt_words, max(n_draw, 1), seed, 2),
        rows=[],
        lock=threading.Lock(),
    )
    writer = _Writer(write, lv)
    cpu0, use0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    try:
        _closed(lv, int(level)) if spec.closed else _open(lv, schedule)
    finally:
        wall, cpu = time.perf_counter() - lv.origin, time.process_time() - cpu0
        use = resource.getrusage(resource.RUSAGE_SELF)
        rows = writer.close()
    split = {"client_cpu_user_s": use.ru_utime - use0.ru_utime, "client_cpu_system_s": use.ru_stime - use0.ru_stime}
    return _summary(lv, rows, cpu, wall, write, split)


class _Writer:
    """Each request's record written as it ends, by a thread of its own (the writer's fsync stays off the users'
    path); its phase is known at once, since the window's bounds are fixed before the level starts."""

    def __init__(self, write: Callable[[dict], None], lv: _Level):
        self.write, self.lv = write, lv
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.done: list[dict] = []
        self.error: BaseException | None = None
        lv.rows = _Rows(self.q)
        self.thread = threading.Thread(target=self._run, name="load-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (row := self.q.get()) is not None:
            row["load_phase"] = load_plan.phase(row["sent_s"], row["end_s"], self.lv.steady_start, self.lv.steady_end)
            self.done.append(row)
            if self.error is None:
                try:
                    self.write(_request_record(self.lv, row))
                except BaseException as exc:  # noqa: BLE001 - raised again on the level's thread, in close
                    self.error = exc

    def close(self) -> list[dict]:
        self.q.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.done


class _Rows(list):
    """The level's rows as the threads append them: handed to the writer thread."""

    def __init__(self, q: queue.SimpleQueue):
        super().__init__()
        self.q = q

    def append(self, row: dict) -> None:
        self.q.put(row)


def _ids(lv: _Level) -> dict:
    b = lv.context.block
    return {
        "arm": b.arm,
        "block": b.position,
        "round": b.round,
        "workload": lv.spec.name,
        "level": lv.level,
        "level_kind": lv.spec.level_kind,
        "level_position": lv.position,
    }


def _request_record(lv: _Level, row: dict) -> dict:
    measured = {k: v for k, v in row.items() if k in records.FIELDS or k in records.EXTRA_FIELDS}
    for key in ("experiment", "arm", "block", "round", "position", "run", "warmup", "workload", "prompt_id"):
        measured.pop(key, None)
    rec = lv.context.record(
        run=row["request_index"],
        warmup=row["load_phase"] != "steady",
        workload=lv.spec.name,
        prompt_id=row["prompt_id"],
        max_tokens=int(lv.out_tokens[row["request_index"] % len(lv.out_tokens)]),
        **measured,
    )
    rec.update({"kind": REQUEST_KIND, **_ids(lv)})
    for key in ("user", "request_index", "scheduled_s", "sent_s", "first_token_s", "end_s", "tpot_s"):
        rec[key] = row[key]
    rec.update(token_times_s=row["token_times_s"], token_counts=row["token_counts"], load_phase=row["load_phase"])
    return rec


def _tokens_of(row: dict) -> int:
    """Tokens a request delivered: its events' counts, else its usage, else one per timed event."""
    if row["token_counts"] is not None:
        return sum(row["token_counts"])
    if row["completion_tokens"] is not None:
        return int(row["completion_tokens"])
    return len(row["token_times_s"] or ())


def _summary(lv: _Level, rows: list[dict], cpu: float, wall: float, write: Callable[[dict], None], split: dict) -> dict:
    # The lag of the sends that load the window (due once it opened): the warm-up's first sends pay for connecting.
    due = [r for r in rows if r["scheduled_s"] >= lv.steady_start]
    lag = load_plan.lag_stats([r["scheduled_s"] for r in due], [r["sent_s"] for r in due])
    tokens = sum(_tokens_of(r) for r in rows)
    steady = sum(r["load_phase"] == "steady" and not r["error"] for r in rows)
    s = lv.spec
    out = {
        "kind": LEVEL_KIND,
        "experiment": lv.context.experiment,
        "server_id": lv.context.server_id,
        **_ids(lv),
        "steady_start_s": lv.steady_start,
        "steady_end_s": lv.steady_end,
        **load_plan.excluded_spans(rows, lv.steady_start, lv.steady_end),
        **lag,
        "client_cpu_s": cpu,
        "client_cpu_per_token_us": cpu / tokens * 1e6 if tokens else None,
        "client_cpu_per_wall_s": cpu / wall if wall > 0 else None,
        **split,
        "every_event": lv.target.every_event,
        "tokens_received": tokens,
        "requests": len(rows),
        "steady_requests": steady,
        "errors": sum(bool(r["error"]) for r in rows),
        "wall_s": wall,
        "lag_tolerance_s": s.lag_tolerance_s,
        "cpu_limit": s.cpu_limit,
        "slo": {"ttft_s": s.slo_ttft_s, "tpot_s": s.slo_tpot_s},
        **load_plan.verdict(lag, cpu, wall, steady, s.lag_tolerance_s, s.cpu_limit),
    }
    write(out)
    return out


# ---- a block's levels ------------------------------------------------------------------------------------------


def run_levels(
    target: Target,
    spec: LoadSpec,
    context: BlockContext,
    prompts: list[dict],
    write: Callable[[dict], None],
    say: Callable[[str], None] | None = None,
) -> list[dict]:
    """Every level of a load workload in this block, in the order rotated by the block's round
    (bracket.experiment.design.level_order); the level summaries, in the order run (for the block's meta
    `load_levels`)."""
    out = []
    for position, i in enumerate(level_order(len(spec.levels), context.block.round)):
        summary = run_level(target, spec, context, spec.levels[i], position, prompts, write)
        out.append(summary)
        if say is not None:
            say(_line(summary))
    return out


def run_workload(
    context: BlockContext,
    adapter,
    http: httpx.Client,
    base: str,
    model_name: str,
    workload: str,
    prompts: list[dict],
    write: Callable[[dict], None],
    say: Callable[[str], None] | None = None,
) -> list[dict]:
    """A load workload's levels in this block, from the experiment as the block's server was launched: what the
    block runner calls for a workload of kind load (its records through `write`, the summaries for its meta's
    `load_levels`)."""
    spec = load_workload.spec(context.exp, workload)
    return run_levels(target_for(adapter, context, http, base, model_name), spec, context, prompts, write, say)


def _line(s: dict) -> str:
    unit = "users" if s["level_kind"] == "users" else "req/s"
    ok = "valid" if s["valid"] else f"INVALID {s['invalid_reason']['code']}"
    lag = s["send_lag_p99_s"]
    cpu = s["client_cpu_per_token_us"]
    return (
        f"  load {s['arm']:<12} {s['workload']} {s['level']:g} {unit}: {s['steady_requests']} steady requests, "
        f"{s['tokens_received']} tokens, send lag p99 {'-' if lag is None else f'{lag * 1000:.1f} ms'}, client "
        f"{'-' if cpu is None else f'{cpu:.1f}'} us CPU/token; {ok}"
    )
