"""Decode ceilings under each precision hypothesis (snakemake rule `ceiling`)."""
from bracket import ceiling, config
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0]) as log:
    cfg = config.load(snakemake.params.experiment)
    result = ceiling.write_json(snakemake.input[0], cfg, snakemake.output[0])
    if result["status"] == "unknown":
        log.info("ceiling unknown: %s; set %s", result["reason"], result["key"])
    else:
        log.info("bandwidth %s GB/s, %s bytes per token: ceiling %s tok/s", result["bandwidth_gbps"],
                 result["bytes_per_token"], result["ceiling_tok_s"])
