rule plan:
    """Draw the schedule once and record it; blocks read their arm from it. Redrawn only when the design
    changes (its params), not when another part of the experiment does (the resolved file is ancient)."""
    input:
        experiment=get_resolved_experiment_ancient,
    output:
        "results/{exp}/schedule.csv",
    params:
        design=get_design_params,
    log:
        "logs/{exp}/plan.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/plan.py"
