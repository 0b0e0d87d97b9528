"""Tidy every raw record into runs.csv (snakemake rule `collect`)."""

import json
from pathlib import Path

from bracket import records
from bracket.rulelog import rule_log
from bracket.secrets import redact_obj

with rule_log(snakemake.log[0]) as log:
    recs = records.read(snakemake.input.blocks)
    df = records.tidy(recs)
    df.to_csv(snakemake.output.runs, index=False)
    # The neutrality control's requests (never in runs.csv): bracket's body against the plain one.
    records.control_table(recs).to_csv(snakemake.output.neutrality, index=False)
    # Attempts set aside in raw/failed/ (a block that failed and ran again), for the article.
    attempts = records.failed_attempts(Path(snakemake.output.runs).parent / "raw")
    Path(snakemake.output.attempts).write_text(json.dumps(redact_obj(attempts), indent=1, default=str))
    log.info("%d records, %d valid", len(df), int(df["valid"].sum()))
    for reason, n in df.loc[~df["valid"], "invalid_reason"].value_counts().items():
        log.info("  %d x %s", n, reason)
