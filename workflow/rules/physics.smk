rule weights:
    """Bytes per component and bytes read per token, from safetensors headers."""
    input:
        get_engine_inputs,
    output:
        "results/{exp}/weights.json",
    params:
        experiment=get_experiment_path,
        model=get_model_param,
    log:
        "logs/{exp}/weights.log",
    script:
        "../scripts/weights.py"


rule ceiling:
    """Decode ceiling = bandwidth / bytes per token, under each precision hypothesis."""
    input:
        "results/{exp}/weights.json",
    output:
        "results/{exp}/ceiling.json",
    params:
        experiment=get_experiment_path,
    log:
        "logs/{exp}/ceiling.log",
    script:
        "../scripts/ceiling.py"
