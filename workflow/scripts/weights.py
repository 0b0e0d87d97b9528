"""Byte account of the served model (snakemake rule `weights`)."""
from bracket import config, weights

cfg = config.load(snakemake.params.experiment)
weights.write_json(snakemake.params.model, snakemake.output[0], cfg)
