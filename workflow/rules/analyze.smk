rule collect:
    """Every raw record in one tidy table, with validity flags; warmups kept and marked."""
    input:
        schedule="results/{exp}/schedule.csv",
        blocks=get_block_files,
    output:
        runs="results/{exp}/runs.csv",
        attempts="results/{exp}/failed_attempts.json",
    params:
        experiment=get_experiment_path,
    log:
        "logs/{exp}/collect.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/collect.py"


rule analyze:
    """Summaries, drift, comparisons, speculative readings, the measurement against the ceiling, guards."""
    input:
        "results/{exp}/runs.csv",
        ceiling="results/{exp}/ceiling.json",
    output:
        "results/{exp}/stats.json",
    params:
        experiment=get_experiment_path,
    log:
        "logs/{exp}/analyze.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/analyze.py"
