"""Decode ceilings under each precision hypothesis (snakemake rule `ceiling`)."""

from bracket.experiment import resolved
from bracket.measure import session
from bracket.physics import ceiling
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    # Under the locks the blocks take: the copy probes never run beside a block of this or another
    # experiment on the same cores (snakemake --cores 2, or a second checkout), which would disturb both.
    with (
        session.port_lock(session.host_lock_dir(), experiment.engine.port),
        session.host_lock(session.host_lock_path(experiment), f"ceiling of {snakemake.wildcards.exp}"),
    ):
        result = ceiling.write_json(snakemake.input[0], experiment, snakemake.output[0])
    if result["status"] == "unknown":
        log.info("ceiling unknown: %s; set %s", result["reason"], result["key"])
    else:
        log.info(
            "bandwidth %s GB/s, %s bytes per token: ceiling %s tok/s",
            result["bandwidth_gbps"],
            result["bytes_per_token"],
            result["ceiling_tok_s"],
        )
