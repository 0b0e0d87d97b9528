# bracket: one experiment file, one command.
#   snakemake --cores 1 draft_sweep            -> report/draft_sweep/article.html
#   snakemake                                  -> the targets, one per experiment, and how to run them
# Rules declare; the package (workflow/bracket) computes; notebooks present. workflow/Snakefile, the workflow
# catalog's entry (and a module's), includes this file.

import os

from snakemake.utils import min_version

min_version("9.0")


# config/config.yaml (config/README.md): `experiments`, what a plain `snakemake` runs. A deployment's
# Snakefile (snakedeploy, a module directive) reads its own and hands it over.
if os.path.exists("config/config.yaml"):

    configfile: "config/config.yaml"


# ---- helpers and experiment loading -----------------------------------------------------
include: "workflow/rules/common.smk"
# A run killed outright (kill -9) leaves Snakemake's locks and marks: the next plain run clears the stale
# ones and keeps every block that finished (bracket.rerun); the profile's rerun-incomplete reruns the rest.
if workflow.is_main_process:
    from bracket import rerun as brerun

    brerun.recover()
# ---- plan: the schedule, drawn once and recorded ----------------------------------------
include: "workflow/rules/plan.smk"
# ---- the embedded engine: vLLM CPU venv and the tiny model it serves --------------------
include: "workflow/rules/engine.smk"
# ---- physics: bytes per token and the decode ceiling ------------------------------------
include: "workflow/rules/physics.smk"
# ---- blocks: launch, bracketed runs, raw records ----------------------------------------
include: "workflow/rules/run.smk"
# ---- collect and analyze ----------------------------------------------------------------
include: "workflow/rules/analyze.smk"
# ---- reproduction, corrections ledger, determinism and agreement controls, arena cell ----
include: "workflow/rules/reproduce.smk"
# ---- the article -------------------------------------------------------------------------
include: "workflow/rules/report.smk"


# ---- targets: one per experiment file, named after it --------------------------------------
rule all:
    """A plain `snakemake`: the experiments config/config.yaml names (`experiments`); with none named, as
    shipped, it measures nothing and prints the targets (targets_text)."""
    default_target: True
    localrule: True
    input:
        [f for n in configured_experiments() for f in experiment_target(n)],
    log:
        "logs/targets.log",
    run:
        if not input:
            Path(log[0]).write_text(targets_text() + "\n")
            print(targets_text())


for _name in EXPERIMENTS:
    if workflow.is_rule(_name):  # experiments/report.yaml: refused by name, every other target still works
        NAMED_AS_RULES.add(_name)
        print(f"experiments/{_name}.yaml: {rule_name_problem(_name)}", file=sys.stderr)
        continue

    rule:
        name:
            _name
        input:
            experiment_target(_name),
