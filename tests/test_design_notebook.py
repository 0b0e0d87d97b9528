"""The design notebook and the planning functions under it (bracket.stats.planning)."""

import os

import numpy as np
import pytest
import yaml
from bracket.experiment import config
from bracket.experiment.schema import load_schema
from bracket.stats import design_power, planning
from bracket.stats.simulate import simulate
from conftest import ROOT


def pilot_runs(block_sd=0.03, run_sd=0.01, rounds=6, runs=8, seed=3):
    df = simulate(
        "abab", rounds=rounds, runs=runs, block_sd=block_sd, run_sd=run_sd, rng=np.random.default_rng(seed), seed=1
    )
    df["arm"] = df["arm"].map({"A": "baseline", "B": "ngram_4"})
    df["workload"] = "code"
    return df.rename(columns={"value": "decode_tok_s"}).assign(
        valid=True, invalid_reason="", warmup=False, wall_s=0.5, experiment="pilot"
    )


def test_pilot_noise_recovers_the_simulated_components():
    table, noise = planning.pilot_noise(pilot_runs(), "baseline")
    assert set(table["blocks"]) == {6}
    assert 0.012 < noise["block_sd_point"] < 0.06  # truth 3 %, from 6 blocks per arm
    assert noise["block_sd"] == noise["block_sd_high"] > noise["block_sd_point"]  # designed for the upper end
    assert 0.007 < noise["run_sd"] < 0.014  # truth 1 %, from 48 runs per arm
    assert noise["drift"] is not None and noise["drift"] < 0.03


def test_one_round_pilot_leaves_block_noise_unmeasured():
    _, noise = planning.pilot_noise(pilot_runs(rounds=1), "baseline")
    assert noise["block_sd"] is None and noise["run_sd"] is not None


def test_wall_time_by_hand():
    t = {"request_s": {"code": 0.5, "chat": 1.0}, "start_s": 20.0}
    # 4 blocks x (20 + (1 + 5) x 1.5) + 3 cooldowns of 5 s
    assert planning.wall_time(t, arms=2, blocks=4, runs_per_block=5, warmup_runs=1, cooldown_s=5) == pytest.approx(
        4 * 29 + 15
    )


def test_write_design_validates_and_drops_adaptive_keys_for_fixed(tmp_path):
    out = tmp_path / "x.yaml"
    smoke = config.load(ROOT / "experiments" / "smoke.yaml")
    cfg = planning.write_design(smoke, out, {"rounds": "adaptive", "min_rounds": 2, "max_rounds": 5, "margin": 0.1})
    assert cfg.design.rounds == "adaptive" and config.load(out).design.max_rounds == 5
    planning.write_design(config.load(out), out, {"rounds": 4})
    assert "max_rounds" not in yaml.safe_load(out.read_text())["design"]
    with pytest.raises(config.ExperimentError, match="min_rounds"):
        planning.write_design(smoke, out, {"rounds": "adaptive", "min_rounds": 1})


def test_write_design_writes_the_validated_experiment_without_its_defaults(tmp_path):
    """From the typed experiment (as config.load or experiment.resolved.json give it), not the file's YAML: the
    file written holds what the experiment states beyond the schema's defaults, and reads back as the same
    experiment with the new design."""
    from bracket.experiment import resolved

    smoke = config.load(ROOT / "experiments" / "smoke.yaml")
    resolved.write(smoke, tmp_path / "experiment.resolved.json")
    out = tmp_path / "smoke_designed.yaml"
    back = planning.write_design(resolved.read(tmp_path / "experiment.resolved.json"), out, {"rounds": 3}, source="x")
    written = yaml.safe_load(out.read_text())
    assert out.read_text().startswith("# design chosen in notebooks/design.py from x\n")
    assert written == config.without_defaults(back, load_schema())
    assert back.design.rounds == 3 and back.arms == smoke.arms and back.workloads == smoke.workloads
    assert "warmup_runs" not in written["design"] or written["design"]["warmup_runs"] == smoke.design.warmup_runs


DRAFT = ROOT / "tests" / "data" / "draft_sweep"  # a real 12-block run of experiments/draft_sweep.yaml


def test_wall_time_from_the_pilots_timings_predicts_the_pilot_itself():
    """The draft sweep's own design (12 blocks, 1 warmup + 4 timed runs per workload, cooldown 5 s), estimated
    from its timings, against the wall time its metadata record (first launch to last teardown)."""
    import pandas as pd

    runs = pd.read_csv(DRAFT / "runs.csv")
    t = planning.pilot_timings(runs, DRAFT / "raw")
    assert t["blocks"] == 12 and 15 < t["start_s"] < 40
    assert t["teardown_s"] is not None and t["teardown_s"] > 0 and t["gap_s"] >= 5  # the cooldown is in the gap
    est = planning.wall_time(t, arms=4, blocks=12, runs_per_block=4, warmup_runs=1, cooldown_s=5)
    # per block: start + teardown + 15 requests at the pilot's mean; 11 gaps. Within 5 % of what it took.
    assert est == pytest.approx(
        12 * (t["start_s"] + t["teardown_s"] + 5 * sum(t["request_s"].values())) + 11 * t["gap_s"]
    )
    assert est == pytest.approx(t["wall_s"], rel=0.05)
    without = planning.wall_time(
        {**t, "teardown_s": None, "gap_s": None}, arms=4, blocks=12, runs_per_block=4, warmup_runs=1, cooldown_s=5
    )
    assert without < est - 12 * t["teardown_s"] + 1e-9


def _agree(p1: float, p2: float, n1: int, n2: int, z: float = 3.0) -> bool:
    """Two simulated rates agree within z Monte Carlo standard errors of their difference (pooled rate)."""
    p = (p1 * n1 + p2 * n2) / (n1 + n2)
    return abs(p1 - p2) <= z * np.sqrt(p * (1 - p) * (1 / n1 + 1 / n2)) + 1e-12


@pytest.mark.integration
def test_design_notebook_on_the_draft_sweeps_results_agrees_with_the_benchmark(tmp_path, monkeypatch):
    """The notebook under papermill on a real pilot (the draft sweep's runs.csv and block metadata): it writes
    the adaptive experiment, and its false-positive and power figures agree, within Monte Carlo error, with
    bench/sequential_design.py's simulation of the same settings on independent datasets at the upper end of
    the pilot's block-noise interval, the noise it designed for (issue 29). The kernel imports this checkout's
    package (PYTHONPATH), not the one installed in the environment."""

    import pandas as pd

    papermill = pytest.importorskip("papermill")
    import sequential_design as bench

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT / "workflow"), os.environ.get("PYTHONPATH")]))
    )
    out, table_csv, reps = tmp_path / "draft_sweep_adaptive.yaml", tmp_path / "table.csv", 150
    settings = dict(effect=1.15, rounds_options=[2, 4], runs_options=[4], min_rounds=2, max_rounds=4, margin=0.1)
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "design.ipynb"),
        str(tmp_path / "design.ipynb"),
        parameters={
            "runs_csv": str(DRAFT / "runs.csv"),
            "meta_dir": str(DRAFT / "raw"),
            "experiment_path": str(ROOT / "experiments/draft_sweep.yaml"),
            "out_path": str(out),
            "table_csv": str(table_csv),
            "reps": reps,
            "seed": 1,
            **settings,
        },
        cwd=str(ROOT / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
    )
    cfg = config.load(out)
    assert cfg.design.rounds == "adaptive" and cfg.design.max_rounds == 4
    assert cfg.arms.keys() == {"baseline", "ngram_2", "ngram_4", "ngram_8"}
    nb = pd.read_csv(table_csv).set_index("design")

    _, noise = planning.pilot_noise(pd.read_csv(DRAFT / "runs.csv"), "baseline")
    assert 0.005 < noise["block_sd_point"] < 0.1 and noise["run_sd"] > noise["block_sd_point"]  # a noisy engine
    # the notebook designs for the upper end of the pilot's interval by default: the benchmark checks its power there
    assert noise["block_sd"] == noise["block_sd_high"] > noise["block_sd_point"]
    kw = dict(
        block_sd=noise["block_sd"],
        run_sd=noise["run_sd"],
        drift=noise["drift"],
        runs=4,
        margin=0.1,
        max_rounds=4,
        fixed=(2, 4),
    )
    eff = bench.run(reps, 77, effect=1.15, **kw)
    null = bench.run(reps, 78, effect=1.0, **kw)
    for name, key in (("adaptive 3-4 rounds", "adaptive"), ("fixed 2 rounds", 2), ("fixed 4 rounds", 4)):
        row = nb.loc[name]
        assert _agree(row["power"], eff[key]["faster"], reps, reps), (name, row["power"], eff[key]["faster"])
        fp = null[key]["faster"] + null[key]["slower"]
        assert _agree(row["false faster/slower"], fp, reps, reps), (name, row["false faster/slower"], fp)
        assert row["false faster/slower"] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)
    # the figures are not all at a bound, so the agreement says something
    assert 0.1 < nb.loc["adaptive 3-4 rounds", "power"] < 0.99 or 0.1 < nb.loc["fixed 4 rounds", "power"] < 0.99


def test_block_noise_interval_and_the_pessimistic_design_value():
    """3-block pilots (4 arms sharing blocks across 3 workloads would be the draft sweep's; here 2 arms,
    3 rounds): the interval's upper end, which the design uses, lies at or above the true 3 % in nearly
    every pilot (90 % two-sided: about 95 % one-sided, more with per-arm df), and the point estimate is
    the pooled variances' root, not the median of cells' sds."""
    above = 0
    for seed in range(40):
        _, noise = planning.pilot_noise(pilot_runs(rounds=3, runs=4, seed=seed), "baseline")
        assert noise["block_sd_low"] <= noise["block_sd_point"] <= noise["block_sd_high"] == noise["block_sd"]
        assert noise["block_df"] == 4  # two arms, 3 blocks each
        above += noise["block_sd_high"] >= 0.03
    assert above >= 34, above


def test_block_noise_by_hand():
    """Two arms, one workload, 2 blocks of 2 runs each: MSB, MSW and n0 by hand."""
    import pandas as pd
    from scipy import stats as st

    y = {("a", 0): [0.0, 0.02], ("a", 1): [0.10, 0.12], ("b", 2): [0.0, 0.0], ("b", 3): [0.04, 0.04]}
    rows = [{"arm": a, "workload": "w", "block": b, "value": float(np.exp(v))} for (a, b), vs in y.items() for v in vs]
    out = planning.block_noise(pd.DataFrame(rows))
    # arm a: means 0.01, 0.11, grand 0.06: MSB = 2 (0.05^2 + 0.05^2) / 1 = 0.01; MSW = (2 x 0.0002) / 2 = 0.0002
    # arm b: means 0, 0.04: MSB = 2 (0.02^2 x 2) = 0.0016; MSW = 0; n0 = (4 - 8/4) / 1 = 2
    msb, msw, df = (0.01 + 0.0016) / 2, 0.0001, 2.0
    assert out["df"] == df and out["point"] == pytest.approx(np.sqrt((msb - msw) / 2))
    assert out["high"] == pytest.approx(np.sqrt((msb * df / st.chi2.ppf(0.05, df) - msw) / 2))


def test_a_design_below_the_power_asked_is_written_with_a_warning(tmp_path):
    assert planning.power_warning(0.85, 0.05) is None
    w = planning.power_warning(0.47, 0.05)
    assert "47%" in w and "80%" in w and "5.00%" in w
    out = tmp_path / "smoke_designed.yaml"
    smoke = config.load(ROOT / "experiments" / "smoke.yaml")
    planning.write_design(smoke, out, {"rounds": 3, "runs_per_block": 5}, warning=w)
    assert f"# WARNING: {w}" in out.read_text()


def test_mc_interval_is_wilsons_by_hand():
    """80 of 100: centre (80 + 1.96^2 / 2) / (100 + 1.96^2) = 0.7889, half-width 1.96 sqrt(0.8 x 0.2 / 100 +
    1.96^2 / 40000) / (1 + 1.96^2 / 100) = 0.0777: 0.7112-0.8666."""
    lo, hi = planning.mc_interval(80, 100)
    assert lo == pytest.approx(0.7112, abs=1e-4) and hi == pytest.approx(0.8666, abs=1e-4)


def test_rates_run_until_their_interval_is_within_the_half_width():
    # 0.5 x 100: Wilson half-width 9.6 points, not settled at +/- 3; 400 of 1000 and 0 of 1000 are (3.0, 0.2)
    assert not design_power._settled([50], 100, 0.03)
    assert design_power._settled([400, 0], 1000, 0.031)
    assert list(design_power._batches(150, 0.03, 1200)) == [150]  # reps stated: run exactly those
    assert sum(design_power._batches(None, 0.03, 1200)) == 1200 and max(design_power._batches(None, 0.03, 1200)) == 100


def test_every_rate_of_the_grid_carries_its_monte_carlo_interval():
    g = planning.design_grid(block_sd=0.01, run_sd=0.01, drift=0.0, effect=1.2, rounds=(3,), runs=(3,), reps=4)
    [row] = g.to_dict("records")
    assert row["reps"] == 4
    assert (row["power low"], row["power high"]) == pytest.approx(planning.mc_interval(round(row["power"] * 4), 4))
    assert (row["false low"], row["false high"]) == pytest.approx(
        planning.mc_interval(round(row["false faster/slower"] * 4), 4)
    )


def test_the_notebook_runs_to_three_points_by_default():
    text = (ROOT / "notebooks" / "design.py").read_text()
    assert "\nreps = 0 " in text and "\nmc_half_width = 0.03 " in text
    assert planning.MC_HALF_WIDTH == 0.03


def _designs():
    """Five simulated designs, by hand: (design, rounds, runs per block, blocks, power, wall time in hours)."""
    import pandas as pd

    rows = [
        ("fixed 2 rounds", 2, 3, 4, 0.60, 1.0),
        ("fixed 3 rounds", 3, 3, 6, 0.85, 1.5),
        ("fixed 2 rounds", 2, 10, 4, 0.82, 2.0),
        ("fixed 4 rounds", 4, 3, 8, 0.95, 2.0),
        ("adaptive 3-8 rounds", 8, 3, 16, 0.97, 1.4),
        ("adaptive 3-8 rounds", 8, 5, 16, 0.99, 1.2),
    ]
    cols = ["design", "rounds", "runs per block", "blocks", "power", "wall time (h)"]
    return pd.DataFrame(rows, columns=cols).assign(**{"power low": 0.0, "power high": 1.0, "reps": 100})


@pytest.mark.parametrize(
    "min_power, design, power",
    [
        # powers 0.85 (6 blocks), 0.82 (4 blocks), 0.95 (8 blocks) reach 0.8: the fewest blocks, 2 rounds of 10
        (0.8, {"rounds": 2, "runs_per_block": 10}, 0.82),
        # only 0.95 reaches 0.9 (the old "cheapest" asked for 0.8 whatever min_power said, and chose 2 of 10)
        (0.9, {"rounds": 4, "runs_per_block": 3}, 0.95),
        # no fixed design reaches 0.99: the most powerful fixed one, 4 rounds of 3, warned (never an adaptive row)
        (0.99, {"rounds": 4, "runs_per_block": 3}, 0.95),
    ],
)
def test_the_cheapest_design_honours_min_power(min_power, design, power):
    choice = planning.choose_design(
        _designs(), "cheapest", block_sd=0.02, kind="abab", min_rounds=2, max_rounds=8, min_power=min_power
    )
    assert choice.design == design and choice.power == power
    assert (choice.warning is None) == (power >= min_power)
    if choice.warning:
        assert "95%" in choice.warning and "99%" in choice.warning


def test_the_adaptive_and_a_stated_fixed_design_are_chosen_as_asked():
    adaptive = planning.choose_design(
        _designs(), "adaptive", block_sd=0.02, kind="abab", min_rounds=3, max_rounds=8, margin=0.1
    )
    # the adaptive row of the highest power: 0.99 at 5 runs per block
    assert adaptive.design == {
        "kind": "abab",
        "rounds": "adaptive",
        "min_rounds": 3,
        "max_rounds": 8,
        "runs_per_block": 5,
        "margin": 0.1,
    }
    assert adaptive.power == 0.99 and adaptive.warning is None
    fixed = planning.choose_design(_designs(), "fixed 2 3", block_sd=0.02, kind="abab", min_rounds=2, max_rounds=8)
    assert fixed.design == {"rounds": 2, "runs_per_block": 3} and fixed.power == 0.60 and "60%" in fixed.warning
    unlisted = planning.choose_design(_designs(), "fixed 6 5", block_sd=0.02, kind="abab", min_rounds=2, max_rounds=8)
    assert unlisted.row is None and unlisted.power is None and unlisted.warning is None
    with pytest.raises(ValueError, match="fixed R N"):
        planning.choose_design(_designs(), "fastest", block_sd=0.02, kind="abab", min_rounds=2, max_rounds=8)
