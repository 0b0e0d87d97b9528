"""Judge a reproduction and append to the base experiment's ledger when a figure does not hold (rule `verdict`)."""

import datetime
import json
from pathlib import Path

from bracket.controls import corrections, reproduce
from bracket.experiment import resolved
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    r = resolved.read(snakemake.input.experiment).reproduces
    name = snakemake.wildcards.exp
    with open(snakemake.input.original) as f:
        original = json.load(f)
    with open(snakemake.input.reproduction) as f:
        repro = json.load(f)
    # the weights each session served (provenance beside its blocks): another model is not compared
    models = {
        who: reproduce.served_models(Path(path).parent / "raw")
        for who, path in (("original", snakemake.input.original), ("reproduction", snakemake.input.reproduction))
    }
    v = reproduce.verdict(original, repro, r.arm, list(r.workloads), models)
    v.update(name=name, base=r.experiment, runs=r.runs, id=r.id, created=r.created, rule=reproduce.RULE)
    date = datetime.date.fromisoformat(r.created[:10]).isoformat()
    entries = reproduce.correction_entries(v, r.experiment, name, date)
    added = corrections.append(snakemake.params.ledger, entries) if entries else []
    v["ledger"] = {"path": snakemake.params.ledger, "entries": entries, "appended": len(added)}
    with open(snakemake.output[0], "w") as f:
        json.dump(v, f, indent=1, ensure_ascii=False)
    log.info("%s: %s", name, v["verdict"])
    for c in v["cells"]:
        log.info(
            "  %s: %s%s",
            c["workload"],
            c["verdict"],
            f": {reproduce.sentence(c)}" if c.get("original") and c.get("reproduction") else "",
        )
    log.info("%d entries appended to %s", len(added), snakemake.params.ledger)
