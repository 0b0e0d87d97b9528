"""Schedules: the order in which arms are measured, drawn once and recorded.

Interleaving arms in time is what lets drift hit every arm alike and lets the gap between
visits to the same arm measure the drift itself (seed 000, "two easy wins, two dead ends").

With named hosts each host runs the whole design as its own interleaved sequence, and the hosts
run side by side: a block's `position` counts slots across hosts (slot s of host i is position
s * H + i), so positions still grow with time and blocks at one slot run at the same time.
"""

from __future__ import annotations

import csv
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from bracket.typed.experiment import Experiment

KINDS = ("abab", "abba", "bracket", "random", "sequential")

#: Design kinds whose first r rounds are the same blocks whatever the number of rounds drawn
#: (a round added later never reorders the ones run); sequential is not one, and is a control anyway.
ADAPTIVE_KINDS = ("abab", "abba", "bracket", "random")


@dataclass(frozen=True)
class Block:
    position: int  # index in time, 0-based
    arm: str
    round: int  # 1-based visit of this arm's round
    seed: int  # base seed of this block's requests
    host: str = ""  # the named host the block is pinned to; "" when the experiment names none


def draw(arms: list[str], reference: str, kind: str, rounds: int, seed: int) -> list[Block]:
    """Return the blocks of a design, in the order they run.

    abab:       A B C A B C            (same order every round)
    abba:       A B C C B A            (reversed every other round, cancels a linear trend)
    bracket:    R A B R A B R          (reference opens, closes and separates rounds)
    random:     each round a seeded shuffle (random.Random(seed), stable across Python versions)
    sequential: A A B B C C            (a control: drift is confounded with the arms)
    """
    if kind not in KINDS:
        raise ValueError(f"design kind {kind!r} is unknown; choose one of {', '.join(KINDS)}")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if reference not in arms:
        raise ValueError(f"reference {reference!r} is not among the arms {arms}")
    rng = random.Random(seed)
    order: list[tuple[str, int]] = []
    if kind == "abab":
        order = [(a, r) for r in range(1, rounds + 1) for a in arms]
    elif kind == "abba":
        for r in range(1, rounds + 1):
            seq = arms if r % 2 == 1 else list(reversed(arms))
            order += [(a, r) for a in seq]
    elif kind == "bracket":
        others = [a for a in arms if a != reference]
        order = [(reference, 1)]
        for r in range(1, rounds + 1):
            order += [(a, r) for a in others]
            order.append((reference, r + 1))
    elif kind == "random":
        for r in range(1, rounds + 1):
            seq = list(arms)
            rng.shuffle(seq)
            order += [(a, r) for a in seq]
    elif kind == "sequential":
        order = [(a, r) for a in arms for r in range(1, rounds + 1)]
    return [Block(position=i, arm=a, round=r, seed=seed * 100_003 + i) for i, (a, r) in enumerate(order)]


def draw_hosts(arms: list[str], reference: str, kind: str, rounds: int, seed: int, hosts: list[str]) -> list[Block]:
    """Return the blocks of a design run on every named host, in position order.

    Each host gets the whole design as its own interleaved sequence (host i draws a random
    design with seed + i, so the first host's sequence is the one `draw` gives without hosts).
    Slot s of host i gets position s * H + i for H hosts: positions grow with time, and the
    blocks of one slot, on different hosts, run at the same time. With no hosts this is `draw`.
    """
    if not hosts:
        return draw(arms, reference, kind, rounds, seed)
    if len(set(hosts)) != len(hosts):
        dup = sorted({h for h in hosts if hosts.count(h) > 1})
        raise ValueError(f"hosts must be distinct; {', '.join(dup)} appears more than once")
    per_host = [draw(arms, reference, kind, rounds, seed + i) for i in range(len(hosts))]
    blocks = []
    for slot in range(len(per_host[0])):
        for i, host in enumerate(hosts):
            b, pos = per_host[i][slot], slot * len(hosts) + i
            blocks.append(Block(position=pos, arm=b.arm, round=b.round, seed=seed * 100_003 + pos, host=host))
    return blocks


def is_adaptive(exp: Experiment) -> bool:
    return exp.design.rounds == "adaptive"


def planned_rounds(exp: Experiment) -> int:
    """The rounds the schedule is drawn for: design.rounds, or max_rounds for an adaptive design."""
    d = exp.design
    return int(d.max_rounds) if d.rounds == "adaptive" else int(d.rounds)


def from_config(exp: Experiment, rounds: int | None = None) -> list[Block]:
    """The blocks of the design; of its first `rounds` rounds when given (an adaptive design's looks).

    An adaptive design's schedule is drawn for max_rounds once, before any block: every kind it
    allows draws the first r rounds the same whatever the number of rounds, so the rounds run
    are a prefix of the recorded schedule and no later round reorders an earlier one.
    """
    d = exp.design
    return draw_hosts(
        list(exp.arms),
        exp.reference,
        d.kind,
        rounds or planned_rounds(exp),
        d.seed,
        list(exp.hosts),
    )


FIELDS = ["position", "arm", "round", "seed"]


def write(blocks: list[Block], path: str | Path) -> None:
    """Write the schedule as CSV; the `host` column appears only when blocks are pinned to hosts."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = FIELDS + (["host"] if any(b.host for b in blocks) else [])
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for b in blocks:
            w.writerow({k: v for k, v in asdict(b).items() if k in fields})


def read(path: str | Path) -> list[Block]:
    with open(path, newline="") as f:
        return [
            Block(
                position=int(r["position"]),
                arm=r["arm"],
                round=int(r["round"]),
                seed=int(r["seed"]),
                host=r.get("host") or "",
            )
            for r in csv.DictReader(f)
        ]


def level_order(n_levels: int, index: int) -> list[int]:
    """The order a block runs a load workload's levels in: 0..n-1 rotated left by `index` (the block's round).

    Over n consecutive rounds every level runs once at every position, so a level's value is not tied to what
    ran before it in a block (a server warmed by a heavier level, memory growing through the block); the arms of
    one round run the levels in the same order, so a comparison within a round is of like with like.
    """
    if n_levels < 1:
        raise ValueError(f"a load workload has at least one level, got {n_levels}")
    shift = index % n_levels
    return [(i + shift) % n_levels for i in range(n_levels)]
