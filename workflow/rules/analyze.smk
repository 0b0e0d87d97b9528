checkpoint look:
    """An adaptive design's look after round r: judge every comparison on the blocks so far (repeated CIs,
    bracket.stats.sequential) and say whether another round runs. A checkpoint: the blocks of round r + 1
    enter the DAG only when this look asks for them; a rerun reads the recorded look instead."""
    input:
        schedule="results/{exp}/schedule.csv",
        blocks=get_look_blocks,
        experiment=get_resolved_experiment_ancient,
    output:
        "results/{exp}/looks/look-{r}.json",
    params:
        design=get_design_params,  # a changed plan (rounds, margin) judges again
    log:
        "logs/{exp}/looks/look-{r}.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/look.py"


rule collect:
    """Every raw record in one tidy table, with validity flags; warmups kept and marked. A record a crash cut short
    at the end of a block's file is left out, counted and named (torn_records.json, for the analysis and the
    article); a damaged line anywhere else stops it, naming the file, the line and the fix."""
    input:
        schedule="results/{exp}/schedule.csv",
        blocks=get_block_files,
    output:
        runs="results/{exp}/runs.csv",
        attempts="results/{exp}/failed_attempts.json",
        neutrality="results/{exp}/neutrality.csv",
        torn="results/{exp}/torn_records.json",
    log:
        "logs/{exp}/collect.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/collect.py"


rule analyze:
    """Summaries, drift, comparisons, speculative readings, the measurement against the ceiling, guards; and
    the experiment, byte account and ceiling as the article states them, and what ran (the blocks' provenance,
    the failed attempts, the model and its build record): stats.json holds all the article says.
    Runs again whenever the resolved experiment changes (its thresholds, arms, labels)."""
    input:
        "results/{exp}/runs.csv",
        ceiling="results/{exp}/ceiling.json",
        weights="results/{exp}/weights.json",
        schedule="results/{exp}/schedule.csv",
        neutrality="results/{exp}/neutrality.csv",
        metas=get_block_meta_files,
        attempts="results/{exp}/failed_attempts.json",
        torn="results/{exp}/torn_records.json",
        model_build=get_model_build,
        experiment=get_resolved_experiment,
    output:
        "results/{exp}/stats.json",
    params:
        model_dir=get_model_param,
    log:
        "logs/{exp}/analyze.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/analyze.py"


rule arms_measured:
    """The experiment's last step, after its article: fails, naming them, when an arm has no valid run, so
    the invocation exits non-zero while the article (which names no winner then) and every record stay."""
    input:
        runs="results/{exp}/runs.csv",
        article="report/{exp}/article.html",
        experiment=get_resolved_experiment,
    output:
        "results/{exp}/arms_measured.json",
    log:
        "logs/{exp}/arms_measured.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/arms_measured.py"
