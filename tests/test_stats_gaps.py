"""The gap between consecutive blocks (bracket.stats.gaps), in stats.json and in the article's method."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from bracket import article
from bracket.article.findings import message
from bracket.experiment import config
from bracket.stats.analyze import analyze
from bracket.stats.gaps import EXCESS_S, block_gaps, findings

FIXTURE = Path(__file__).resolve().parent / "data" / "report" / "probe"


def meta(block, host, start, end, status="complete"):
    return {"block": block, "host": host, "started_at": start, "ended_at": end, "status": status}


# Host a: blocks 0, 1, 2 end at 1100, 1200, 1400 and start at 1000, 1110, 1290: gaps 10 s and 90 s.
# Host b: blocks 3, 4: 1050 -> 1055, a gap of 5 s. A failed attempt and a block without times are left out.
METAS = [
    meta(2, "a", 1290.0, 1400.0),
    meta(4, "b", 1055.0, 1100.0),
    meta(0, "a", 1000.0, 1100.0),
    meta(3, "b", 1000.0, 1050.0),
    meta(1, "a", 1110.0, 1200.0),
    meta(5, "a", 1500.0, 1510.0, status="failed"),
    {"block": 6, "host": "a", "started_at": 1600.0},
]


def test_gaps_are_taken_per_host_in_the_order_blocks_ran():
    g = block_gaps(METAS, cooldown_s=5)
    assert [(r["host"], r["after"], r["before"], r["gap_s"]) for r in g["gaps"]] == [
        ("a", 0, 1, 10.0),
        ("a", 1, 2, 90.0),
        ("b", 3, 4, 5.0),
    ]
    assert (g["n"], g["median_s"], g["max_s"], g["cooldown_s"]) == (3, 10.0, 90.0, 5.0)
    # 90 s is more than the cooldown (5 s) + 60 s; 10 s and 5 s are not
    assert g["over"] == 1 and EXCESS_S == 60


def test_a_gap_far_beyond_the_cooldown_is_a_finding_and_one_within_it_is_not():
    (f,) = findings(block_gaps(METAS, cooldown_s=5))
    assert f.kind == "gaps" and f.payload.over == 1 and f.payload.max_s == 90.0
    assert message(f).startswith(
        "1 of 3 gaps between consecutive blocks exceeded the design's cooldown (5 s) by more "
        "than 60 s (longest 90 s, median 10 s)"
    )
    assert "cluster.allocation: per_host" in message(f)
    # with a 30 s cooldown the 90 s gap is exactly cooldown + 60 s: not over
    assert block_gaps(METAS, cooldown_s=30)["over"] == 0 and findings(block_gaps(METAS, cooldown_s=30)) == []


def test_fewer_than_two_blocks_on_every_host_give_no_gaps():
    assert block_gaps([meta(0, "a", 1.0, 2.0), meta(1, "b", 3.0, 4.0)], 0) is None
    assert block_gaps([], 0) is None and findings(None) == []


def test_analyze_puts_the_gaps_into_stats_and_the_article_states_them(tmp_path):
    probe = config.load(FIXTURE / "probe.yaml")
    cfg = probe.model_copy(update={"design": probe.design.model_copy(update={"cooldown_s": 5})})
    runs = pd.read_csv(FIXTURE / "runs.csv")
    stats = analyze(runs, cfg, metas=METAS).data()
    assert stats["gaps"]["median_s"] == 10.0 and stats["gaps"]["max_s"] == 90.0
    assert any(f["kind"] == "gaps" and "gaps between consecutive blocks" in message(f) for f in stats["findings"])
    assert analyze(runs, cfg).data()["gaps"] is None  # no provenance given: nothing claimed
    json.dumps(stats, allow_nan=False)

    d = article.load(
        FIXTURE / "runs.csv",
        FIXTURE / "stats.json",
        FIXTURE / "raw",
        FIXTURE / "probe.corrections.yaml",
        tmp_path,
    )
    d = article.Data(**{**d.__dict__, "stats": {**d.stats, "gaps": stats["gaps"]}})
    text = article.section_method(d)._repr_markdown_()
    assert (
        "Blocks followed each other after a median gap of 10.0 s (max 90.0 s), from one block's end to the next "
        "one's server start on its host; the design's cooldown is 5 s, and 1 of 3 gaps exceeded it by more than "
        "60 s."
    ) in text
