"""Hosts as a factor: each host's interleaved schedule, chaining per host, drift per host, and the
comparison between hosts with its CI, on records made with known host effects."""

import json

import numpy as np
import pytest
from bracket import records
from bracket.article.findings import texts
from bracket.experiment import config, design
from bracket.stats import analyze
from bracket.stats.hosts import host_names, with_slots
from bracket.stats.io import from_runs
from hypothesis import given
from hypothesis import strategies as st


def test_each_host_runs_the_whole_design_side_by_side():
    blocks = design.draw_hosts(["A", "B"], "A", "abab", 2, 1, ["spark-1", "spark-2", "spark-3"])
    assert len(blocks) == 12 and [b.position for b in blocks] == list(range(12))
    for i, host in enumerate(["spark-1", "spark-2", "spark-3"]):
        mine = [b for b in blocks if b.host == host]
        # slot s of host i is position s * 3 + i; each host interleaves A B A B
        assert [b.position for b in mine] == [i, i + 3, i + 6, i + 9]
        assert [(b.arm, b.round) for b in mine] == [("A", 1), ("B", 1), ("A", 2), ("B", 2)]
    # the blocks of one slot run at the same time, one per host
    assert [b.host for b in blocks[:3]] == ["spark-1", "spark-2", "spark-3"]
    assert len({b.seed for b in blocks}) == 12


def test_without_hosts_the_schedule_is_unchanged():
    cfg = config.validate({"arms": {"A": {}, "B": {}}, "design": {"kind": "random", "rounds": 3, "seed": 5}})
    assert cfg.hosts == ()
    assert design.from_config(cfg) == design.draw(["A", "B"], "A", "random", 3, 5)
    # the first host's sequence is the one the experiment has without hosts
    first = [b for b in design.draw_hosts(["A", "B"], "A", "random", 3, 5, ["x", "y"]) if b.host == "x"]
    assert [b.arm for b in first] == [b.arm for b in design.draw(["A", "B"], "A", "random", 3, 5)]


def test_random_designs_are_drawn_per_host():
    blocks = design.draw_hosts(list("ABCDE"), "A", "random", 4, 7, ["x", "y"])
    x = [b.arm for b in blocks if b.host == "x"]
    y = [b.arm for b in blocks if b.host == "y"]
    assert x != y and sorted(x) == sorted(y)


@given(
    hosts=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True),
    kind=st.sampled_from(["abab", "abba", "bracket", "random", "sequential"]),
    rounds=st.integers(1, 3),
)
def test_every_host_visits_every_arm_once_per_round(hosts, kind, rounds):
    blocks = design.draw_hosts(["R", "M1", "M2"], "R", kind, rounds, 3, hosts)
    assert [b.position for b in blocks] == list(range(len(blocks)))
    per_host = {h: [b for b in blocks if b.host == h] for h in hosts}
    assert len({len(v) for v in per_host.values()}) == 1
    for h, mine in per_host.items():
        assert sorted({b.arm for b in mine}) == ["M1", "M2", "R"]
        assert all(b.position % len(hosts) == hosts.index(h) for b in mine)


def test_schedule_records_the_host_and_reads_back(tmp_path):
    blocks = design.draw_hosts(["A", "B"], "A", "abba", 2, 1, ["node-a", "node-b"])
    design.write(blocks, tmp_path / "s.csv")
    assert (tmp_path / "s.csv").read_text().splitlines()[0] == "position,arm,round,seed,host"
    assert design.read(tmp_path / "s.csv") == blocks
    plain = design.draw(["A", "B"], "A", "abba", 2, 1)
    design.write(plain, tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_text().splitlines()[0] == "position,arm,round,seed"
    assert design.read(tmp_path / "p.csv") == plain


def test_hosts_are_validated():
    with pytest.raises(config.ExperimentError, match="hosts"):
        config.validate({"arms": {"A": {}}, "hosts": ["a", "a"]})
    with pytest.raises(config.ExperimentError, match="hosts"):
        config.validate({"arms": {"A": {}}, "hosts": ["bad host"]})
    cfg = config.validate({"arms": {"A": {}}})
    assert config.as_data(cfg.cluster) == {
        "gpus": 0,
        "mem_mb": 16000,
        "runtime_min": 120,
        "cpus": 0,
        "exclusive": True,
        "allocation": "per_block",
    }


def _runs(host_factor: dict, drift_per_slot: dict, *, seed=0, noise=0.01, rounds=3):
    """Records of a 2-arm abab design on each host: rate = 100 x arm x host factor x drift, log-normal noise."""
    cfg = config.validate(
        {
            "arms": {"base": {}, "fast": {}},
            "hosts": list(host_factor),
            "workloads": {"code": {"prompts": "c.jsonl"}},
            "design": {"kind": "abab", "rounds": rounds},
            "analysis": {"bootstrap_resamples": 400},
        }
    )
    rng = np.random.default_rng(seed)
    n_hosts = len(host_factor)
    recs = []
    for b in design.from_config(cfg):
        slot = b.position // n_hosts
        for run in range(5):
            rate = (
                100
                * (1.2 if b.arm == "fast" else 1.0)
                * host_factor[b.host]
                * (1 + drift_per_slot[b.host]) ** slot
                * np.exp(rng.normal(0, noise))
            )
            recs.append(
                records.new_record(
                    experiment="t",
                    arm=b.arm,
                    block=b.position,
                    round=b.round,
                    position=b.position,
                    run=run,
                    warmup=False,
                    workload="code",
                    prompt_id="p",
                    wall_s=64 / rate,
                    completion_tokens=64,
                    max_tokens=64,
                    cached_tokens=0,
                    finish_reason="length",
                    decode_tok_s=rate,
                    host=b.host,
                )
            )
    return records.tidy(recs), cfg


def test_a_slower_host_is_found_with_its_ci():
    runs, cfg = _runs({"box-1": 1.0, "box-2": 0.9}, {"box-1": 0.0, "box-2": 0.0})
    out = analyze(runs, cfg).data()
    h = out["hosts"]
    assert h["names"] == ["box-1", "box-2"] and h["baseline"] == "box-1"
    ref = [c for c in h["comparisons"] if c["arm"] == "base"]
    assert len(ref) == 1 and ref[0]["candidate"] == "box-2"
    assert ref[0]["ci_low"] < 0.9 < ref[0]["ci_high"] and ref[0]["ci_high"] < 0.95
    assert ref[0]["verdict"] == "slower"
    assert any("box-2 vs box-1 / base / code" in w and "slower" in w for w in texts(out["findings"]))
    # the arms compare as before: "fast" is 1.2x on both boxes
    (c,) = out["comparisons"]
    assert c["ratio"] == pytest.approx(1.2, rel=0.03)
    assert json.dumps(out, allow_nan=False)


def test_equal_hosts_show_no_measurable_effect_and_swapping_inverts_the_ratio():
    runs, cfg = _runs({"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 0.0}, seed=3)
    ab = [c for c in analyze(runs, cfg).data()["hosts"]["comparisons"] if c["arm"] == "base"][0]
    assert ab["verdict"] == "no measurable effect" and ab["ci_low"] < 1 < ab["ci_high"]
    cfg_ba = cfg.model_copy(update={"hosts": ("b", "a")})
    ba = [c for c in analyze(runs, cfg_ba).data()["hosts"]["comparisons"] if c["arm"] == "base"][0]
    assert ba["baseline"] == "b" and ba["ratio"] == pytest.approx(1 / ab["ratio"])


def test_drift_is_estimated_on_each_host():
    # box-1 slows 2 % per block of its own; box-2 holds still
    runs, cfg = _runs({"box-1": 1.0, "box-2": 1.0}, {"box-1": -0.02, "box-2": 0.0}, noise=0.002)
    out = analyze(runs, cfg).data()
    d1, d2 = out["hosts"]["drift"]["box-1"]["code"], out["hosts"]["drift"]["box-2"]["code"]
    # reference "base" is at slots 0, 2, 4 of each host: first vs last is 4 slots apart
    assert d1["reference_first_vs_last"] == pytest.approx(4 * np.log(0.98), abs=0.004)
    assert abs(d2["reference_first_vs_last"]) < 0.004
    assert d1["slope_per_block"] == pytest.approx(np.log(0.98), abs=0.002)
    assert d1["slope_ci"][0] < np.log(0.98) < d1["slope_ci"][1]
    assert abs(d2["slope_per_block"]) < 0.002
    assert any(w.startswith("box-1 / code: the reference base moved") for w in texts(out["findings"]))
    assert not any(w.startswith("box-2 / code: the reference") for w in texts(out["findings"]))


def test_no_hosts_no_section():
    runs, cfg = _runs({"only": 1.0}, {"only": 0.0}, rounds=2)
    assert analyze(runs, cfg.model_copy(update={"hosts": ()})).data()["hosts"] is None
    assert host_names(runs.drop(columns=["host"]), cfg) == []


def test_slots_count_blocks_on_each_host():
    runs, _ = _runs({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 0.0, "b": 0.0, "c": 0.0}, rounds=2)
    framed = with_slots(from_runs(runs), runs["host"])
    for _host, sub in framed.groupby("host"):
        assert sorted(sub["slot"].unique()) == [0, 1, 2, 3]
        assert (sub["slot"] == sub["position"] // 3).all()


def test_a_host_difference_is_not_reported_as_drift():
    # no drift anywhere, box-2 12 % slower: the pooled first-vs-last spans two machines
    runs, cfg = _runs({"box-1": 1.0, "box-2": 0.88}, {"box-1": 0.0, "box-2": 0.0}, noise=0.002)
    out = analyze(runs, cfg).data()
    assert not any("moved" in w for w in texts(out["findings"])), texts(out["findings"])
    assert any("box-2 vs box-1 / base / code" in w for w in texts(out["findings"]))
