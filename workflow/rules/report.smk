rule report:
    """The article: papermill runs the notebook on this experiment's files; HTML and Markdown without code."""
    input:
        notebook="notebooks/article.ipynb",
        runs="results/{exp}/runs.csv",
        stats="results/{exp}/stats.json",
        weights="results/{exp}/weights.json",
        ceiling="results/{exp}/ceiling.json",
        schedule="results/{exp}/schedule.csv",
        blocks=get_block_files,
        agreement="results/{exp}/agreement.json",
        arena="results/{exp}/arena.json",
        determinism=get_report_determinism,
        verdict=get_report_verdict,
        ledger=get_report_ledger,
    output:
        html="report/{exp}/article.html",
        md="report/{exp}/article.md",
        ipynb="report/{exp}/article.ipynb",
    params:
        experiment=get_experiment_path,
        corrections=get_corrections_path,
    log:
        "logs/{exp}/report.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/render_report.py"
