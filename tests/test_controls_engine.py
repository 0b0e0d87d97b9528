"""The determinism control on the real embedded engine (one server start, about 30 s)."""

import pytest
from bracket.controls import determinism
from bracket.experiment import config
from conftest import ROOT

pytestmark = pytest.mark.engine


def test_determinism_control_on_the_embedded_engine(tmp_path, embedded_engine):
    smoke = config.load(ROOT / "experiments" / "smoke.yaml")
    engine, model = embedded_engine  # the clone's own, or BRACKET_TEST_ENGINE / BRACKET_TEST_MODEL
    python = engine / "bin" / "python"
    assert (model / "build.json").is_file() and python.exists()
    cfg = smoke.model_copy(
        update={
            "engine": smoke.engine.model_copy(update={"port": 8043}),
            "controls": smoke.controls.model_copy(update={"determinism_repeats": 2}),
        }
    )
    out = determinism.run_control(
        cfg,
        "smoke",
        model=str(model),
        python=str(python),
        root=ROOT,
        log_path=tmp_path / "server.log",
        lock_dir=tmp_path / "locks",
    )
    (arm,) = out["arms"]
    assert arm["arm"] == "baseline" and "--no-enable-prefix-caching" in arm["argv"]
    assert [r["config"] for r in arm["rows"]] == ["batch 1"] * 2 + ["batch 2"] * 4
    assert all(r["error"] is None and r["completion_tokens"] == cfg.request.max_tokens for r in arm["rows"])
    assert all(r["cached_tokens"] in (0, None) for r in arm["rows"])
    assert arm["verdict"] in ("stable", "unstable") or arm["verdict"].endswith("stable paths")
