"""The Spark Arena cell's window rates (rule `arena_summary`)."""

from bracket import records
from bracket.arena import readings as arena_stats
from bracket.experiment import resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    result = arena_stats.summarize(records.read(snakemake.input.blocks), experiment)
    arena_stats.write_json(result, snakemake.output[0])
    for c in result["cells"]:
        s = c["summary"] or {}
        log.info("%s / %s: median %s over %s runs", c["arm"], c["workload"], s.get("median"), s.get("n"))
