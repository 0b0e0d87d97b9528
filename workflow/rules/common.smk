import json
import os
import sys
from functools import lru_cache
from pathlib import Path

# Two folders, the same one in a clone run where it stands: SOURCE holds the workflow's own files (the rules,
# scripts, envs, schemas, notebooks: this file is SOURCE/workflow/rules/common.smk, wherever the Snakefile that
# included it lies: a clone, a `bracket workflow` copy, the local clone a `module` directive names), and ROOT,
# the working directory, holds the experiments and what they make (experiments/, results/, report/, resources/):
# a deployed workflow (snakedeploy, `module`) keeps its experiments and results in its own folder.
try:
    SOURCE = Path(workflow.current_basedir).parents[1]
except TypeError:
    print(
        f"\nbracket's workflow runs from a local clone or copy, not from {workflow.current_basedir}: clone the "
        "repository and name its workflow/Snakefile by path in the module directive (config/README.md).\n",
        file=sys.stderr,
    )
    raise SystemExit(1)
sys.path.insert(0, str(SOURCE / "workflow"))

from bracket import embedded  # noqa: E402
from bracket.experiment import config as bconfig  # noqa: E402
from bracket.experiment import design as bdesign  # noqa: E402
from bracket.controls import reproduce as breproduce  # noqa: E402
from bracket.experiment import preflight as bpreflight  # noqa: E402
from bracket.experiment import resolved as bresolved  # noqa: E402
from bracket.experiment import schema as bschema  # noqa: E402
from bracket import share as bshare  # noqa: E402
from bracket.cluster import placement as bplacement  # noqa: E402
from bracket.cluster import slurm_names, slurm_status  # noqa: E402

# Jobs import the package this Snakefile runs, also in an environment where it is not installed (--sdm conda:
# workflow/envs/bracket.yaml holds its dependencies): the clone's workflow/, or a folder holding only the
# installed package (bracket.share.job_pythonpath).
os.environ.update(
    PYTHONPATH=os.pathsep.join(p for p in (str(bshare.job_pythonpath(Path.cwd())), os.environ.get("PYTHONPATH")) if p)
)

# A SLURM job that ends CANCELLED, PREEMPTED, TIMEOUT or NODE_FAIL ends the wait for it, with the state
# and the command to resume (bracket.cluster.slurm_status: executor plugin 2.8.0 misses "CANCELLED by UID").
slurm_status.install(workflow)
# SLURM job names say the experiment and the block (smoke.block3.RUNID), not the plugin's bare run UUID.
slurm_names.install()

ROOT = Path.cwd()
EXPERIMENTS = sorted(
    p.stem for p in (ROOT / "experiments").glob("*.yaml") if not p.stem.endswith(".corrections")
)
ENGINE_VENV = embedded.ENGINE_VENV
TRAINER_VENV = embedded.TRAINER_VENV


def rel(path):
    """`path` relative to the working directory when it lies inside it: params and inputs must not hold the
    checkout's absolute location, or moving the checkout would rerun every job (Snakemake's params trigger)."""
    path = Path(path)
    try:
        return os.path.relpath(path, Path.cwd()) if path.resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:
        return str(path)


def stop_with(message):
    """End the invocation with `message` alone: a bad experiment is the user's to fix, not a traceback."""
    print(f"\n{message}\n", file=sys.stderr)
    raise SystemExit(1)


def experiment_target(name):
    """The files `snakemake NAME` builds; for a file whose name cannot be an experiment's, the naming rule."""
    problem = bconfig.name_problem("experiment", name)
    if problem is None:
        return [f"report/{name}/article.html", f"report/{name}/article.md", f"results/{name}/arms_measured.json"]

    def refuse(wildcards):
        stop_with(f"experiments/{name}.yaml: {problem}")

    return refuse


NAMED_AS_RULES = set()  # experiment files named after a rule (filled by the Snakefile's targets)


def rule_name_problem(name):
    """Why an experiment cannot be named after one of the workflow's rules (its target would be that rule)."""
    return (f"experiment name {name!r} is the name of one of the workflow's rules (workflow/rules/), so "
            f"`snakemake {name}` would run that rule, not the experiment; rename the file (for example "
            f"experiments/{name}_run.yaml).")


wildcard_constraints:
    exp="[A-Za-z0-9_-]+",
    k=r"\d+",
    r=r"\d+",


@lru_cache(maxsize=None)
def load_experiment(exp):
    """The validated experiment (a frozen bracket.typed.experiment.Experiment); a bad file stops the DAG
    before any server starts. Written to results/NAME/experiment.resolved.json (get_resolved_experiment).

    A derived experiment (NAME--repro-ID, see reproduce.smk) resolves to its recorded configuration.
    """
    if breproduce.is_derived(exp):
        experiment = load_reproduction(exp)
    else:
        if exp in NAMED_AS_RULES:
            stop_with(f"experiments/{exp}.yaml: {rule_name_problem(exp)}")
        try:
            experiment = bconfig.load(ROOT / "experiments" / f"{exp}.yaml")
            bconfig.check_prompt_files(
                experiment, ROOT, source=f"experiments/{exp}.yaml", model_dir=embedded.model_dir(experiment)
            )
        except bconfig.ExperimentError as exc:
            stop_with(exc)
        check_before_blocks(experiment, exp, f"experiments/{exp}.yaml")
    if resolved_is_written(exp):
        bresolved.write(experiment, resolved_path(exp))
    return experiment


def resolved_path(exp):
    return ROOT / "results" / exp / bresolved.FILE_NAME


def resolved_is_written(exp):
    """A dry run of a reproduction not yet set up records nothing (load_reproduction), its resolved file neither."""
    return not (workflow.dryrun and breproduce.is_derived(exp) and not breproduce.experiment_path(ROOT, exp).is_file())


def get_resolved_experiment(wildcards):
    """results/NAME/experiment.resolved.json: the experiment as the DAG validated it, what every script reads
    (bracket.experiment.resolved.read) instead of validating the YAML again.

    Written here, when the DAG is built, and only when its content changes; never by a rule. A rule that
    wrote it would stand upstream of every block, and Snakemake 9.27 skips every check of a job downstream
    of one that reruns, ancient() inputs included (snakemake/dag.py, update_needrun's masking): each edit of
    the experiment would silently drop a block's --forcerun, its missing output and its params trigger for
    that invocation. As a file no job makes, it triggers only the rules that take it as a plain input
    (the analysis and what follows it); the blocks, the plan and the physics take it as ancient() and
    rerun by their own triggers (block_settings, get_design_params). A comment or reformatting in the
    YAML changes nothing in it, and a moved checkout keeps it as it was: both rerun nothing. A dry run writes
    it too, so the jobs it lists are the ones a run would run (a reproduction not yet set up excepted)."""
    load_experiment(wildcards.exp)
    return rel(resolved_path(wildcards.exp)) if resolved_is_written(wildcards.exp) else []


def get_resolved_experiment_ancient(wildcards):
    """The resolved experiment as an ancient() input: read, never a trigger (get_resolved_experiment)."""
    path = get_resolved_experiment(wildcards)
    return ancient(path) if path else []


def check_before_blocks(experiment, exp, source):
    """Model, mounts and engine program, checked in seconds when blocks remain to run (bracket.experiment.preflight);
    a finished experiment re-renders without them."""
    blocks = bdesign.from_config(experiment, finished_rounds(exp) if bdesign.is_adaptive(experiment) else None)
    if all((ROOT / f"results/{exp}/raw/block-{b.position}.jsonl").is_file() for b in blocks):
        return
    problems = bpreflight.problems(experiment, ROOT)
    if problems:
        raise bconfig.ExperimentError(f"{source}: cannot run on this host:\n  - " + "\n  - ".join(problems))


def get_corrections_path(wildcards):
    """The experiment's corrections ledger (may not exist yet)."""
    return rel(ROOT / "experiments" / f"{wildcards.exp}.corrections.yaml")


@lru_cache(maxsize=None)
def get_blocks(exp):
    return bdesign.from_config(load_experiment(exp))


def get_block_files(wildcards):
    """Every block the experiment runs; for an adaptive design, the rounds its looks asked for (checkpoint `look`)."""
    experiment = load_experiment(wildcards.exp)
    if not bdesign.is_adaptive(experiment):
        return [f"results/{wildcards.exp}/raw/block-{b.position}.jsonl" for b in get_blocks(wildcards.exp)]
    r = int(experiment.design.min_rounds)
    while True:
        with open(checkpoints.look.get(exp=wildcards.exp, r=r).output[0]) as f:
            if not json.load(f)["another_round"]:
                break
        r += 1
    return [f"results/{wildcards.exp}/raw/block-{b.position}.jsonl" for b in bdesign.from_config(experiment, r)]


def get_look_blocks(wildcards):
    """The blocks of the first r rounds: what the look after round r judges."""
    experiment = load_experiment(wildcards.exp)
    return [f"results/{wildcards.exp}/raw/block-{b.position}.jsonl"
            for b in bdesign.from_config(experiment, int(wildcards.r))]


def finished_rounds(exp):
    """Rounds after which a recorded look stopped an adaptive design; None while it is not finished."""
    looks = ROOT / f"results/{exp}/looks"
    for path in sorted(looks.glob("look-*.json")) if looks.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not doc.get("another_round", True):
            return int(doc["rounds_run"])
    return None


def get_block_meta_files(wildcards):
    """Each block's provenance, written beside its records by the same job."""
    return [f.replace(".jsonl", ".meta.json") for f in get_block_files(wildcards)]


def get_design_params(wildcards):
    experiment = load_experiment(wildcards.exp)
    hosts = {"hosts": list(experiment.hosts)} if experiment.hosts else {}
    return json.dumps({"arms": list(experiment.arms), "reference": experiment.reference,
                       "design": bconfig.as_data(experiment.design), **hosts}, sort_keys=True)


def get_block_params(wildcards):
    """Everything a block's measurement depends on; a change reruns only the blocks it touches."""
    experiment = load_experiment(wildcards.exp)
    blocks = get_blocks(wildcards.exp)
    k = int(wildcards.k)
    if k >= len(blocks):
        raise ValueError(f"experiment {wildcards.exp} has {len(blocks)} blocks; there is no block {k}")
    b = blocks[k]
    d = experiment.design
    explicit = bconfig.without_defaults
    return json.dumps({
        "arm": b.arm,
        "arm_config": {k: v for k, v in explicit(experiment.arms[b.arm], bschema.schema_of("arms", "*")).items()
                       if k != "label"},  # a label names the arm in the article; it measures nothing
        "round": b.round, "seed": b.seed,
        "engine": explicit(experiment.engine, bschema.schema_of("engine")),
        "request": explicit(experiment.request, bschema.schema_of("request")),
        "workloads": explicit(bconfig.as_data(experiment.workloads), bschema.schema_of("workloads")),
        "runs_per_block": d.runs_per_block, "warmup_runs": d.warmup_runs, "cooldown_s": d.cooldown_s,
        **({"host": b.host} if b.host else {}),
    }, sort_keys=True)


def get_model_dir(exp):
    return embedded.model_dir(load_experiment(exp))


def get_model_param(wildcards):
    return get_model_dir(wildcards.exp)


def get_model_build(wildcards):
    """The embedded vLLM model's build record (the trainer writes it); none for a GGUF or a model of your own."""
    experiment = load_experiment(wildcards.exp)
    if experiment.engine.embedded and experiment.engine.kind == "vllm":
        return [f"{get_model_dir(wildcards.exp)}/build.json"]
    return []


def get_engine_inputs(wildcards):
    experiment = load_experiment(wildcards.exp)
    build = [embedded.LLAMACPP_BUILD] if embedded.uses_llamacpp_build(experiment) else []
    drafts = {(a.speculative.model if a.speculative else None) or "" for a in experiment.arms.values()}
    if not experiment.engine.embedded:
        # a synthetic GGUF the workflow writes (rule synthetic_gguf), served or named as a draft
        return build + sorted({m for m in {experiment.engine.model, *drafts} if embedded.is_synthetic(m)})
    if experiment.engine.kind == "llamacpp":
        # the embedded model as GGUF, and any embedded-style draft model an arm names
        return build + [get_model_dir(wildcards.exp)] + sorted(d for d in drafts if embedded.is_embedded_gguf(d))
    return [f"{ENGINE_VENV}/.installed", f"{get_model_dir(wildcards.exp)}/build.json"]


def get_prompt_files(wildcards):
    return sorted({wl.prompts for wl in load_experiment(wildcards.exp).workloads.values()})


def get_engine_python(wildcards):
    return embedded.engine_python(load_experiment(wildcards.exp))


def get_block_priority(wildcards):
    """Blocks run in schedule order: with --cores 1 Snakemake starts the highest priority first.

    Not an input chain to the block before: Snakemake 9.27 skips the rerun checks of every job
    downstream of a job that reruns, even through ancient() inputs, so changing two arms would
    rerun only the first (snakemake/dag.py, update_needrun's masking). Blocks never overlap
    anyway: each takes its host's port lock (bracket.measure.session.port_lock), and the profiles cap
    exclusive_host at 1. A reproduction's blocks come after every block of its base experiment.
    """
    base = 1_000_000 if not breproduce.is_derived(wildcards.exp) else 500_000
    return base - 2 * int(wildcards.k)


def get_settings_priority(wildcards):
    """Just above its block's, so a block's settings file never waits behind later blocks."""
    return get_block_priority(wildcards) + 1


# ---- placement: what one block asks of an executor (workflow/profiles/README.md) ----------


def get_block_host(wildcards):
    """The named host block k is pinned to; "" when the experiment names no hosts."""
    blocks = get_blocks(wildcards.exp)
    k = int(wildcards.k)
    return blocks[k].host if k < len(blocks) else ""


def get_block_gpus(wildcards):
    return load_experiment(wildcards.exp).cluster.gpus


def get_block_mem_mb(wildcards):
    return load_experiment(wildcards.exp).cluster.mem_mb


def get_block_runtime(wildcards):
    return load_experiment(wildcards.exp).cluster.runtime_min


def get_block_exclusive(wildcards):
    """1 when the block wants its host to itself (cluster.exclusive true or user): the profiles cap it at 1."""
    return int(bplacement.exclusive_mode(load_experiment(wildcards.exp).cluster) != "none")


def get_block_cpus(wildcards):
    return bplacement.cpus_per_task(load_experiment(wildcards.exp).cluster)


def get_block_slurm_extra(wildcards):
    return bplacement.slurm_extra(load_experiment(wildcards.exp).cluster, get_block_host(wildcards))


def get_block_group(wildcards):
    """With cluster.allocation per_host, the group of the block's host: a cluster executor then runs the
    host's blocks in one job, one after the other in schedule order (their priorities), so the gaps
    between them are the design's cooldowns, not the scheduler's. The profile's `group-components:
    {blocks: N}` joins up to N blocks of one group into one job; every group of blocks is registered
    under the name `blocks` for that key (as Snakemake registers a group named with wildcards)."""
    if load_experiment(wildcards.exp).cluster.allocation != "per_host":
        return None
    group = f"blocks-{wildcards.exp}-{get_block_host(wildcards) or 'any'}"
    workflow.parent_groupids[group] = "blocks"
    return group


# ---- a plain `snakemake`: the configured experiments, or the targets printed (rule all in the Snakefile) ----
def configured_experiments():
    """The experiments config's `experiments` names (a list of names of experiments/NAME.yaml): what a plain
    `snakemake` runs. A name without its file stops the DAG, naming the key and the files there are."""
    names = config.get("experiments") or []
    if isinstance(names, str):
        names = [names]
    missing = [n for n in names if str(n) not in EXPERIMENTS]
    if missing:
        stop_with(
            f"config `experiments` names {', '.join(map(str, missing))}, which is not a file experiments/NAME.yaml "
            f"in {ROOT}; the experiments there: {', '.join(EXPERIMENTS) or 'none'}. Fix the name in "
            "config/config.yaml (or --config experiments=NAME), or add the file."
        )
    for n in names:
        problem = bconfig.name_problem("experiment", str(n))
        if problem is not None:
            stop_with(f"config `experiments` names experiments/{n}.yaml: {problem}")
    return [str(n) for n in names]


def experiment_title(name):
    import yaml

    try:
        return str((yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text()) or {}).get("title") or "")
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return ""


def targets_text():
    """What a plain `snakemake` prints when the config names no experiment: the targets and how to run them."""
    width = max((len(n) for n in EXPERIMENTS), default=0)
    lines = [
        "",
        "bracket measures nothing without a target. The targets, one per experiment file in "
        f"{rel(ROOT / 'experiments') if EXPERIMENTS else ROOT / 'experiments'}/:",
        *(f"  {n:<{width}}  {experiment_title(n)}" for n in EXPERIMENTS),
        "",
        "Run one (its article: report/NAME/article.html):   snakemake --cores 1 NAME",
        "See what it would run first:                      snakemake -n NAME",
        "Or name the experiments a plain `snakemake` runs:  experiments: [NAME] in config/config.yaml",
        "",
    ]
    return "\n".join(lines)
