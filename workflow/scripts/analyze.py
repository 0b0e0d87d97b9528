"""Statistics of runs.csv into stats.json (snakemake rule `analyze`)."""

import json
import sys
from pathlib import Path

import pandas as pd
from bracket import records
from bracket.engines import provenance
from bracket.experiment import resolved
from bracket.rulelog import rule_log
from bracket.stats import analyze
from bracket.stats.load import step as load_step

with rule_log(snakemake.log[0]) as log:
    experiment = resolved.read(snakemake.input.experiment)
    runs = pd.read_csv(snakemake.input[0])
    why = records.nothing_valid(runs, where=snakemake.input[0])
    if why:
        # The reason first; the records stay (raw/ and runs.csv), and no article presents nothing as a result.
        exp = snakemake.wildcards.exp
        print(
            f"\n{why}\nEvery record is kept in {snakemake.input[0]} and beside it in raw/. Finished blocks are "
            f"not measured again: once the cause is fixed, measure them anew with\n  snakemake --cores 1 "
            f"report/{exp}/article.html --forcerun block\n",
            file=sys.stderr,
        )
        sys.exit(1)
    with open(snakemake.input.ceiling) as f:
        ceiling = json.load(f)
    with open(snakemake.input.weights) as f:
        weights = json.load(f)
    schedule = pd.read_csv(snakemake.input.schedule)
    path = getattr(snakemake.input, "neutrality", None)
    control = pd.read_csv(path) if path else None
    # each block's provenance (its number from the file's name where a meta lacks it; the server state its
    # engine's adapter reads from the launch command where the block recorded none), the attempts set aside
    # in raw/failed/ (rule collect) and the served model's build record where the workflow built it
    metas = provenance.read_block_metas(getattr(snakemake.input, "metas", []), experiment)
    attempts = json.loads(Path(snakemake.input.attempts).read_text())
    torn = json.loads(Path(snakemake.input.torn).read_text())  # records a crash cut short (rule collect)
    model_dir = str(snakemake.params.model_dir or "") or None
    build = next(iter(getattr(snakemake.input, "model_build", [])), None)  # declared only where the workflow built it
    stats = analyze(
        runs,
        experiment,
        ceiling,
        control if control is not None and len(control) else None,
        metas=metas,
        weights=weights,
        schedule=schedule,
        name=snakemake.wildcards.exp,
        failed_attempts=attempts,
        torn_records=torn,
        model_dir=model_dir,
        model_build=json.loads(Path(build).read_text()) if build else None,
    )
    # the load workloads' statistics from the raw records beside the metas (their records are not runs); no key
    # where the experiment has no load workload
    load = load_step.from_metas(experiment, snakemake.input.metas, ceiling)
    stats = stats if load is None else stats.model_copy(update={"load": load})
    with open(snakemake.output[0], "w") as f:  # the typed results as JSON (bracket.stats.results.Stats.data)
        json.dump(stats.data(), f, indent=1, allow_nan=False)
    log.info("stats of %s written to %s", snakemake.input[0], snakemake.output[0])
