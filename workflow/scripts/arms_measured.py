"""Fail when an arm has no valid run (snakemake rule `arms_measured`); the article is already written."""

import json
import sys

import pandas as pd
from bracket import records
from bracket.experiment import resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]):
    arms = list(resolved.read(snakemake.input.experiment).arms)
    missing = records.arms_without_valid_run(pd.read_csv(snakemake.input.runs), arms)
    if missing:
        print(
            f"\n{', '.join(missing)}: no valid run, so no arm of {snakemake.wildcards.exp} can be named fastest. "
            f"The article says so in its first lines ({snakemake.input.article}); every record is kept in "
            f"{snakemake.input.runs} and raw/. Fix the cause (see the article's errors), then measure those "
            f"blocks anew.\n",
            file=sys.stderr,
        )
        sys.exit(1)
    with open(snakemake.output[0], "w") as f:
        json.dump({"arms": arms, "without_valid_run": []}, f)
