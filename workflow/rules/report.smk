rule report:
    """The article: papermill runs the notebook on stats.json (every number and judgement, and the experiment, byte
    account and ceiling as it states them), runs.csv (the raw tables), the blocks' records and provenance and the
    controls; HTML and Markdown without code. No experiment file, weights.json or ceiling.json is handed to it."""
    input:
        notebook="notebooks/article.ipynb",
        runs="results/{exp}/runs.csv",
        stats="results/{exp}/stats.json",
        blocks=get_block_files,
        metas=get_block_meta_files,
        attempts="results/{exp}/failed_attempts.json",
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
        corrections=get_corrections_path,
        model_dir=get_model_param,
        verdicts_done=get_report_verdicts_done,
    log:
        "logs/{exp}/report.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/render_report.py"
