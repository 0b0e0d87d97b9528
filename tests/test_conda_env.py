"""The rules' conda environment (workflow/envs/bracket.yaml) holds everything their scripts import, pinned as
pyproject.toml and env.yaml pin it: every third-party top-level import of workflow/bracket and workflow/scripts
maps (through the installed distributions' own records) to a package listed there, or to one a listed package
requires; and, where conda, mamba or micromamba is on PATH, `snakemake --sdm conda` runs the CI's experiment
(.test) to an article inside it."""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "workflow" / "envs" / "bracket.yaml"
SOURCES = (ROOT / "workflow" / "bracket", ROOT / "workflow" / "scripts")
# Imports that run in another environment than the rules', each with the files allowed to make them.
ELSEWHERE = {
    "torch": (
        "the trainer's environment (workflow/envs/trainer.txt), or a GPU host's for the copy probe",
        {"workflow/bracket/embedded/build_model.py", "workflow/bracket/physics/bandwidth.py"},
    ),
    "transformers": (
        "the trainer's environment (workflow/envs/trainer.txt)",
        {"workflow/bracket/embedded/build_model.py"},
    ),
    "conversion": (
        "llama.cpp's converter, from its source tree in the trainer's environment",
        {"workflow/bracket/embedded/to_gguf.py"},
    ),
    "snakemake_executor_plugin_slurm": (
        "the snakemake process with the SLURM executor (pyproject's dev extra), never a job",
        {
            "workflow/bracket/cluster/slurm_names.py",
            "workflow/bracket/cluster/slurm_partitions.py",
            "workflow/bracket/cluster/slurm_status.py",
        },
    ),
}
# pyproject.toml's dependencies that the rules' environment leaves out, and why.
NOT_FOR_RULES = {"jupyterlab": "opening the notebooks by hand; no rule runs it"}


def pins(lines) -> dict[str, str]:
    """{canonical name: version} of `name==version` lines."""
    out = {}
    for line in lines:
        if isinstance(line, str) and "==" in line:
            name, v = line.split("==", 1)
            out[canonicalize_name(name.strip())] = v.strip()
    return out


def conda_pip(path: Path) -> list:
    deps = yaml.safe_load(path.read_text())["dependencies"]
    return next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)


def third_party_imports() -> dict[str, set[str]]:
    """{top-level module: the files importing it} over the package and the scripts (in functions too)."""
    found: dict[str, set[str]] = {}
    for base in SOURCES:
        for p in base.rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text(), str(p))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in ("bracket", "__future__"):
                        found.setdefault(top, set()).add(p.relative_to(ROOT).as_posix())
    return found


def requires_closure(names: set[str]) -> set[str]:
    """The distributions `names` install, with everything they require (their installed metadata), extras aside."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or "extra" not in str(r.marker) and r.marker.evaluate():
                todo.append(canonicalize_name(r.name))
    return seen


def test_the_env_holds_every_package_the_rules_scripts_import():
    listed = set(pins(conda_pip(ENV)))
    installs = requires_closure(listed)
    dists = md.packages_distributions()
    problems = []
    for module, files in sorted(third_party_imports().items()):
        if module in ELSEWHERE:
            stray = files - ELSEWHERE[module][1]
            if stray:
                problems.append(f"{module} (for {ELSEWHERE[module][0]}) is imported by {', '.join(sorted(stray))} too")
            continue
        owners = {canonicalize_name(d) for d in dists.get(module, [])}
        if not owners:
            problems.append(f"{module} (imported by {', '.join(sorted(files))}) is installed here by no distribution")
        elif not owners & installs:
            problems.append(
                f"{module} (imported by {', '.join(sorted(files))}) comes from {', '.join(sorted(owners))}, which "
                f"{ENV.relative_to(ROOT)} neither lists nor gets through a listed package: add it, pinned as in "
                "pyproject.toml"
            )
    assert not problems, "\n".join(problems)


def test_the_test_itself_sees_a_missing_package():
    """The check above fails where the list lacks a package the code imports (the issue's orjson)."""
    listed = set(pins(conda_pip(ENV))) - {"orjson"}
    owners = {canonicalize_name(d) for d in md.packages_distributions()["orjson"]}
    assert "orjson" in third_party_imports() and not owners & requires_closure(listed)


def test_the_pins_are_pyprojects_and_env_yamls():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = pins(project["dependencies"])
    dev = pins(project["optional-dependencies"]["dev"])
    rules = pins(conda_pip(ENV))
    assert {k: v for k, v in rules.items() if runtime.get(k) != v} == {}, "pinned otherwise than in pyproject.toml"
    assert set(runtime) - set(rules) == set(NOT_FOR_RULES), "pyproject.toml's dependencies missing from the env"
    whole = conda_pip(ROOT / "env.yaml")
    assert pins(whole) == {**runtime, **dev}, "env.yaml mirrors pyproject.toml (dependencies and dev)"
    py = [d for d in yaml.safe_load(ENV.read_text())["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert py == [
        d for d in yaml.safe_load((ROOT / "env.yaml").read_text())["dependencies"] if str(d).startswith("python")
    ]
    assert re.fullmatch(r"python=3\.(\d+)", py[0]) and project["requires-python"] == f">={py[0].split('=')[1]}"


def conda_frontend() -> str | None:
    return next((name for name in ("micromamba", "mamba", "conda") if shutil.which(name)), None)


@pytest.mark.integration
@pytest.mark.slow
def test_snakemake_runs_the_ci_experiment_in_the_conda_env(tmp_path):
    frontend = conda_frontend()
    if frontend is None:
        pytest.skip(
            "no conda, mamba or micromamba on PATH (Debian 12 packages none): install one, with conda-forge "
            "reachable, to build workflow/envs/bracket.yaml and run `snakemake --sdm conda --directory .test`"
        )
        from faultkit import repo_copy, snakemake_env

    root = repo_copy(tmp_path / "wf")
    for folder in ("config", ".test"):
        shutil.copytree(ROOT / folder, root / folder)
    env = snakemake_env()
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "snakemake"),
            "--cores",
            "1",
            "--sdm",
            "conda",
            "--conda-frontend",
            "conda" if frontend == "micromamba" else frontend,
            "--directory",
            ".test",
        ],
        cwd=root,
        env={**env, "PATH": f"{Path(shutil.which(frontend)).parent}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=3000,
    )
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "Could not create conda environment" in out:
        pytest.skip(f"{frontend} could not build workflow/envs/bracket.yaml here: {out[-1500:]}")
    assert proc.returncode == 0, out[-6000:]
    assert (root / ".test" / "report" / "ci" / "article.html").is_file()


def package_modules() -> list[str]:
    """Every module of the package, less those that run in another environment (ELSEWHERE's files) and the
    command entries (__main__)."""
    away = (
        set().union(*(files for _, files in ELSEWHERE.values()))
        - {
            f
            for f in ELSEWHERE["snakemake_executor_plugin_slurm"][1]  # they import the plugin only when called
        }
        - {"workflow/bracket/physics/bandwidth.py"}
    )  # torch only inside the GPU copy probe
    out = []
    for p in sorted((ROOT / "workflow" / "bracket").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel not in away and p.name != "__main__.py":  # a __main__ runs its command when imported
            parts = p.relative_to(ROOT / "workflow").with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


@pytest.mark.integration
@pytest.mark.slow
def test_a_venv_of_exactly_the_env_list_imports_every_module_the_rules_run(tmp_path):
    """The issue's check: a virtual environment built from exactly the env's pip list imports the whole package
    (bracket.block.runner, bracket.stats.analyze, bracket.article.render, bracket.physics.weights failed on
    orjson before), bracket itself coming from the folder the workflow puts on a job's PYTHONPATH."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", *conda_pip(ENV)], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    modules = package_modules()
    assert {"bracket.block.runner", "bracket.stats.analyze", "bracket.article.render"} <= set(modules)
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint(len(sys.argv) - 1)"
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "workflow"),
        "MPLBACKEND": "Agg",
    }
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, *modules], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0 and proc.stdout.strip() == str(len(modules)), proc.stderr[-3000:]
