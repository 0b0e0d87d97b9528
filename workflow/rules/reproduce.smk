# Reproduction, corrections and controls (seed 000: "reproduce it first"; seed 004: greedy agreement).
#
#   snakemake --cores 1 reproduce --config experiment=NAME cell=ARM[,WORKLOAD] runs=10 [id=ID]
#       a derived experiment NAME--repro-ID (reference, ARM, reference; `runs` runs per block) runs
#       through the ordinary plan/block/collect/analyze rules; its verdict appends to the ledger
#       experiments/NAME.corrections.yaml when a published figure does not hold; NAME's article is
#       re-rendered with it.
#   snakemake --cores 1 determinism --config experiment=NAME
#       the batch-1 vs batch-2 control, then NAME's article (also run by NAME itself when
#       controls.determinism is true).

include: "reproduce_inputs.smk"


rule reproduce:
    """Target: reproduce one cell (see the top of this file)."""
    input:
        get_reproduce_targets,


rule verdict:
    """Does the original figure hold? Both sessions' numbers, the verdict, and a ledger entry when not."""
    input:
        original=get_original_stats,
        reproduction="results/{exp}/stats.json",
        experiment=get_resolved_experiment_ancient,  # recorded once (reproduce.smk), judged once
    output:
        "results/{exp}/verdict.json",
    params:
        ledger=get_ledger_path,
    wildcard_constraints:
        exp=r"[A-Za-z0-9_-]+--repro-[A-Za-z0-9_-]+",
    log:
        "logs/{exp}/verdict.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/verdict.py"


rule agreement:
    """Greedy agreement: each arm's outputs against the reference arm's on the same prompts."""
    input:
        blocks=get_block_files,
        experiment=get_resolved_experiment,
    output:
        "results/{exp}/agreement.json",
    log:
        "logs/{exp}/agreement.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/agreement.py"


rule arena_summary:
    """The Spark Arena cell's window rate per arm (empty when no workload is of kind arena)."""
    input:
        blocks=get_block_files,
        experiment=get_resolved_experiment,
    output:
        "results/{exp}/arena.json",
    log:
        "logs/{exp}/arena.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/arena.py"


rule determinism_control:
    """Batch 1 vs batch 2 on the same request, each repeated, temperature 0, in a fresh server."""
    input:
        engine=get_engine_inputs,
        prompts=get_prompt_files,
        previous=get_last_block,
        experiment=get_resolved_experiment_ancient,
    output:
        "results/{exp}/determinism.json",
    params:
        python=get_engine_python,
        model=get_model_param,
        root=rel(ROOT),
    log:
        server="logs/{exp}/server/determinism.log",
        control="logs/{exp}/determinism.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/determinism.py"


rule determinism:
    """Target: the determinism control of --config experiment=NAME, and NAME's article with it."""
    input:
        get_determinism_targets,
