"""An adaptive design's look after round r (snakemake checkpoint `look`): settled or open, and what runs next."""

import json

from bracket import records
from bracket.experiment import design, resolved
from bracket.rulelog import rule_log
from bracket.stats.analyze import jsonable
from bracket.stats.io import from_runs
from bracket.stats.sequential import Plan, assess

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    r = int(snakemake.wildcards.r)
    frame = from_runs(records.tidy(records.read(snakemake.input.blocks)))
    doc = assess(frame, Plan.of(experiment), upto=r)
    # The round this look adds, as schedule.csv drew it before the first block (recorded here as it is decided).
    nxt = (
        design.from_config(experiment, r + 1)[len(design.from_config(experiment, r)) :] if doc["another_round"] else []
    )
    doc["adds"] = [
        {"position": b.position, "arm": b.arm, "round": b.round, "seed": b.seed, **({"host": b.host} if b.host else {})}
        for b in nxt
    ]
    with open(snakemake.output[0], "w") as f:
        json.dump(jsonable(doc), f, indent=1, allow_nan=False)
    opened = [f"{c['candidate']} / {c['workload']}" for c in doc["comparisons"] if c["status"] == "open"]
    log.info(
        "look after round %d: %d comparisons open%s; %s",
        r,
        len(opened),
        f" ({', '.join(opened)})" if opened else "",
        f"round {r + 1} runs ({len(nxt)} blocks)" if doc["another_round"] else "no further round",
    )
