import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import prebuild  # tests/prebuild.py: llama.cpp's build in the background
import pytest
from bracket import embedded as _embedded

from tests.support import ROOT

SMOKE_MODEL = "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"

# Fixtures that install the embedded engine and train its model when a clone lacks them (minutes and
# 3.4 GB), or build llama.cpp (tests/test_engines_llamacpp_live.py, 11 minutes): only a test marked `engine`
# may ask for one, so `make test-fast` (-m "not engine ...") can never start an engine.
ENGINE_FIXTURES = ("embedded_engine", "engine_venv", "trainer_venv", "llama_server")
# The marks that keep a test out of the fast tier (the Makefile's FAST expression).
OUTSIDE_FAST_TIER = ("engine", "integration", "slow", "slurm")


def is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def tier_problems(items) -> dict[str, str]:
    """{nodeid: what is wrong} for the tests whose marks put them in the wrong tier: one that reaches an engine
    fixture without the engine mark (the fast tier would install the engine), one marked serial in the fast
    tier (`make test` runs serial tests alone in its last pass, which takes only tests outside the fast tier)."""
    unmarked = [
        item.nodeid
        for item in items
        if set(ENGINE_FIXTURES) & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("engine")
    ]
    serial_fast = [
        item.nodeid
        for item in items
        if item.get_closest_marker("serial") and not any(item.get_closest_marker(m) for m in OUTSIDE_FAST_TIER)
    ]
    problems = {}
    if unmarked:
        says = (
            f"{len(unmarked)} test(s) use an engine fixture ({', '.join(ENGINE_FIXTURES)}) without "
            "@pytest.mark.engine, so the fast tier would install the engine: "
            + "; ".join(unmarked)
            + ". Mark them engine (or mark their module: pytestmark = pytest.mark.engine)."
        )
        problems.update(dict.fromkeys(unmarked, says))
    if serial_fast:
        says = (
            f"{len(serial_fast)} test(s) marked serial are in the fast tier, which runs on every core and has no "
            "serial pass: " + "; ".join(serial_fast) + ". Mark them integration (or engine) too, or drop serial."
        )
        problems.update(dict.fromkeys(serial_fast, says))
    return problems


_TIER_PROBLEMS = pytest.StashKey[dict]()


# What a test of the fast tier may not start: an engine, or the workflow (Snakemake, papermill). A test that needs
# one is marked integration (or engine); the fast tier (`make test-fast`) then stays the quick check it is meant to
# be, on a clone without resources/ too.
NOT_IN_FAST_TIER = ("vllm", "llama-server", "snakemake", "papermill")


def started_program(args) -> str | None:
    """The name in NOT_IN_FAST_TIER that a subprocess.Popen argument list (or shell line) starts, or None: a word
    among its first few whose file name is that name, or a module of it (`python -m vllm.entrypoints...`)."""
    words = args.split() if isinstance(args, str) else [str(a) for a in list(args)[:6]]
    for word in words[:6]:
        for part in word.split():
            name = os.path.basename(part)
            for program in NOT_IN_FAST_TIER:
                if name == program or name.startswith(program + "."):
                    return program
    return None


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_engine(request, monkeypatch):
    """In a test outside every mark of OUTSIDE_FAST_TIER, subprocess.Popen (what subprocess.run and asyncio's
    subprocesses go through) refuses to start a program of NOT_IN_FAST_TIER, naming the mark to add."""
    if any(request.node.get_closest_marker(m) for m in OUTSIDE_FAST_TIER):
        return
    popen_init = subprocess.Popen.__init__

    def guarded(self, args, *more, **kw):
        program = started_program(args)
        if program:
            raise AssertionError(
                f"a test of the fast tier started {program} ({args!r}): mark it @pytest.mark.integration (or engine), "
                "which keeps it out of make test-fast"
            )
        popen_init(self, args, *more, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)


def pytest_configure(config):
    """Each pytest-xdist worker measures under its own host lock (bracket.measure.session.host_lock_path,
    $BRACKET_LOCK_DIR): with the one host-wide lock a user's runs share, a block in one worker's workflow would
    wait for every block of the other's, and the cores sit idle while both wait on servers starting. The serial
    pass (-n 0), which holds the tests timed against a known truth, keeps the host-wide lock; a lock folder the
    caller set is kept."""
    if is_xdist_worker(config) and "BRACKET_LOCK_DIR" not in os.environ:
        import tempfile

        os.environ["BRACKET_LOCK_DIR"] = tempfile.mkdtemp(prefix=f"bracket-locks-{config.workerinput['workerid']}-")


# The longest modules first, so that under `--dist loadfile --no-loadscope-reorder` (make test) no long module
# starts last and runs alone at the end. On a fresh clone the first one builds the embedded engine (install and
# training: 7 minutes on a cold run beside the other worker), so the modules after it that need no engine keep
# the other worker busy meanwhile (about 8 minutes of them), and the engine's come after. Seconds: each module's
# tests on two workers with the engine built (`pytest --junitxml`, 2026-12-02; test_setups before it moved to
# the reference server); unlisted modules follow in file order, and LLAMACPP_LAST's after them.
LONGEST_FIRST = (
    ("test_slurm.py", 542),  # the embedded engine (its fixture builds it on a fresh clone)
    ("test_sequential_workflow.py", 178),
    ("test_neutrality_workflow.py", 163),
    ("test_setups.py", 197),
    ("test_hostile_workflow.py", 73),
    ("test_hostile_workflow_round3.py", 56),
    ("test_pipeline.py", 207),  # engine
    ("test_install.py", 238),  # engine, after a plain install
    ("test_faults_workflow.py", 125),  # engine
    ("test_embedded_model.py", 98),  # the trainer
    ("test_executor.py", 91),  # engine
    ("test_pinning.py", 63),  # engine
    ("test_hostile_kill_workflow.py", 52),
)


# The modules that serve llama.cpp (the llama_server fixture) last, the longest of them first: make test starts
# llama.cpp's build in the background at the lowest priority (tests/prebuild.py), where it takes only what the
# tests leave idle; the first of them to start raises it to normal priority and waits for it. Last, the build
# has had the whole run to fill the idle moments of the tests before it (a cold run: 884 s of build beside them).
LLAMACPP_LAST = ("test_attach_engines.py", "test_engines_llamacpp_live.py", "test_arena_llamacpp_live.py")


def longest_first(items) -> list:
    """`items` with the modules of LONGEST_FIRST first, in its order; then the rest as collected; then
    LLAMACPP_LAST's, in its order."""
    rank = {name: i for i, (name, _) in enumerate(LONGEST_FIRST)}
    last = {name: len(rank) + 1 + i for i, name in enumerate(LLAMACPP_LAST)}
    return sorted(
        items, key=lambda item: last.get(Path(str(item.path)).name, rank.get(Path(str(item.path)).name, len(rank)))
    )


def pytest_collection_modifyitems(config, items):
    """Order the modules (longest_first), then refuse the whole run, before any test, when a test's marks put it
    in the wrong tier (tier_problems). On a pytest-xdist worker a UsageError would surface as an INTERNALERROR
    naming no test, so there each such test fails before its fixtures are set up (no engine is built) and the
    run stops."""
    items[:] = longest_first(items)
    problems = tier_problems(items)
    if problems and not is_xdist_worker(config):
        raise pytest.UsageError(" ".join(dict.fromkeys(problems.values())))
    config.stash[_TIER_PROBLEMS] = problems


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    says = item.config.stash.get(_TIER_PROBLEMS, {}).get(item.nodeid)
    if says:
        item.session.shouldstop = says
        pytest.fail(says, pytrace=False)


# Nothing a test does writes into the checkout: a workflow run happens in a copy under tmp_path
# (tests.support.repo_copy). The run records every file of the checkout (path, mtime, size) when
# it starts and fails at the end, naming the files, where any was added, changed or removed. Exempt: Python's
# and the test tools' caches, git's own folder, the environments, and resources/, the workflow's build folder,
# which the engine fixtures below fill where a clone lacks the engine or its model (as `make draft_sweep` does).
MAY_WRITE_DIRS = {
    ".git",
    ".venv",
    "resources",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".ruff_cache",
    ".ipynb_checkpoints",
}
MAY_WRITE_PATHS = {"bench/.venv-peers"}
# Set by a fixture that ran the workflow's own build rules in the checkout (the engine, its model, the trainer:
# into resources/, as `make draft_sweep` does): Snakemake keeps its records of that build in .snakemake/, and
# the build rules their logs in logs/engine/.
BUILT_IN_CHECKOUT: set[str] = set()


def checkout_files(root: Path) -> dict[str, tuple[int, int]]:
    """{path relative to root: (mtime_ns, size)} of every file in the checkout but the exempt folders."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [
            d
            for d in dirnames
            if d not in MAY_WRITE_DIRS
            and not d.endswith(".egg-info")
            and os.path.normpath(os.path.join(rel, d)) not in MAY_WRITE_PATHS
        ]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:  # removed while we walked
                continue
            files[os.path.normpath(os.path.join(rel, name))] = (st.st_mtime_ns, st.st_size)
    return files


def checkout_changes(before: dict, after: dict) -> list[str]:
    """'added PATH', 'changed PATH', 'removed PATH' for each file that differs, sorted by path."""
    out = [f"added {p}" for p in after.keys() - before.keys()]
    out += [f"removed {p}" for p in before.keys() - after.keys()]
    out += [f"changed {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(out, key=lambda line: line.split(" ", 1)[1])


_CHECKOUT = pytest.StashKey[dict]()


def pytest_sessionstart(session):
    # Under pytest-xdist the controller guards the checkout for the whole run; its workers only run tests.
    if not is_xdist_worker(session.config):
        session.config.stash[_CHECKOUT] = checkout_files(ROOT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """An xdist worker that ran the workflow's build rules in the checkout says so on its way out."""
    BUILT_IN_CHECKOUT.update(getattr(node, "workeroutput", {}).get("built_in_checkout", ()))


def pytest_sessionfinish(session, exitstatus):
    if is_xdist_worker(session.config):
        session.config.workeroutput["built_in_checkout"] = sorted(BUILT_IN_CHECKOUT)
        return
    before = session.config.stash.get(_CHECKOUT, None)
    if before is None:
        return
    changes = [
        c
        for c in checkout_changes(before, checkout_files(ROOT))
        if not any(c.split(" ", 1)[1].startswith(d + os.sep) for d in BUILT_IN_CHECKOUT)
    ]
    if changes:
        shown = changes[:20] + ([f"... and {len(changes) - 20} more"] if len(changes) > 20 else [])
        session.config.get_terminal_writer().line(
            f"\nThe tests wrote into the checkout ({ROOT}); a test must write under tmp_path (a workflow run: in "
            "tests.support.repo_copy(tmp_path)):\n  " + "\n  ".join(shown),
            red=True,
            bold=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def build_in_checkout(*targets: str) -> None:
    """Run the workflow's own build rules for `targets` in the checkout (into resources/, as `make draft_sweep`
    does). Under pytest-xdist every worker that needs the engine comes here: a lock in resources/ lets the first
    build it while the others wait, and the others then find it built (the rules' outputs are Snakemake's own
    up-to-date check), so the engine is installed and the model trained once per clone, whatever -n says."""
    (ROOT / "resources").mkdir(exist_ok=True)
    with open(ROOT / "resources" / ".tests-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        bin_dir = Path(sys.executable).parent
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        proc = subprocess.run(
            [str(bin_dir / "snakemake"), "--cores", "2", *targets],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
    BUILT_IN_CHECKOUT.update((".snakemake", "logs/engine"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.fixture(scope="session")
def engine_venv():
    """The embedded engine's virtual environment alone (vLLM's CPU build), for a test whose workflow builds its
    own model: BRACKET_TEST_ENGINE, or the clone's, installed by the workflow's own rule when absent."""
    engine = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / _embedded.ENGINE_VENV))
    if not (engine / ".installed").exists():
        build_in_checkout(f"{_embedded.ENGINE_VENV}/.installed")
        engine = ROOT / _embedded.ENGINE_VENV
    return engine


@pytest.fixture(scope="session")
def trainer_venv(engine_venv):
    """The embedded model's trainer (CPU torch, no vLLM): beside BRACKET_TEST_ENGINE's engine where it was built
    there, else the clone's, installed by the workflow's own rule when absent; for a test whose workflow trains
    its own model and need not install the trainer again (about 1 GB from pip's cache)."""
    name = Path(_embedded.TRAINER_VENV).name
    for trainer in (Path(engine_venv).parent / name, ROOT / _embedded.TRAINER_VENV):
        if (trainer / ".installed").exists():
            return trainer
    build_in_checkout(f"{_embedded.TRAINER_VENV}/.installed")
    return ROOT / _embedded.TRAINER_VENV


@pytest.fixture(scope="session")
def embedded_engine():
    """(engine venv, model dir) of the embedded engine, built by the workflow's own rules when this
    clone lacks them, so a fresh clone runs every engine test instead of skipping it.
    BRACKET_TEST_ENGINE / BRACKET_TEST_MODEL point at existing builds instead."""
    engine = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / _embedded.ENGINE_VENV))
    model = Path(os.environ.get("BRACKET_TEST_MODEL", ROOT / SMOKE_MODEL))
    if not ((engine / ".installed").exists() and (model / "build.json").exists()):
        build_in_checkout(f"{_embedded.ENGINE_VENV}/.installed", f"{SMOKE_MODEL}/build.json")
        engine, model = ROOT / _embedded.ENGINE_VENV, ROOT / SMOKE_MODEL
    return engine, model


# llama.cpp, for the live llama-server tests (test_engines_llamacpp_live.py, test_attach_engines.py,
# test_arena_llamacpp_live.py): built once per machine (workflow/scripts/build_llamacpp.sh caches it under
# ~/.cache/bracket/llama.cpp and locks the build, so xdist workers that ask together build it once), and the
# models it serves made once per session here rather than once per module that imported the fixtures.
@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    # make test started the build in the background at the lowest priority (tests/prebuild.py): a worker now
    # waits on it, so it goes on at normal priority
    prebuild.hurry()
    record = tmp_path_factory.mktemp("llamacpp") / "build.json"
    proc = subprocess.run(
        ["bash", str(ROOT / "workflow/scripts/build_llamacpp.sh"), _embedded.LLAMACPP_VERSION, "cpu", "2", str(record)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(record.read_text())


@pytest.fixture(scope="session")
def tiny_gguf(llama_server, tmp_path_factory):
    """Random weights, Qwen3-shaped: enough for launch, provenance and the guards."""
    out = tmp_path_factory.mktemp("gguf") / "tiny-random-qwen3.gguf"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "workflow/bracket/embedded/synthetic.py"),
            llama_server["source_dir"],
            str(out),
            "--shape",
            "tiny",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return str(out)


@pytest.fixture(scope="session")
def trained_gguf(llama_server, embedded_engine, tmp_path_factory):
    """The embedded tiny model, converted as the workflow's embedded_gguf rule does: its greedy output
    repeats itself, so ngram lookups find matches (random weights never do)."""
    engine, model = embedded_engine
    out = tmp_path_factory.mktemp("gguf") / "embedded.gguf"
    proc = subprocess.run(
        [
            str(engine / "bin/python"),
            str(ROOT / "workflow/bracket/embedded/to_gguf.py"),
            llama_server["source_dir"],
            str(model),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return str(out)
