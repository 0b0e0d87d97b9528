"""The reference server's batching law: continuous batching with a known step time, the truth for a load run.

In batching mode (ReferenceServer(step_base_s=a, step_per_stream_s=b)) one engine thread runs decode steps back
to back while any stream is active:

    step time = a + b * B,   B = the streams active when the step starts (at most max_batch)

and at each step's end every active stream gets one event (tokens_per_event tokens). A request joins the step in
progress when it arrives (its prefill is free, so its first token comes at that step's end) and is counted in B
from the next step on; past max_batch it waits in a queue, first come first served, and is admitted at a step's
end. So a closed loop of N <= max_batch users, each sending its next request as its last ends, runs every step at
B = N (a step boundary falls in a user's gap between two requests, a round trip of about a millisecond, in about
gap / step of its requests), and

    per-user decode rate   = k / (a + b N)           tokens per second of each stream after its first token
    aggregate rate         = N k / (a + b N)          rising towards k / b, the capacity, as N grows
    TPOT                   = (a + b N) / k            per token, after the first

Beyond max_batch M the aggregate stays at M k / (a + b M) and the queue adds to TTFT. With an SLO on TPOT of T,
the largest batch that meets it is floor((T - a) / b) (`knee`). Each step is kept (start, batch, end) in
`BatchEngine.steps` so a test can tell the law from the server's own lateness.

Only the standard library, as the rest of the server.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass

from bracket.engines.reference_schedule import _sleep_until


@dataclass(frozen=True)
class BatchTruth:
    """What the batching law gives for N concurrent streams (see the module docstring)."""

    users: int
    batch: int  # streams per step: min(users, max_batch)
    step_s: float
    per_user_tok_s: float
    aggregate_tok_s: float
    tpot_s: float


def batch_truth(
    step_base_s: float, step_per_stream_s: float, users: int, tokens_per_event: int = 1, max_batch: int | None = None
) -> BatchTruth:
    """The law's values for `users` streams always in flight: step = a + b min(N, M); per user k / step."""
    if users < 1 or step_base_s < 0 or step_per_stream_s < 0 or step_base_s + step_per_stream_s <= 0:
        raise ValueError(f"need users >= 1, a >= 0, b >= 0, a + b > 0; got {users}, {step_base_s}, {step_per_stream_s}")
    batch = users if max_batch is None else min(users, max_batch)
    step = step_base_s + step_per_stream_s * batch
    per_user = tokens_per_event / step
    return BatchTruth(users, batch, step, per_user, batch * per_user, step / tokens_per_event)


def knee(step_base_s: float, step_per_stream_s: float, tpot_slo_s: float, tokens_per_event: int = 1) -> int:
    """The most streams whose TPOT (a + b N) / k stays within tpot_slo_s (0: not even one)."""
    if step_per_stream_s <= 0:
        return math.inf if step_base_s / tokens_per_event <= tpot_slo_s else 0
    return max(0, math.floor((tpot_slo_s * tokens_per_event - step_base_s) / step_per_stream_s + 1e-9))


class Slot:
    """One stream in the batch: the end time (CLOCK_MONOTONIC) of each step that gave it an event."""

    __slots__ = ("events", "times", "cancelled")

    def __init__(self, events: int):
        self.events = events
        self.times: list[float] = []
        self.cancelled = False


class BatchEngine:
    """The engine thread of batching mode: steps of a + b * batch seconds, one event per active stream each."""

    def __init__(self, step_base_s: float, step_per_stream_s: float, max_batch: int | None = None):
        check(step_base_s, step_per_stream_s, max_batch)
        self.a, self.b = float(step_base_s), float(step_per_stream_s)
        self.max_batch = None if max_batch is None else int(max_batch)
        self._cond = threading.Condition()
        self._active: list[Slot] = []
        self._queue: collections.deque[Slot] = collections.deque()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.steps: collections.deque[tuple[float, int, float]] = collections.deque(maxlen=200_000)

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._active)

    def join(self, events: int) -> Slot:
        """A new stream of `events` events: in the step in progress, or queued past max_batch."""
        slot = Slot(events)
        with self._cond:
            if self.max_batch is not None and len(self._active) >= self.max_batch:
                self._queue.append(slot)
            else:
                self._active.append(slot)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reference-batch", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return slot

    def wait(self, slot: Slot, j: int) -> float:
        """The end time of the step that gave `slot` its event j, once that step has ended."""
        with self._cond:
            while len(slot.times) <= j and not self._stopped:
                self._cond.wait()
            return slot.times[j] if len(slot.times) > j else time.monotonic()

    def leave(self, slot: Slot) -> None:
        """The stream ended or its client went away: it takes no more steps."""
        with self._cond:
            slot.cancelled = True
            if slot in self._active:
                self._active.remove(slot)
                self._admit()
            elif slot in self._queue:
                self._queue.remove(slot)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _admit(self) -> None:
        while self._queue and (self.max_batch is None or len(self._active) < self.max_batch):
            self._active.append(self._queue.popleft())

    def _run(self) -> None:
        start = None
        while True:
            with self._cond:
                while not self._active and not self._stopped:
                    self._cond.wait()
                    start = None  # idle: the next step starts when a stream comes
                if self._stopped:
                    return
                batch = len(self._active)
            start = time.monotonic() if start is None else start
            end = start + self.a + self.b * batch  # back to back: lateness does not accumulate
            _sleep_until(end)
            with self._cond:
                for slot in self._active:
                    slot.times.append(end)
                self._active = [s for s in self._active if len(s.times) < s.events and not s.cancelled]
                self._admit()
                self.steps.append((start, batch, end))
                self._cond.notify_all()
            start = end


def check(step_base_s, step_per_stream_s, max_batch) -> None:
    """Refuse a law that cannot run: negative times, a zero step, a batch limit below one."""
    if step_base_s is None:
        return
    a, b = float(step_base_s), float(step_per_stream_s or 0.0)
    if a < 0 or b < 0 or a + b <= 0 or a + b > 60:
        raise ValueError(f"step_base_s and step_per_stream_s must be >= 0 with 0 < a + b <= 60 s, got {a} and {b}")
    if max_batch is not None and int(max_batch) < 1:
        raise ValueError(f"max_batch must be >= 1 stream, got {max_batch}")
