"""Byte account of the served model (snakemake rule `weights`): written whatever the setup, with
`status: unknown` and the reason when no headers can be found (bracket.physics.modelsource)."""

from bracket.experiment import resolved
from bracket.physics import weights
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    acct = weights.write_for_experiment(
        experiment, snakemake.output[0], root=snakemake.params.root, model=snakemake.params.model or None
    )
    src = acct.get("source") or {}
    if acct["status"] == "unknown":
        log.info("no byte account: %s; set %s", acct["reason"], acct["key"])
    else:
        log.info(
            "%s (%s: %s): %d bytes read per token",
            acct["model"],
            src.get("kind"),
            src.get("detail"),
            acct["bytes_per_token"],
        )
