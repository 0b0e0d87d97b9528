rule report:
    """The article: papermill runs the notebook on stats.json (every number and judgement, and the experiment, byte
    account, ceiling and what ran as it states them), runs.csv (the raw tables), the blocks' records (the outputs'
    excerpts) and the controls; HTML and Markdown without code. No experiment file, weights.json, ceiling.json,
    block meta, failed_attempts.json or build.json is handed to it: the analyze rule read them into stats.json."""
    input:
        notebook=rel(SOURCE / "notebooks/article.ipynb"),
        runs="results/{exp}/runs.csv",
        stats="results/{exp}/stats.json",
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
        corrections=get_corrections_path,
        verdicts_done=get_report_verdicts_done,
    log:
        "logs/{exp}/report.log",
    conda:
        "../envs/bracket.yaml"
    script:
        "../scripts/render_report.py"
