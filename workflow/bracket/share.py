"""Where the workflow's own files are: the schema, the Snakefile and rules, the article notebook.

In a clone (editable install or not installed at all) they sit beside the package, in the
repository. A plain `pip install .` puts them under ``<prefix>/share/bracket`` (pyproject's
data-files); `bracket workflow DIR` writes a runnable copy of the workflow from there.
"""

from __future__ import annotations

import filecmp
import hashlib
import shutil
import site
import sys
from pathlib import Path

# What a runnable workflow holds, relative to its root (the same layout as the repository): the
# notebooks the README runs (the article, the design) and the report fixture the article notebook
# opens on as it ships (its parameters' defaults).
WORKFLOW_FILES = (
    "Snakefile",
    "profiles/default",
    "workflow/rules",
    "workflow/scripts",
    "workflow/schemas",
    "workflow/envs",
    "workflow/profiles",
    "notebooks/article.ipynb",
    "notebooks/article.py",
    "notebooks/design.ipynb",
    "notebooks/design.py",
    "experiments",
    "tests/data/report/probe",
)


def _is_root(path: Path) -> bool:
    return (path / "Snakefile").is_file() and (path / "workflow" / "schemas" / "experiment.schema.yaml").is_file()


def root() -> Path:
    """The folder that holds Snakefile, workflow/ and notebooks/: the clone, or the installed share."""
    clone = Path(__file__).resolve().parents[2]
    if _is_root(clone):
        return clone
    prefixes = [sys.prefix, sys.base_prefix, getattr(site, "USER_BASE", None) or ""]
    for prefix in prefixes:
        cand = Path(prefix) / "share" / "bracket"
        if prefix and _is_root(cand):
            return cand
    raise FileNotFoundError(
        "bracket's workflow files (Snakefile, workflow/schemas) are neither beside the package nor under "
        f"{' or '.join(str(Path(p) / 'share' / 'bracket') for p in prefixes if p)}; reinstall with "
        "`pip install .` from a clone, or work in the clone itself (`pip install -e .`)."
    )


def schema_path() -> Path:
    return root() / "workflow" / "schemas" / "experiment.schema.yaml"


def notebook_path() -> Path:
    return root() / "notebooks" / "article.ipynb"


def sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes: what the workflow tracks a program by, never its timestamp."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_workflow(dest: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Copy a runnable workflow into ``dest``; existing files are kept unless ``overwrite``.

    Returns the files written. A file whose bytes are already there is never written again, even
    with ``overwrite``: Snakemake reruns a script's jobs when the script is newer than their outputs,
    so rewriting the same script after a reinstall would measure every block again. The embedded
    engine's model builder is read from the package itself (workflow/rules/engine.smk), so the copy
    needs no package source.
    """
    src, dest = root(), Path(dest)
    written = []
    for rel in WORKFLOW_FILES:
        s = src / rel
        files = [s] if s.is_file() else sorted(p for p in s.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            target = dest / f.relative_to(src)
            if target.exists() and (not overwrite or filecmp.cmp(f, target, shallow=False)):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            written.append(target)
    return written
