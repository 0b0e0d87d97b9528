"""Greedy agreement of every arm with the reference (rule `agreement`)."""

from bracket import records
from bracket.controls import agreement
from bracket.experiment import resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    result = agreement.from_experiment(records.read(snakemake.input.blocks), experiment)
    agreement.write_json(result, snakemake.output[0])
    for c in result["cells"]:
        log.info("%s / %s: %s/%s exact", c["arm"], c["workload"], c["exact"], c["pairs"])
    for f in result["flags"]:
        log.info("FLAG: %s", f)
