"""Which bracket this is: its version, the commit its files came from, and whether they differed from it.

Every block's meta, stats.json's provenance and the article's method section carry this record, so a
reader can tell which instrument measured. It comes from one of two places, said in `source`:

- "git": the package sits in a git clone (workflow/bracket beside a .git): HEAD, and whether any of the
  instrument's own files (INSTRUMENT_PATHS: the package, the rules, the notebooks, the build files) is
  changed, added or removed against it. The results bracket writes into the clone are not its files.
- "build": an installed package (`pip install .`) carries the record its build made, `_build.json` beside
  this module, written by setup.py from the same git query on the tree it was built from.
- "unknown": neither (a build from a tree without git, such as an sdist or a copy of the files, or a
  clone where git cannot be run): the commit and the dirty flag are None, and `why` says what was missing.

Only the standard library is imported, and git is asked at most once per process: `bracket --version`
stays well under a second.
"""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path

from bracket import __version__

#: The record an installed package carries, written by setup.py's build step.
BUILD_FILE = "_build.json"
#: What the dirty flag looks at, relative to the clone: the instrument's files, not what it writes (results/,
#: report/, resources/) or the studies and benchmarks kept beside it.
INSTRUMENT_PATHS = ("workflow", "Snakefile", "notebooks", "profiles", "config", "pyproject.toml", "setup.py")
PACKAGE = Path(__file__).resolve().parent


def _git(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=10)


def from_git(tree: str | Path) -> dict:
    """{commit, dirty, source: "git"} of the clone at `tree`; {commit: None, dirty: None, source: "unknown",
    why} where git cannot say (not installed, not a repository, a repository git refuses to read)."""
    tree = Path(tree)
    try:
        head = _git(tree, "rev-parse", "--verify", "HEAD")
        status = _git(tree, "status", "--porcelain", "--", *INSTRUMENT_PATHS) if head.returncode == 0 else head
    except (OSError, subprocess.TimeoutExpired) as exc:
        return unknown(f"git could not be run in {tree} ({exc})")
    if head.returncode != 0 or status.returncode != 0:
        err = (head.stderr or status.stderr).strip().splitlines()
        return unknown(f"git gave no commit in {tree}" + (f" ({err[-1]})" if err else ""))
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()), "source": "git"}


def unknown(why: str) -> dict:
    return {"commit": None, "dirty": None, "source": "unknown", "why": why}


def _clone_root(package: Path) -> Path | None:
    """The clone that holds `package` as its workflow/bracket, or None (an installed package, a copy)."""
    root = package.parent.parent
    return root if package.parent.name == "workflow" and (root / ".git").exists() else None


@lru_cache(maxsize=None)
def _read(package: Path) -> dict:
    clone = _clone_root(package)
    if clone is not None:
        return from_git(clone)
    build = package / BUILD_FILE
    if build.is_file():
        try:
            rec = json.loads(build.read_text())
        except (OSError, ValueError) as exc:
            return unknown(f"{build} could not be read ({exc}); reinstall with `pip install .` from a clone")
        if rec.get("commit"):
            return {"commit": rec["commit"], "dirty": rec.get("dirty"), "source": "build"}
        return unknown(rec.get("why") or f"{build} names no commit")
    return unknown(
        "neither a git clone nor an installed build record: run bracket from a clone, or install it with "
        "`pip install .` from one"
    )


def info(package: str | Path | None = None) -> dict:
    """This bracket as every record names it: {version, commit, dirty, source} (and `why` where the commit is
    unknown). `package` is the package folder to read (this one by default)."""
    return {"version": __version__, **_read(Path(package).resolve() if package else PACKAGE)}


def describe(rec: dict | None) -> str:
    """One line for a person: "bracket 0.1.0, commit 0123456789ab" with ", with uncommitted changes" where the
    tree differed from it, or the commit said to be unknown and why."""
    if not rec:
        return "bracket (version not recorded)"
    out = f"bracket {rec.get('version') or '(version not recorded)'}"
    if rec.get("commit"):
        out += f", commit {str(rec['commit'])[:12]}"
        if rec.get("dirty"):
            out += ", with uncommitted changes"
        elif rec.get("dirty") is None:
            out += ", uncommitted changes not recorded"
        return out
    return out + ", commit unknown" + (f" ({rec['why']})" if rec.get("why") else "")
