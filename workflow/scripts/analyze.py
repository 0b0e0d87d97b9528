"""Statistics of runs.csv into stats.json (snakemake rule `analyze`)."""
import json

import pandas as pd

from bracket import config
from bracket.stats import analyze

cfg = config.load(snakemake.params.experiment)
stats = analyze(pd.read_csv(snakemake.input[0]), cfg)
with open(snakemake.output[0], "w") as f:
    json.dump(stats, f, indent=1, allow_nan=False)
