"""The arena grid: lists in one key become cells, in the profile's order or bracket's heat-aware one, and a
cell that cannot fit an arm's context is refused with the fix."""

import itertools
from pathlib import Path

import pytest
from bracket.experiment import arena_grid, config
from bracket.experiment.config import ExperimentError
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def grid_cfg(grid, arms=None, **wl):
    return {
        "engine": {"kind": "vllm", "embedded": False, "model": "/models/m", "port": 8051},
        "arms": arms or {"a": {}},
        "workloads": {"g": {"prompts": "p.jsonl", "kind": "arena", "grid": grid, **wl}},
    }


def test_the_shipped_profile_is_the_spark_arena_v2_profile_in_its_own_schedule():
    cfg = config.load(ROOT / "experiments/examples/spark_arena.yaml")
    cells = list(cfg.workloads.values())
    assert len(cells) == 28  # 7 depths x 4 concurrencies
    assert sorted({c.depth for c in cells}) == [0, 4096, 8192, 16384, 32768, 65535, 100000]
    assert {c.prompt_tokens for c in cells} == {2048} and {c.tokens for c in cells} == {128}
    assert sorted({c.users for c in cells}) == [1, 2, 5, 10]
    assert all(c.cache == "prefix" and c.tg_exact is False and c.latency == "api" for c in cells)
    assert all(c.grid is None for c in cells)  # a cell is an ordinary arena workload
    # the profile's schedule: first, second and last entries of spark-arena-v2.yaml
    names = list(cfg.workloads)
    assert names[0] == "arena-d8192-pp2048-tg128-c5"
    assert names[1] == "arena-d4096-pp2048-tg128-c5"
    assert names[-1] == "arena-d100000-pp2048-tg128-c10"
    assert cfg.design.runs_per_block == 3
    assert cfg.engine.launch == "attach"


def test_the_fresh_cell_stays_its_own_example():
    cfg = config.load(ROOT / "experiments/examples/spark_arena_cell.yaml")
    (wl,) = cfg.workloads.values()
    assert wl.cache == "fresh" and wl.depth == 16384 and wl.users == 2


def test_default_order_alternates_light_and_heavy():
    # loads users x (depth + 10 + 2): (0,1)=12, (0,2)=24, (100,1)=112, (100,2)=224
    cfg = config.validate(
        grid_cfg({"depth": [0, 100], "prompt_tokens": [10], "tokens": [2], "users": [1, 2]}), source="t"
    )
    assert list(cfg.workloads) == [
        "g-d0-pp10-tg2-c1",
        "g-d100-pp10-tg2-c2",
        "g-d0-pp10-tg2-c2",
        "g-d100-pp10-tg2-c1",
    ]


def test_an_axis_left_out_takes_the_workloads_own_value():
    cfg = config.validate(grid_cfg({"depth": [0, 512]}, users=1, tokens=32), source="t")
    assert [(w.depth, w.prompt_tokens, w.tokens, w.users) for w in cfg.workloads.values()] == [
        (0, 2048, 32, 1),
        (512, 2048, 32, 1),
    ]


@pytest.mark.parametrize(
    "grid, wl, match",
    [
        ({"depth": [0, 4096], "order": [{"depth": 0}]}, {}, "leaves out 1 cell"),
        ({"depth": [0, 4096], "order": [{"depth": 0}, {"depth": 0}, {"depth": 4096}]}, {}, "repeats a cell"),
        ({"depth": [0, 4096], "users": [1, 2], "order": [{"depth": 0}]}, {}, "matches 2 cells"),
        ({"depth": [0, 0]}, {}, "lists a value twice"),
        ({"depth": [0]}, {"depth": 4096}, "both alone and in grid.depth"),
    ],
)
def test_bad_grids_are_refused_with_the_fix(grid, wl, match):
    with pytest.raises(ExperimentError, match=match):
        config.validate(grid_cfg(grid, **wl), source="t")


def test_a_grid_on_a_single_workload_is_refused():
    raw = grid_cfg({"depth": [0]})
    raw["workloads"]["g"]["kind"] = "single"
    with pytest.raises(ExperimentError, match="not of kind arena"):
        config.validate(raw, source="t")


def test_a_cell_over_the_arms_context_is_refused_naming_the_depth_that_fits():
    raw = grid_cfg(
        {"depth": [0, 4096, 8192], "prompt_tokens": [2048], "tokens": [128], "users": [1]},
        arms={"short": {"server": {"context_length": 8192}}, "long": {"server": {"context_length": 16384}}},
    )
    with pytest.raises(ExperimentError) as err:
        config.validate(raw, source="t")
    msg = str(err.value)
    # 8192 + 2048 + 128 = 10368 > 8192; 4096 + 2176 = 6272 fits; the deepest that fits is 8192 - 2176 = 6016
    assert "g-d8192-pp2048-tg128-c1 (8192 + 2048 + 128 = 10,368)" in msg and "d4096" not in msg
    assert "'short'" in msg and "'long'" not in msg and "above 6,016" in msg
    assert "arms.short.server.context_length" in msg


def test_load_and_order_by_hand():
    assert arena_grid.load({"depth": 100, "prompt_tokens": 10, "tokens": 2, "users": 3}) == 336
    cells = [{"depth": d, "prompt_tokens": 0, "tokens": 0, "users": 1} for d in (5, 1, 4, 2, 3)]
    assert [c["depth"] for c in arena_grid.alternating(cells)] == [1, 5, 2, 4, 3]


def test_a_cell_is_written_back_as_the_workload_it_stands_for():
    """Each cell is an ordinary arena workload: what the file stated, the cell's four values, and no grid."""
    cfg = config.validate(grid_cfg({"depth": [0, 512]}, users=1, cache="prefix"), source="t")
    assert config.as_data(cfg.workloads["g-d512-pp2048-tg128-c1"]) == {
        "prompts": "p.jsonl",
        "kind": "arena",
        "cache": "prefix",
        "depth": 512,
        "prompt_tokens": 2048,
        "tokens": 128,
        "users": 1,
    }


AXIS = st.lists(st.integers(0, 4096), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None)
@given(
    depth=AXIS, prompt_tokens=AXIS.map(lambda v: [x + 1 for x in v]), users=AXIS.map(lambda v: [x % 8 + 1 for x in v])
)
def test_every_combination_is_one_cell_and_the_default_order_alternates_light_and_heavy(depth, prompt_tokens, users):
    users = list(dict.fromkeys(users))  # x % 8 may repeat a value
    grid = {"depth": depth, "prompt_tokens": prompt_tokens, "tokens": [2], "users": users}
    cfg = config.validate(grid_cfg(grid, arms={"a": {"server": {"context_length": 10_000}}}), source="t")
    cells = [(w.depth, w.prompt_tokens, w.tokens, w.users) for w in cfg.workloads.values()]
    assert sorted(cells) == sorted(itertools.product(depth, prompt_tokens, [2], users))
    loads = [u * (d + pp + tg) for d, pp, tg, u in cells]
    ranked = sorted(loads)
    # lightest, heaviest, second lightest, second heaviest, ...: position 2i holds the i-th lightest load
    assert loads[0::2] == ranked[: len(loads[0::2])]
    assert loads[1::2] == ranked[::-1][: len(loads[1::2])]
