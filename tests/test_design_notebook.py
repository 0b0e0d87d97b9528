"""The design notebook and the planning functions under it (bracket.stats.planning)."""

import numpy as np
import pytest
import yaml

from bracket import config
from bracket.stats import planning
from bracket.stats.simulate import simulate

from conftest import ROOT


def pilot_runs(block_sd=0.03, run_sd=0.01, rounds=6, runs=8, seed=3):
    df = simulate("abab", rounds=rounds, runs=runs, block_sd=block_sd, run_sd=run_sd, rng=np.random.default_rng(seed),
                  seed=1)
    df["arm"] = df["arm"].map({"A": "baseline", "B": "ngram_4"})
    df["workload"] = "code"
    return df.rename(columns={"value": "decode_tok_s"}).assign(valid=True, invalid_reason="", warmup=False,
                                                              wall_s=0.5, experiment="pilot")


def test_pilot_noise_recovers_the_simulated_components():
    table, noise = planning.pilot_noise(pilot_runs(), "baseline")
    assert set(table["blocks"]) == {6}
    assert 0.012 < noise["block_sd"] < 0.06      # truth 3 %, from 6 blocks per arm
    assert 0.007 < noise["run_sd"] < 0.014        # truth 1 %, from 48 runs per arm
    assert noise["drift"] is not None and noise["drift"] < 0.03


def test_one_round_pilot_leaves_block_noise_unmeasured():
    _, noise = planning.pilot_noise(pilot_runs(rounds=1), "baseline")
    assert noise["block_sd"] is None and noise["run_sd"] is not None


def test_wall_time_by_hand():
    t = {"request_s": {"code": 0.5, "chat": 1.0}, "start_s": 20.0}
    # 4 blocks x (20 + (1 + 5) x 1.5) + 3 cooldowns of 5 s
    assert planning.wall_time(t, arms=2, blocks=4, runs_per_block=5, warmup_runs=1, cooldown_s=5) == \
        pytest.approx(4 * 29 + 15)


def test_write_design_validates_and_drops_adaptive_keys_for_fixed(tmp_path):
    out = tmp_path / "x.yaml"
    cfg = planning.write_design(ROOT / "experiments" / "smoke.yaml", out,
                                {"rounds": "adaptive", "min_rounds": 2, "max_rounds": 5, "margin": 0.1})
    assert cfg["design"]["rounds"] == "adaptive" and config.load(out)["design"]["max_rounds"] == 5
    planning.write_design(out, out, {"rounds": 4})
    assert "max_rounds" not in yaml.safe_load(out.read_text())["design"]
    with pytest.raises(config.ExperimentError, match="min_rounds"):
        planning.write_design(ROOT / "experiments" / "smoke.yaml", out, {"rounds": "adaptive", "min_rounds": 1})


@pytest.mark.integration
def test_design_notebook_runs_under_papermill_and_writes_the_experiment(tmp_path):
    papermill = pytest.importorskip("papermill")
    runs = tmp_path / "runs.csv"
    pilot_runs().to_csv(runs, index=False)
    out = tmp_path / "smoke_adaptive.yaml"
    papermill.execute_notebook(str(ROOT / "notebooks" / "design.ipynb"), str(tmp_path / "design.ipynb"),
                               parameters={"runs_csv": str(runs), "experiment_path": str(ROOT / "experiments/smoke.yaml"),
                                           "out_path": str(out), "reps": 4, "rounds_options": [2, 4],
                                           "runs_options": [3], "max_rounds": 4},
                               cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)
    cfg = config.load(out)
    assert cfg["design"]["rounds"] == "adaptive" and cfg["design"]["max_rounds"] == 4
    assert cfg["arms"].keys() == {"baseline", "ngram_4"}


@pytest.mark.integration
def test_the_notebooks_power_agrees_with_the_simulation_benchmark():
    # bench/results/design_efficiency.md, section 4: block sd 1 %, drift 1 %/block, +20 %: adaptive 2-8 finds it
    # in 100 % after 3.20 rounds on average; no effect: no false faster/slower (200 experiments per row)
    row = planning.adaptive_row(block_sd=0.01, run_sd=0.005, drift=0.01, effect=1.2, runs=5, reps=30, seed=9)
    assert row["power"] >= 0.95 and 2.7 <= row["mean rounds (effect)"] <= 3.8
    assert row["false faster/slower"] <= 0.07
