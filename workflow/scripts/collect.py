"""Tidy every raw record into runs.csv (snakemake rule `collect`)."""
from bracket import records

df = records.tidy(records.read(snakemake.input.blocks))
df.to_csv(snakemake.output[0], index=False)
with open(snakemake.log[0], "w") as log:
    log.write(f"{len(df)} records, {int(df['valid'].sum())} valid\n")
    for reason, n in df.loc[~df["valid"], "invalid_reason"].value_counts().items():
        log.write(f"  {n} x {reason}\n")
