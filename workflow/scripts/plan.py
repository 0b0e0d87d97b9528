"""Write the experiment's schedule (snakemake rule `plan`)."""

from bracket.experiment import config, design
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    cfg = config.load(snakemake.params.experiment)
    blocks = design.from_config(cfg)
    design.write(blocks, snakemake.output[0])
    log.info("%d blocks, design %s: %s", len(blocks), cfg["design"]["kind"], " ".join(b.arm for b in blocks))
