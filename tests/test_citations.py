"""Every repository path the documentation and the code cite exists in the repository.

Read as text, nothing imported: README.md, ARCHITECTURE.md, docs/, bench/README.md and each study's README,
the package's modules (their docstrings and comments), the rules, the Snakefile and the experiments (not their
corrections ledgers: append-only, an entry names the files as they were when it was written). A path is
a run of path characters that starts with one of the repository's top folders (`bench/`, `studies/`,
`workflow/`, `docs/`, ...). Placeholders (`experiments/NAME.yaml`, `results/{exp}`) are patterns, not files:
a glob must match something, a path with a placeholder word is left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("bench", "docs", "experiments", "notebooks", "studies", "tests", "tools", "workflow")
PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w.*{{}}\[\]<>$/-]*[\w/*}}\]>])")
PLACEHOLDERS = {"NAME", "EXP", "DIR", "VERSION", "BACKEND", "HASH", "RUNID", "ARM", "K", "N", "ATTEMPT", "HOST"}

# Files that cite other repositories' paths (an engine's own source tree), with the reason.
ELSEWHERE = {
    "docs/engine-apis.md": "each engine's routes and flags, read in that engine's own repository and wheel",
}
# (citing file, path): a path of another repository, or one the reader or a script creates, in a file that
# otherwise cites this one.
OTHER_REPOSITORY = {
    ("docs/llamacpp.md", "tools/server"): "llama.cpp's source tree, as vendored in the llama-cpp-python sdist",
}
# Paths (and everything under them) that a reader or a script creates; git ignores them.
CREATED = {
    "bench/.venv-peers": "the peer tools' environments, made by the commands in bench/README.md",
    "experiments/bench100.yaml": "written by bench/workflow_timing.py in a temporary copy of the tree",
    "experiments/report.yaml": "the name the Snakefile refuses (an experiment named after a rule)",
}


def sources() -> list[Path]:
    out = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "bench" / "README.md", ROOT / "Snakefile"]
    out += sorted((ROOT / "docs").rglob("*.md"))
    out += sorted((ROOT / "studies").glob("*/README.md"))
    out += sorted((ROOT / "workflow" / "bracket").rglob("*.py"))
    out += sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    out += [p for p in sorted((ROOT / "experiments").rglob("*.yaml")) if not p.name.endswith(".corrections.yaml")]
    return [p for p in out if p.is_file() and str(p.relative_to(ROOT)) not in ELSEWHERE]


def cited(text: str) -> list[tuple[int, str]]:
    """(line, path) for each repository path in `text`, trailing dots and slashes dropped."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            out.append((i, m.group(1).rstrip("/.")))
    return out


def missing(path: str) -> bool:
    """Whether `path` names nothing in the repository (a glob: matches nothing; a placeholder: never)."""
    if set(re.split(r"[^A-Za-z0-9]+", path)) & PLACEHOLDERS or re.search(r"[{}<>$]", path):
        return False
    if re.search(r"[*\[\]]", path):
        return not any(ROOT.glob(path))
    return not (ROOT / path).exists()


def test_every_cited_repository_path_exists():
    absent = []
    for src in sources():
        rel = str(src.relative_to(ROOT))
        for line, path in cited(src.read_text()):
            created = any(path == c or path.startswith(c + "/") for c in CREATED)
            if (rel, path) not in OTHER_REPOSITORY and not created and missing(path):
                absent.append(f"{rel}:{line}: {path}")
    assert not absent, (
        "cited but not in the repository (fix the citation, add the file, or, for another repository's path, "
        "list it in OTHER_REPOSITORY in tests/test_citations.py with the reason):\n  " + "\n  ".join(absent)
    )


def test_every_exemption_is_still_needed():
    for (src, path), _why in OTHER_REPOSITORY.items():
        assert path in [p for _, p in cited((ROOT / src).read_text())], f"{src} no longer cites {path}: remove it"
    for src in ELSEWHERE:
        assert (ROOT / src).is_file(), f"{src} is gone: remove it from ELSEWHERE"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("see `bench/README.md`, then studies/h200/.", ["bench/README.md", "studies/h200"]),
        ("(workflow/rules/*.smk) and experiments/NAME.yaml", ["workflow/rules/*.smk", "experiments/NAME.yaml"]),
        ("../shared/docs/x.md and my_docs/x and docs.md", []),
    ],
)
def test_paths_are_read_as_a_reader_would(text, found):
    assert [p for _, p in cited(text)] == found


def test_a_placeholder_or_a_matching_glob_is_not_missing_and_a_typo_is():
    assert not missing("experiments/NAME.yaml") and not missing("workflow/rules/*.smk")
    assert missing("workflow/rules/*.smkx") and missing("docs/no-such-file.md")
