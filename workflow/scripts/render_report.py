"""Render the article (snakemake rule `report`)."""

import json
from pathlib import Path

from bracket.article import render as report
from bracket.rulelog import rule_log

with rule_log(snakemake.log[0], mode="a"):
    out_dir = Path(snakemake.output.html).parent
    report.render(
        notebook=snakemake.input.notebook,
        out_dir=out_dir,
        parameters={
            "runs_csv": str(Path(snakemake.input.runs).resolve()),
            "stats_json": str(Path(snakemake.input.stats).resolve()),
            "meta_dir": str(Path(snakemake.input.blocks[0]).parent.resolve()),
            "block_files": json.dumps([str(Path(p).resolve()) for p in snakemake.input.blocks]),
            "corrections_path": str(Path(snakemake.params.corrections).resolve()),
            "agreement_json": str(Path(snakemake.input.agreement).resolve()),
            "arena_json": str(Path(snakemake.input.arena).resolve()),
            # Declared only when the control runs (controls.determinism or its target).
            "determinism_json": str(Path(snakemake.input.determinism[0]).resolve())
            if snakemake.input.determinism
            else "",
            "verdict_paths": json.dumps(
                sorted({str(Path(p).resolve()) for p in [*snakemake.input.verdict, *snakemake.params.verdicts_done]})
            ),
            "out_dir": str(out_dir.resolve()),
        },
        log_path=snakemake.log[0],
    )
