# Inputs of the reproduction and control rules (reproduce.smk): which reproduction this invocation
# asks for, and the functions its rules call. Kept apart from the rules, as `snakemake --lint` asks.

REPRODUCTION = breproduce.request_from_config(config)
# `--config experiment=NAME` without a cell asks for NAME's controls (the determinism target).
CONTROLS_FOR = None if "cell" in config else config.get("experiment")


def load_reproduction(exp):
    """A derived experiment's configuration: derived now (and recorded once) when this invocation asks
    for it, else read from results/NAME--repro-ID/experiment.yaml."""
    path = breproduce.experiment_path(ROOT, exp)
    if REPRODUCTION is not None and REPRODUCTION.name == exp:
        r = REPRODUCTION
        derived = breproduce.derive(load_experiment(r.base), r.base, r.arm, r.workloads, r.runs, r.ident)
        if workflow.dryrun and not path.is_file():  # validated as the recorded file would be, and not recorded
            try:
                return bconfig.validate(bconfig.as_data(derived), source=rel(path))
            except bconfig.ExperimentError as exc:
                stop_with(exc)
        breproduce.record(derived, path)
    if not path.is_file():
        raise breproduce.ReproduceError(
            f"{exp} is a reproduction that was never set up ({path} does not exist); start it with "
            f"snakemake --cores 1 reproduce --config experiment={breproduce.base_of(exp)} cell=ARM[,WORKLOAD] "
            f"runs=10 id={exp.split(breproduce.SEP, 1)[1]}")
    try:
        experiment = bconfig.load(path)
        bconfig.check_prompt_files(experiment, ROOT, source=rel(path), model_dir=embedded.model_dir(experiment))
    except bconfig.ExperimentError as exc:
        stop_with(exc)
    return experiment


def get_reproduce_targets(wildcards):
    if REPRODUCTION is None:
        raise breproduce.ReproduceError(
            "the reproduce target needs the cell: snakemake --cores 1 reproduce --config experiment=NAME "
            "cell=ARM[,WORKLOAD] runs=10 [id=ID]")
    r = REPRODUCTION
    return [f"results/{r.name}/verdict.json", f"report/{r.base}/article.html", f"report/{r.base}/article.md"]


def get_determinism_targets(wildcards):
    if not CONTROLS_FOR:
        raise breproduce.ReproduceError("the determinism target needs the experiment: snakemake --cores 1 "
                                        "determinism --config experiment=NAME")
    return [f"results/{CONTROLS_FOR}/determinism.json", f"report/{CONTROLS_FOR}/article.html"]


def get_original_stats(wildcards):
    # ancient: the verdict judges the figures as published then; a later rerun of the base does not
    # re-judge an old reproduction.
    return ancient(f"results/{breproduce.base_of(wildcards.exp)}/stats.json")


def get_ledger_path(wildcards):
    return rel(ROOT / "experiments" / f"{breproduce.base_of(wildcards.exp)}.corrections.yaml")


def get_report_verdict(wildcards):
    """The verdict of the reproduction asked for now, so the base's article is rendered after it."""
    r = REPRODUCTION
    return [f"results/{r.name}/verdict.json"] if r is not None and r.base == wildcards.exp else []


def get_report_verdicts_done(wildcards):
    """Earlier reproductions' verdicts on this experiment, named to the report as params, not inputs:
    as inputs they would put their 10-run jobs back into the DAG, to be rerun on any code change."""
    found = (ROOT / "results").glob(f"{wildcards.exp}{breproduce.SEP}*/verdict.json")
    return sorted(rel(p) for p in found)


def get_report_ledger(wildcards):
    """The ledger, when it exists, so an entry added by hand re-renders the article."""
    p = ROOT / "experiments" / f"{wildcards.exp}.corrections.yaml"
    return [rel(p)] if p.is_file() else []


def get_report_determinism(wildcards):
    wanted = load_experiment(wildcards.exp).controls.determinism or CONTROLS_FOR == wildcards.exp
    return [f"results/{wildcards.exp}/determinism.json"] if wanted else []


def get_last_block(wildcards):
    """Controls run after the last block, so they never sit between the bracketed blocks."""
    blocks = get_blocks(wildcards.exp)
    return ancient(f"results/{wildcards.exp}/raw/block-{blocks[-1].position}.jsonl")
