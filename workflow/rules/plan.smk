rule plan:
    """Draw the schedule once and record it; blocks read their arm from it."""
    output:
        "results/{exp}/schedule.csv",
    params:
        experiment=get_experiment_path,
        design=get_design_params,
    log:
        "logs/{exp}/plan.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/plan.py"
