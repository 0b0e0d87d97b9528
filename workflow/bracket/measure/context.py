"""One server's share of a block, as a frozen value: where its records come from, and the one place they are made.

Every raw record a block writes (the arm's timed requests, an arena cell's users, its coherence check, the
neutrality control's pairs) names the same things: the experiment, the arm, the block, its round and position,
the host it was pinned to, the server that answered and the arm's draft budget. `BlockContext.record` fills
them once, from the context, so no caller can leave one out or spell one differently; the caller adds what
the request itself measured (records.new_record checks every key against records.FIELDS and its kin).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bracket import records
from bracket.experiment.config import draft_budget
from bracket.experiment.design import Block
from bracket.typed.experiment import Arm, Experiment


def block_name(block: Block, n_blocks: int) -> str:
    """How messages name a block: counted from 1 like the progress lines, with its files' index."""
    return f"block {block.position + 1}/{n_blocks} (block-{block.position})"


@dataclass(frozen=True)
class BlockContext:
    """A block on one of its servers: the experiment as that server was launched for it (`exp`), the experiment's
    name (`experiment`), the block as the schedule drew it, how many blocks the experiment has, and the server's
    id (`server_id`, one per server: a block with a second server for its prefix-caching cells has two)."""

    exp: Experiment
    experiment: str
    block: Block
    n_blocks: int
    server_id: str

    @property
    def arm(self) -> Arm:
        """The block's arm, as its server was launched."""
        return self.exp.arms[self.block.arm]

    @property
    def draft_budget(self) -> int | None:
        """The arm's draft tokens per verify step; None for an arm that does not draft."""
        return draft_budget(self.arm)

    @property
    def name(self) -> str:
        """How messages name the block (block_name)."""
        return block_name(self.block, self.n_blocks)

    @property
    def per_block(self) -> int | None:
        """What makes a prompt's unique prefix differ per block: its position on an attached server (whose caches
        outlive the block), None on a fresh server of the block's own."""
        return self.block.position if self.exp.engine.launch == "attach" else None

    def on_server(self, server_id: str, exp: Experiment | None = None) -> BlockContext:
        """The same block on another of its servers (launched from `exp` where that differs)."""
        return dataclasses.replace(self, server_id=server_id, exp=exp if exp is not None else self.exp)

    def record(self, *, run: int | None, warmup: bool, workload: str, prompt_id: str, **measured) -> dict:
        """One raw record of this block on this server: the context's fields, then what the request measured
        (`measured`: records.FIELDS and its kin, max_tokens included where the request asked for a length)."""
        return records.new_record(
            experiment=self.experiment,
            arm=self.block.arm,
            block=self.block.position,
            round=self.block.round,
            position=self.block.position,
            host=self.block.host or None,
            server_id=self.server_id,
            draft_budget=self.draft_budget,
            run=run,
            warmup=warmup,
            workload=workload,
            prompt_id=prompt_id,
            **measured,
        )
