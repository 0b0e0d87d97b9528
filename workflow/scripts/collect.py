"""Tidy every raw record into runs.csv (snakemake rule `collect`)."""

import json
import sys
from pathlib import Path

from bracket import records
from bracket.rulelog import rule_log
from bracket.secrets import redact_obj

with rule_log(snakemake.log[0]) as log:
    out = Path(snakemake.output.runs).parent
    torn = []
    try:
        recs = records.read(snakemake.input.blocks, torn=torn)
        # Attempts set aside in raw/failed/ (a block that failed and ran again), for the article.
        attempts = records.failed_attempts(out / "raw")
    except records.DamagedRecords as exc:
        print(f"\n{exc}\n", file=sys.stderr)  # the file, the line and the fix; no traceback
        sys.exit(1)
    df = records.tidy(recs)
    df.to_csv(snakemake.output.runs, index=False)
    # The neutrality control's requests (never in runs.csv): bracket's body against the plain one.
    records.control_table(recs).to_csv(snakemake.output.neutrality, index=False)
    Path(snakemake.output.attempts).write_text(json.dumps(redact_obj(attempts), indent=1, default=str))
    # Records a crash cut short at the end of a block's file: counted and named in stats.json and the article.
    for t in torn:
        t["file"] = Path(t["file"]).resolve().relative_to(out.resolve()).as_posix()
        log.warning("%s, line %d: a record cut short (%d bytes) is left out", t["file"], t["line"], t["bytes"])
    Path(snakemake.output.torn).write_text(json.dumps(torn, indent=1))
    log.info("%d records, %d valid", len(df), int(df["valid"].sum()))
    for reason, n in df.loc[~df["valid"], "invalid_reason"].value_counts().items():
        log.info("  %d x %s", n, reason)
