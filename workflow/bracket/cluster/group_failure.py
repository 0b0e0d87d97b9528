"""A host's blocks in one allocation: a block that finished keeps its records when a later one fails.

With `cluster.allocation: per_host` a host's blocks run as one group job (one sbatch job). When any
member fails (a block past the job's time limit, a cancel, a node failure), Snakemake 9.27
post-processes every member of the group as failed and deletes its outputs ("Removing output files of
failed job block since they might be corrupted"), the finished blocks' records among them, which the
rerun would then measure again. A block's outputs are final only when it finished: the block runner
writes its records and meta under `.partial` names while it measures and renames the meta to
`block-K.meta.json` with `status: complete` last (bracket.block.runner), so a block job whose meta says
complete and whose records exist is finished, whatever happened to its group afterwards.

`install` wraps Snakemake's `Job.cleanup`, the one place that deletes a failed job's outputs, so that it
leaves a finished block's outputs where they are and says so; every other output of a failed job goes
as before. Snakemake has already recorded the job's metadata as not incomplete (Job.postprocess calls
persistence.finished before cleanup), so the rerun runs only the blocks that did not finish; an
unfinished block's `.partial` records go to `failed/` when it starts again (block.runner.archive_attempt).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

BLOCK_RULE = "block"


def finished_block(outputs: list[str]) -> bool:
    """True when `outputs` (a block job's: records, meta) are a finished block's: the meta says complete."""
    paths = [Path(str(f)) for f in outputs]
    metas = [p for p in paths if p.name.endswith(".meta.json")]
    if len(metas) != 1 or not all(p.is_file() for p in paths):
        return False
    try:
        meta = json.loads(metas[0].read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("status") == "complete"


def kept_message(job_name: str, outputs: list[str]) -> str:
    return (
        f"Keeping the outputs of {job_name}: the block finished (its meta says complete) before another "
        f"job of its group failed, so the rerun does not measure it again: {', '.join(map(str, outputs))}"
    )


def install() -> bool:
    """Wrap Snakemake's Job.cleanup as the module says; False where Snakemake is not importable.

    Safe to call more than once (the Snakefile is read again inside every job)."""
    try:
        from snakemake import jobs
        from snakemake.logging import logger
    except ImportError:
        return False
    if getattr(jobs.Job.cleanup, "_bracket", False):
        return True
    cleanup = jobs.Job.cleanup

    @functools.wraps(cleanup)
    async def keep_finished_blocks(self, skip_outputs):
        if self.rule.name == BLOCK_RULE and self.group is not None and finished_block(list(self.output)):
            logger.warning(kept_message(f"block {'_'.join(map(str, self.wildcards))}", list(self.output)))
            skip_outputs = {*skip_outputs, *self.output}
        return await cleanup(self, skip_outputs)

    keep_finished_blocks._bracket = True
    jobs.Job.cleanup = keep_finished_blocks
    return True
