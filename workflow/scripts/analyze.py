"""Statistics of runs.csv into stats.json (snakemake rule `analyze`)."""
import json

import pandas as pd

from bracket import config
from bracket.rulelog import rule_log
from bracket.stats import analyze

with rule_log(snakemake.log[0]) as log:
    cfg = config.load(snakemake.params.experiment)
    stats = analyze(pd.read_csv(snakemake.input[0]), cfg)
    with open(snakemake.output[0], "w") as f:
        json.dump(stats, f, indent=1, allow_nan=False)
    log.info("stats of %s written to %s", snakemake.input[0], snakemake.output[0])
