"""stats.json files committed before issue 29 (verdict_ci_*; ratio/ci_* the raw fit) read in today's
contract (ci_* the interval the verdict rests on, raw_* the fit without drift): bracket.stats.contract."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from bracket import article
from bracket.stats.cells import compare_arms
from bracket.stats.contract import OLD, current, current_comparison
from bracket.stats.io import from_table
from bracket.stats.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
OLD_FILES = sorted([*(ROOT / "bench" / "results").rglob("*stats.json"), *(ROOT / "studies").rglob("*stats.json")])
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_files_read_in_todays_contract(path):
    before = json.loads(path.read_text())
    after = current(before)
    olds = [c for c in before["comparisons"] if "verdict_ci_low" in c]
    for old, new in zip(before["comparisons"], after["comparisons"]):
        assert not any(k in new for k in OLD)
        if old not in olds:
            assert new == old
            continue
        # the verdict's interval moves to ci_*, the raw fit to raw_*
        assert (new["ci_low"], new["ci_high"], new["ci_level"]) == (
            old["verdict_ci_low"],
            old["verdict_ci_high"],
            old["verdict_ci_level"],
        )
        assert (new["raw_ratio"], new["raw_ci_low"], new["raw_ci_high"]) == (
            old["ratio"],
            old["ci_low"],
            old["ci_high"],
        )
        # the ratio is the centre of the interval it is printed with
        assert new["ratio"] == (old["drift_adjusted_ratio"] if old["basis"] == "drift-adjusted" else old["ratio"])
        assert new["ci_low"] <= new["ratio"] <= new["ci_high"]
        assert new["verdict"] == old["verdict"]


def test_old_undetermined_gets_the_basis_ci_and_one_block_none():
    """Where an old file left the verdict's interval empty beside "undetermined", today's contract puts the
    basis fit's CI at `confidence` there; with one block per arm no interval supports a verdict."""
    old = {
        "ratio": 1.02,
        "ci_low": 0.97,
        "ci_high": 1.07,
        "basis": "drift-adjusted",
        "drift_adjusted_ratio": 1.01,
        "drift_adjusted_ci_low": 0.9,
        "drift_adjusted_ci_high": 1.12,
        "confidence": 0.95,
        "verdict": "undetermined",
        "blocks_baseline": 3,
        "blocks_candidate": 3,
        "verdict_ci_low": None,
        "verdict_ci_high": None,
        "verdict_ci_level": None,
    }
    new = current_comparison(old)
    assert (new["ratio"], new["ci_low"], new["ci_high"], new["ci_level"]) == (1.01, 0.9, 1.12, 0.95)
    assert (new["raw_ratio"], new["raw_ci_low"], new["raw_ci_high"]) == (1.02, 0.97, 1.07)
    one = current_comparison({**old, "basis": "raw", "blocks_baseline": 1, "blocks_candidate": 1})
    assert (one["ratio"], one["ci_low"], one["ci_high"], one["ci_level"]) == (1.02, None, None, None)
    assert (one["raw_ci_low"], one["raw_ci_high"]) == (0.97, 1.07)


def test_todays_comparisons_and_the_fixture_pass_unchanged():
    df = simulate("abab", effect=1.03, rounds=4, drift=0.01, rng=np.random.default_rng(3), seed=1)
    c = compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200)
    row = dataclasses.asdict(c)
    assert current_comparison(row) is row
    fixture = json.loads((FIXTURE / "stats.json").read_text())
    assert fixture["stats_version"] == 4  # version 5 is version 4's JSON, typed: only the number changes
    assert current(fixture) == {**fixture, "stats_version": 5}
    today = {**fixture, "stats_version": 5}
    assert current(today) is today


def test_the_article_reads_an_old_file_in_todays_contract(tmp_path):
    """The article (bracket.article.load) meets committed files when a bench re-renders one."""
    stats = json.loads((FIXTURE / "stats.json").read_text())
    c = stats["comparisons"][0]
    lo, hi = c["raw_ci_low"], c["raw_ci_high"]  # an old file's ci_* were the raw fit's
    c.update(ci_low=lo, ci_high=hi, verdict_ci_low=lo * 0.9, verdict_ci_high=hi * 1.1, verdict_ci_level=0.99)
    old = tmp_path / "stats.json"
    old.write_text(json.dumps(stats))
    d = article.load(
        FIXTURE / "runs.csv",
        old,
        FIXTURE / "raw",
        FIXTURE / "probe.corrections.yaml",
        tmp_path / "out",
    )
    got = d.stats["comparisons"][0]
    assert (got["ci_low"], got["ci_high"], got["ci_level"]) == (c["verdict_ci_low"], c["verdict_ci_high"], 0.99)
    assert (got["raw_ci_low"], got["raw_ci_high"]) == (c["ci_low"], c["ci_high"])
