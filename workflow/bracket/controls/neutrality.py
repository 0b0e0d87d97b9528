"""The neutrality control: does bracket's request cost the server more than a plain client's?

In every block, after the arm's own timed requests, the same server answers a few pairs of requests:
bracket's body (the adapter's `request_body`) and the plainest body that yields the same tokens (its
`plain_body`: what llama-benchy or a bare OpenAI client sends). The order within a pair alternates
(pair i of block b sends bracket's body first when b + i is even), so a trend inside a block does not
fall on one body. Both requests of a pair carry the same prompt, so they should yield the same tokens
(the statistics count the pairs that did). Each request is timed by the client and, where the engine reports it, by the server
(llama.cpp's `timings.predicted_ms`, vLLM's request_decode_time histogram, Ollama's eval_duration). The
records carry `control: "neutrality"`, so they never enter an arm's statistics (records.tidy);
bracket.stats.neutrality turns them into the instrument's cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from bracket.experiment import arena_workload
from bracket.measure.context import BlockContext
from bracket.typed.experiment import Experiment

CONTROL = "neutrality"
BODIES = ("bracket", "plain")


@dataclass(frozen=True)
class Request:
    """One request of the control: which pair, which body, on which prompt."""

    pair: int
    body: str
    workload: str
    prompt_id: str
    prompt: str


def when_off(exp: Experiment, stand_in: bool) -> str | None:
    """Why the control does not run in this experiment's blocks (None: it runs)."""
    c = exp.controls
    if not c.neutrality:
        return f"off (controls.neutrality_off: {c.neutrality_off})"
    if stand_in:
        return "off: the block's server is a stand-in given by argv, not the engine whose cost is measured"
    if not [w for w, wl in exp.workloads.items() if not arena_workload.is_arena(wl)]:
        return "off: every workload is an arena cell (concurrent users), and the control measures one stream"
    return None


def plan(exp: Experiment, position: int, workloads: dict[str, list[dict]], tag) -> list[Request]:
    """The block's control requests in the order they are sent.

    Pair i uses workload i mod W (in the experiment's order, arena cells left out) and that workload's
    prompt (position + i) mod P, behind the pair's unique prefix `tag(workload, pair)`: both bodies get the
    same prompt, so a greedy engine gives both the same tokens and the pair compares the body alone (with a
    prefix per body the outputs differed, and so did a speculative arm's acceptance: in the llama.cpp CPU
    sweep that put two arms' pairs 14-17 % apart). The second request may find the first's prompt in a
    prefix cache: that shortens its prefill, not its decode, which is what the control compares
    (bracket.stats.neutrality). Bracket's body goes first when position + i is even.
    """
    names = [w for w, wl in exp.workloads.items() if not arena_workload.is_arena(wl)]
    out = []
    for i in range(exp.controls.neutrality_pairs):
        wl = names[i % len(names)]
        texts = workloads[wl]
        p = texts[(position + i) % len(texts)]
        order = BODIES if (position + i) % 2 == 0 else BODIES[::-1]
        out += [Request(i, body, wl, p["id"], tag(wl, i) + p["prompt"]) for body in order]
    return out


def run(
    ctx: BlockContext, adapter, http, base: str, model_name: str, workloads: dict[str, list[dict]], tag
) -> Iterator[dict]:
    """Send the block's control requests one at a time on the context's server; yield one raw record per request."""
    req = ctx.exp.request
    for r in plan(ctx.exp, ctx.block.position, workloads, tag):
        m, timing = adapter.control(http, base, model_name, r.prompt, req, req.seed, ctx.arm, r.body)
        yield ctx.record(
            run=None,
            warmup=False,
            workload=r.workload,
            prompt_id=r.prompt_id,
            max_tokens=req.max_tokens,
            control=CONTROL,
            body=r.body,
            pair=r.pair,
            server_decode_s=timing.seconds if timing else None,
            server_tokens=timing.tokens if timing else None,
            server_timing=timing.source if timing else None,
            **m.fields(),
        )
