"""The batch-1 vs batch-2 determinism control in a fresh server (rule `determinism_control`)."""

import sys

from bracket import embedded
from bracket.block import runner
from bracket.controls import determinism
from bracket.experiment import resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log.control):
    experiment = embedded.with_llama_server(resolved.read(snakemake.input.experiment), snakemake.params.root)
    try:
        result = determinism.run_control(
            experiment,
            snakemake.wildcards.exp,
            model=snakemake.params.model,
            python=snakemake.params.python,
            root=snakemake.params.root,
            log_path=snakemake.log.server,
        )
    except runner.BlockFailed as exc:
        print(f"\nthe determinism control of {snakemake.wildcards.exp} failed: {exc}", file=sys.stderr)
        sys.exit(1)
    determinism.write_json(result, snakemake.output[0])
    for a in result["arms"]:
        print(f"determinism {a['arm']}: {a['verdict']}", file=sys.stderr)
