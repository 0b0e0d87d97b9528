"""Decode ceilings under each precision hypothesis (snakemake rule `ceiling`)."""
from bracket import ceiling, config

cfg = config.load(snakemake.params.experiment)
ceiling.write_json(snakemake.input[0], cfg, snakemake.output[0])
