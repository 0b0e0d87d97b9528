"""The Spark Arena cell's window rates (rule `arena_summary`)."""
from bracket import arena, config, records

cfg = config.load(snakemake.params.experiment)
result = arena.summarize(records.read(snakemake.input.blocks), cfg)
arena.write_json(result, snakemake.output[0])
with open(snakemake.log[0], "w") as log:
    for c in result["cells"]:
        s = c["summary"] or {}
        log.write(f"{c['arm']} / {c['workload']}: median {s.get('median')} over {s.get('n')} runs\n")
