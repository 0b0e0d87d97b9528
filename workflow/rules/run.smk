localrules:
    block_settings,


rule block_settings:
    """What block k measures, as a file: rewritten only when it changes, which reruns that block.

    A file rather than a params: entry, because Snakemake does not check the params of a job whose
    (ancient) predecessor is itself rerunning; with a file, changing two arms reruns both at once.

    The block reads the whole resolved experiment (get_resolved_experiment), never this file: this is the
    part of it that decides whether block k is still what the experiment asks, stated without the schema's
    defaults (a release that adds a key with a default reruns no finished block) and without the arm's
    label (it names the arm in the article; it measures nothing). The resolved file changes with any edit
    of the experiment (another arm, the title), so it cannot be the trigger; this file, one per block,
    cannot be what the block runs, since it leaves out what equals a default."""
    output:
        "results/{exp}/settings/block-{k}.json",
    params:
        block=get_block_params,
    priority: get_settings_priority
    log:
        "logs/{exp}/settings/block-{k}.log",
    run:
        Path(output[0]).write_text(f"{params.block}\n")


rule block:
    """One block: a fresh server for its arm, warmups, timed requests, teardown."""
    input:
        schedule="results/{exp}/schedule.csv",
        settings="results/{exp}/settings/block-{k}.json",  # the trigger (rule block_settings)
        experiment=get_resolved_experiment_ancient,  # what the block runs
        engine=get_engine_inputs,
        prompts=get_prompt_files,
    output:
        raw="results/{exp}/raw/block-{k}.jsonl",
        meta="results/{exp}/raw/block-{k}.meta.json",
    params:
        python=get_engine_python,
        model=get_model_param,
        root=rel(ROOT),
    priority: get_block_priority
    group:
        get_block_group
    log:
        server="logs/{exp}/server/block-{k}.log",
        block="logs/{exp}/block/block-{k}.log",
    resources:
        gpu=get_block_gpus,
        cpus_per_task=get_block_cpus,
        mem_mb=get_block_mem_mb,
        runtime=get_block_runtime,
        exclusive_host=get_block_exclusive,
        host=get_block_host,
        slurm_extra=get_block_slurm_extra,
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/run_block.py"
