"""Write the experiment's schedule (snakemake rule `plan`)."""
from bracket import config, design

cfg = config.load(snakemake.params.experiment)
blocks = design.from_config(cfg)
design.write(blocks, snakemake.output[0])
with open(snakemake.log[0], "w") as log:
    log.write(f"{len(blocks)} blocks, design {cfg['design']['kind']}: {' '.join(b.arm for b in blocks)}\n")
