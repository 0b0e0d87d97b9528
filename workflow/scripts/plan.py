"""Write the experiment's schedule (snakemake rule `plan`)."""

from bracket.experiment import design, resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    blocks = design.from_config(experiment)
    design.write(blocks, snakemake.output[0])
    log.info("%d blocks, design %s: %s", len(blocks), experiment.design.kind, " ".join(b.arm for b in blocks))
