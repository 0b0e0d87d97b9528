"""Where the workflow's own files are: the schema, the Snakefile and rules, the article notebook.

In a clone (editable install or not installed at all) they sit beside the package, in the
repository. A plain `pip install .` puts them under ``<prefix>/share/bracket`` (pyproject's
data-files); `bracket workflow DIR` writes a runnable copy of the workflow from there.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import site
import sys
from dataclasses import dataclass, field
from pathlib import Path

# What a runnable workflow holds, relative to its root (the same layout as the repository): the
# notebooks the README runs (the article, the design) and the report fixture the article notebook
# opens on as it ships (its parameters' defaults).
WORKFLOW_FILES = (
    "Snakefile",
    "workflow/Snakefile",
    "config/config.yaml",
    "config/README.md",
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


def job_pythonpath(workdir: str | Path) -> Path:
    """A folder to put on a job's PYTHONPATH so that it imports this bracket, and nothing else beside it.

    In a clone (or a copy of one) that is the package's parent, workflow/. An installed package sits among
    every other package of its environment, which would shadow a conda job's own (--sdm conda): the folder is
    then WORKDIR/.snakemake/bracket-package, holding one link, bracket, to the installed package; the job
    always runs the bracket the Snakefile runs, never one frozen into its environment when it was created."""
    package = Path(__file__).resolve().parent
    if package.parent.name == "workflow":
        return package.parent
    folder = Path(workdir) / ".snakemake" / "bracket-package"
    link = folder / "bracket"
    if not (link.is_symlink() and link.resolve() == package):
        folder.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(package, target_is_directory=True)
    return folder


def sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes: what the workflow tracks a program by, never its timestamp."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


#: In a written workflow, the sha256 of each file as bracket last wrote it: how `bracket workflow --overwrite`
#: tells a file the user changed (kept) from bracket's own copy of an older release (replaced).
MANIFEST = ".bracket-workflow.json"
#: A written file the user changed is kept; with --overwrite the shipped version is written beside it, named so.
SHIPPED_SUFFIX = ".shipped"


def is_ledger(rel: str | Path) -> bool:
    """Whether `rel` (relative to the workflow's root) is a corrections ledger, experiments/NAME.corrections.yaml:
    append-only, the user's record of what did not hold. `bracket workflow` never writes over one."""
    rel = Path(rel)
    return len(rel.parts) == 2 and rel.parts[0] == "experiments" and rel.name.endswith(".corrections.yaml")


@dataclass
class Written:
    """What `write_workflow` did, each path relative to the destination.

    written: files written (new, or bracket's own earlier copy that nobody changed, replaced under `overwrite`);
    kept: files that differ from the shipped ones and were left as they are (all of them without `overwrite`;
    with it, those the user changed, or that no manifest says bracket wrote); beside: for each kept file under
    `overwrite`, where the shipped version was written instead; ledgers: corrections ledgers that differ from the
    shipped ones, never touched."""

    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    beside: dict[Path, Path] = field(default_factory=dict)
    ledgers: list[Path] = field(default_factory=list)


def _read_manifest(dest: Path) -> dict[str, str]:
    try:
        files = json.loads((dest / MANIFEST).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return {}
    return files if isinstance(files, dict) else {}


def write_workflow(dest: str | Path, *, overwrite: bool = False) -> Written:
    """Copy a runnable workflow into ``dest``; never replace a file the user changed, never touch a ledger.

    A file that is not there is written. A file whose bytes are already there is never written again, even
    with ``overwrite``: Snakemake reruns a script's jobs when the script is newer than their outputs, so
    rewriting the same script after a reinstall would measure every block again. A file that differs is kept
    as it is; with ``overwrite`` it is replaced only where the manifest (MANIFEST, the hashes of what bracket
    last wrote there) shows that nobody changed it since, and otherwise kept with the shipped version written
    beside it (NAME.shipped). A corrections ledger that is there (is_ledger) is never written, beside or over.
    The embedded engine's model builder is read from the package itself (workflow/rules/engine.smk), so the
    copy needs no package source.
    """
    src, dest = root(), Path(dest)
    manifest = _read_manifest(dest)
    done = Written()
    for rel in WORKFLOW_FILES:
        s = src / rel
        files = [s] if s.is_file() else sorted(p for p in s.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            name = f.relative_to(src)
            target = dest / name
            shipped = sha256(f)
            if target.exists():
                here = sha256(target)
                if here == shipped:
                    manifest[name.as_posix()] = shipped
                    continue
                if is_ledger(name):
                    done.ledgers.append(name)
                    continue
                if not overwrite:
                    done.kept.append(name)
                    continue
                if manifest.get(name.as_posix()) != here:  # changed by the user, or not known to be bracket's
                    beside = name.with_name(name.name + SHIPPED_SUFFIX)
                    shutil.copy2(f, dest / beside)
                    done.kept.append(name)
                    done.beside[name] = beside
                    continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            manifest[name.as_posix()] = shipped
            done.written.append(name)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).write_text(
        json.dumps(
            {"note": "written by `bracket workflow`: the files as bracket last wrote them", "files": manifest},
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    return done
