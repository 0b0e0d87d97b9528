rule block:
    """One block: a fresh server for its arm, warmups, timed requests, teardown."""
    input:
        schedule="results/{exp}/schedule.csv",
        engine=get_engine_inputs,
        prompts=get_prompt_files,
        previous=get_previous_block,
    output:
        raw="results/{exp}/raw/block-{k}.jsonl",
        meta="results/{exp}/raw/block-{k}.meta.json",
    params:
        experiment=get_experiment_path,
        block=get_block_params,
        python=get_engine_python,
        model=get_model_param,
        root=str(ROOT),
    log:
        server="logs/{exp}/server/block-{k}.log",
    resources:
        gpu=get_block_gpus,
        mem_mb=get_block_mem_mb,
        runtime=get_block_runtime,
        exclusive_host=get_block_exclusive,
        host=get_block_host,
        slurm_extra=get_block_slurm_extra,
    script:
        "../scripts/run_block.py"
