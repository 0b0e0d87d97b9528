"""Tidy every raw record into runs.csv (snakemake rule `collect`)."""
from bracket import records
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    df = records.tidy(records.read(snakemake.input.blocks))
    df.to_csv(snakemake.output[0], index=False)
    log.info("%d records, %d valid", len(df), int(df["valid"].sum()))
    for reason, n in df.loc[~df["valid"], "invalid_reason"].value_counts().items():
        log.info("  %d x %s", n, reason)
