# Physics first: the byte account and the ceiling need no server, so they run before the first
# block (priority above every block's) and never stop the article. With no headers to read, both
# files are still written, with status "unknown", the reason and the key that would give them.
# Both read the resolved experiment as ancient(): they rerun when the served model does (its files, its
# path), not when another part of the experiment changes.


rule weights:
    """Bytes per component and bytes read per token, from tensor headers wherever this host has them
    (a local directory or GGUF, the Hugging Face cache, a container path mapped through the launch's
    volumes, the hub's headers where it is reachable); see bracket.physics.modelsource."""
    input:
        get_engine_inputs,
        experiment=get_resolved_experiment_ancient,
    output:
        "results/{exp}/weights.json",
    params:
        model=get_model_param,
        root=rel(ROOT),
    priority: 2_000_000
    log:
        "logs/{exp}/weights.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/weights.py"


rule ceiling:
    """Decode ceiling = bandwidth / bytes per token, under each precision hypothesis."""
    input:
        "results/{exp}/weights.json",
        experiment=get_resolved_experiment_ancient,
    output:
        "results/{exp}/ceiling.json",
    priority: 2_000_000
    log:
        "logs/{exp}/ceiling.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/ceiling.py"
