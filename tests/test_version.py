"""Which bracket measured (bracket.version): the record from a git clone, from an installed build, or said to be
unknown; `bracket --version` without the heavy imports; the record in stats.json's provenance (from the blocks'
meta) and in the article's method section. The workflow run that carries it from a block's meta to the article
is in tests/test_deploy.py."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bracket import __version__, article, version
from bracket.article.method import instrument_sentence
from bracket.experiment import config
from bracket.stats import provenance as P

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"
HEAVY = ("jsonschema", "pydantic", "httpx", "pandas", "numpy", "snakemake", "bracket.experiment")


def git(tree: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    import os

    proc = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def clone(tmp_path) -> Path:
    """A git repository shaped like bracket's: workflow/bracket (this package's files) and results/."""
    tree = tmp_path / "clone"
    shutil.copytree(
        ROOT / "workflow" / "bracket", tree / "workflow" / "bracket", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tree / "results").mkdir()
    (tree / ".gitignore").write_text("__pycache__/\n")
    git(tree, "init", "-q")
    git(tree, "add", ".")
    git(tree, "commit", "-q", "-m", "one")
    return tree


def test_a_clone_names_its_commit_and_whether_the_instrument_differs_from_it(clone):
    head = git(clone, "rev-parse", "HEAD")
    pkg = clone / "workflow" / "bracket"
    version._read.cache_clear()
    assert version.info(pkg) == {"version": __version__, "commit": head, "dirty": False, "source": "git"}
    # what bracket writes into the clone is not the instrument: still clean
    (clone / "results" / "stats.json").write_text("{}")
    version._read.cache_clear()
    assert version.info(pkg)["dirty"] is False
    # a changed module, or a new one, is
    (pkg / "records.py").write_text((pkg / "records.py").read_text() + "\n# edited\n")
    version._read.cache_clear()
    assert version.info(pkg) == {"version": __version__, "commit": head, "dirty": True, "source": "git"}
    assert version.describe(version.info(pkg)) == f"bracket {__version__}, commit {head[:12]}, with uncommitted changes"


def test_an_install_reads_its_build_record_and_a_bare_copy_says_the_commit_is_unknown(tmp_path):
    pkg = tmp_path / "site-packages" / "bracket"
    shutil.copytree(ROOT / "workflow" / "bracket", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    version._read.cache_clear()
    rec = version.info(pkg)
    assert rec["commit"] is None and rec["dirty"] is None and rec["source"] == "unknown"
    assert "pip install ." in rec["why"]
    assert version.describe(rec).startswith(f"bracket {__version__}, commit unknown (neither a git clone")
    (pkg / version.BUILD_FILE).write_text(json.dumps({"commit": "ab" * 20, "dirty": False, "source": "git"}))
    version._read.cache_clear()
    assert version.info(pkg) == {"version": __version__, "commit": "ab" * 20, "dirty": False, "source": "build"}
    assert version.describe(version.info(pkg)) == f"bracket {__version__}, commit {'ab' * 6}"
    # a build from a tree without git recorded why
    (pkg / version.BUILD_FILE).write_text(json.dumps(version.unknown("built from /x, a tree without git")))
    version._read.cache_clear()
    assert version.info(pkg)["why"] == "built from /x, a tree without git"
    version._read.cache_clear()


def test_git_that_cannot_answer_is_said_as_unknown(tmp_path):
    rec = version.from_git(tmp_path)  # not a repository
    assert rec["source"] == "unknown" and rec["commit"] is None and "git gave no commit" in rec["why"]


@pytest.mark.integration
def test_bracket_version_imports_nothing_heavy_and_answers_fast():
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from bracket.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m == 'bracket.experiment'))\n"
        "print(time.perf_counter() - t)\n"
    )
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    wall = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr
    line, heavy, _ = proc.stdout.splitlines()
    assert line == version.describe(version.info())
    assert heavy == "[]", f"bracket --version imported {heavy}"
    # under a second on an idle machine; the bound leaves room for a loaded one (the heavy imports took 8 s)
    assert wall < 5, wall


def test_stats_provenance_names_which_bracket_measured_each_block_and_which_analysed():
    a = {"version": "0.1.0", "commit": "a" * 40, "dirty": False, "source": "git"}
    b = {**a, "dirty": True}
    metas = [{"block": 0, "bracket": a}, {"block": 1, "bracket": b}, {"block": 2, "bracket": a}, {"block": 3}]
    rec = P.instrument(metas, analysed=b)
    assert rec == {
        "measured": [{"record": a, "blocks": [0, 2]}, {"record": b, "blocks": [1]}],
        "unrecorded": [3],
        "analysed": b,
    }
    cfg = config.validate(
        {"arms": {"x": {}}, "reference": "x", "workloads": {"w": {"prompts": "p.jsonl"}}, "design": {"kind": "abab"}}
    )
    assert P.provenance(metas, [], None, None, cfg)["bracket"]["analysed"] is None
    json.dumps(rec)  # plain JSON


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return article.load(
        FIXTURE / "runs.csv",
        FIXTURE / "stats.json",
        FIXTURE / "raw",
        FIXTURE / "probe.corrections.yaml",
        tmp_path_factory.mktemp("version"),
    )


def with_instrument(d, rec):
    """`d` with stats.json's provenance.bracket set to `rec` (left out where `rec` is None: an older file)."""
    stats = copy.deepcopy(d.stats)
    stats["provenance"].pop("bracket", None)
    if rec is not None:
        stats["provenance"]["bracket"] = rec
    return dataclasses.replace(d, stats=stats)


def test_the_method_section_says_which_bracket_measured_or_that_it_is_not_known(data):
    # the committed fixture was measured before bracket recorded itself: said so, not guessed
    assert instrument_sentence(data) == (
        "Every block was measured before bracket recorded its own version and commit in each block: which bracket "
        "measured them is not known. Which bracket wrote the analysis is not recorded."
    )
    a = {"version": "0.1.0", "commit": "0123456789abcdef", "dirty": False, "source": "git"}
    one = with_instrument(data, {"measured": [{"record": a, "blocks": [0, 1, 2]}], "unrecorded": [], "analysed": a})
    assert instrument_sentence(one) == "Measured and analysed by bracket 0.1.0, commit 0123456789ab."
    later = with_instrument(
        data,
        {"measured": [{"record": a, "blocks": [0, 1, 2]}], "unrecorded": [], "analysed": {**a, "commit": "f" * 40}},
    )
    assert instrument_sentence(later) == (
        "Measured by bracket 0.1.0, commit 0123456789ab. Analysed by bracket 0.1.0, commit ffffffffffff."
    )
    dirty = {**a, "dirty": True}
    unknown = version.unknown("built from /x, a tree without git")
    two = with_instrument(
        data,
        {
            "measured": [{"record": a, "blocks": [0]}, {"record": dirty, "blocks": [1]}],
            "unrecorded": [2],
            "analysed": {"version": "0.1.0", **unknown},
        },
    )
    assert instrument_sentence(two) == (
        "Measured by bracket 0.1.0, commit 0123456789ab (block 0); bracket 0.1.0, commit 0123456789ab, with "
        "uncommitted changes (block 1). Block 2 was measured before bracket recorded its own version and commit "
        "in each block: which bracket measured it is not known. Analysed by bracket 0.1.0, commit unknown (built "
        "from /x, a tree without git)."
    )
    older = with_instrument(data, None)
    assert "not recorded" in instrument_sentence(older)
    # and the section carries it
    html = "".join(str(i) for i in article.method.section_method(one).items)
    assert "Measured and analysed by bracket 0.1.0, commit 0123456789ab" in html


@pytest.mark.integration
def test_a_built_package_records_the_commit_it_was_built_from(tmp_path):
    """setup.py's build step writes bracket/_build.json from git: a wheel built from a clone names its HEAD."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        rel = Path(f.decode())
        if (ROOT / rel).is_file() and rel.parts[0] not in ("studies", "bench"):  # what the build reads, and more
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    for p in (ROOT / "workflow" / "bracket").rglob("*.py"):  # the package as it is now, committed or not
        (src / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, src / p.relative_to(ROOT))
    (src / ".gitignore").write_text("build/\n*.egg-info/\n__pycache__/\n")
    git(src, "init", "-q")
    git(src, "add", ".")
    git(src, "commit", "-q", "-m", "built")
    head = git(src, "rev-parse", "HEAD")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    import zipfile

    [wheel] = (tmp_path / "dist").glob("bracket-*.whl")
    rec = json.loads(zipfile.ZipFile(wheel).read(f"bracket/{version.BUILD_FILE}"))
    assert rec == {"commit": head, "dirty": False, "source": "git"}
