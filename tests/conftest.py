import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from bracket import embedded as _embedded  # noqa: E402

SMOKE_MODEL = "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"

# Fixtures that install the embedded engine and train its model when a clone lacks them (minutes and
# 3.4 GB): only a test marked `engine` may ask for one, so `make test-fast` (-m "not engine ...") can
# never start an engine.
ENGINE_FIXTURES = ("embedded_engine", "engine_venv")


def pytest_collection_modifyitems(config, items):
    """Refuse the whole run, before any test, when a test reaches an engine fixture without the mark."""
    unmarked = [item.nodeid for item in items
                if set(ENGINE_FIXTURES) & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("engine")]
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} test(s) use an engine fixture ({', '.join(ENGINE_FIXTURES)}) without "
            "@pytest.mark.engine, so the fast tier would install the engine: " + "; ".join(unmarked)
            + ". Mark them engine (or mark their module: pytestmark = pytest.mark.engine).")


@pytest.fixture(scope="session")
def engine_venv():
    """The embedded engine's virtual environment alone (vLLM's CPU build), for a test whose workflow builds its
    own model: BRACKET_TEST_ENGINE, or the clone's, installed by the workflow's own rule when absent."""
    engine = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / _embedded.ENGINE_VENV))
    if not (engine / ".installed").exists():
        bin_dir = Path(sys.executable).parent
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        proc = subprocess.run([str(bin_dir / "snakemake"), "--cores", "2", f"{_embedded.ENGINE_VENV}/.installed"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        engine = ROOT / _embedded.ENGINE_VENV
    return engine


@pytest.fixture(scope="session")
def embedded_engine():
    """(engine venv, model dir) of the embedded engine, built by the workflow's own rules when this
    clone lacks them, so a fresh clone runs every engine test instead of skipping it.
    BRACKET_TEST_ENGINE / BRACKET_TEST_MODEL point at existing builds instead."""
    engine = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / _embedded.ENGINE_VENV))
    model = Path(os.environ.get("BRACKET_TEST_MODEL", ROOT / SMOKE_MODEL))
    if not ((engine / ".installed").exists() and (model / "build.json").exists()):
        bin_dir = Path(sys.executable).parent
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        proc = subprocess.run([str(bin_dir / "snakemake"), "--cores", "2", f"{_embedded.ENGINE_VENV}/.installed",
                               f"{SMOKE_MODEL}/build.json"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=3600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        engine, model = ROOT / _embedded.ENGINE_VENV, ROOT / SMOKE_MODEL
    return engine, model
