"""Greedy agreement of every arm with the reference (rule `agreement`)."""
from bracket import agreement, config, records

cfg = config.load(snakemake.params.experiment)
result = agreement.from_experiment(records.read(snakemake.input.blocks), cfg)
agreement.write_json(result, snakemake.output[0])
with open(snakemake.log[0], "w") as log:
    for c in result["cells"]:
        log.write(f"{c['arm']} / {c['workload']}: {c['exact']}/{c['pairs']} exact\n")
    log.writelines(f"FLAG: {f}\n" for f in result["flags"])
