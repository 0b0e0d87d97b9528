"""The article only formats: every number and judgement it states is read from stats.json.

The committed fixture (tests/data/report/probe) is rendered section by section, as
notebooks/article.py does, with its raw records and their provenance withheld (no raw/): runs.csv is
there for the raw tables only. Then stats.json is changed where the article used to work things out
itself (efficiency and flatness, the draft budget's effect, tokens per event, the recommendation, the
design that ran, the findings) and the text must follow stats.json, not runs.csv.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from bracket import article
from bracket.article.findings import group
from bracket.article.text import pct, rate
from bracket.stats import findings as F

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"
FILES = ("probe.yaml", "stats.json", "runs.csv", "schedule.csv", "weights.json", "ceiling.json")


def _dir(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    for name in FILES:
        shutil.copy(FIXTURE / name, src / name)
    return src  # no raw/: no block records, no meta, no model build, no corrections ledger


def _render(src: Path, out: Path) -> tuple[str, article.Data]:
    d = article.load(
        src / "probe.yaml",
        src / "runs.csv",
        src / "stats.json",
        src / "weights.json",
        src / "ceiling.json",
        src / "schedule.csv",
        src / "raw",
        None,
        out,
    )
    sections = [
        article.section_headline(d),
        article.section_ceiling(d),
        article.section_results(d),
        article.section_speculative(d),
        article.section_drift(d),
        article.section_recommendations(d),
        article.section_warnings(d),
        article.section_method(d),
        article.section_raw(d),
    ]
    return "\n".join(_words(s) for s in sections if s is not None), d


def _words(section: article.Section) -> str:
    """The section's prose as written (before escaping for Markdown or HTML): headings, paragraphs, bullets."""
    out = []
    for item in section.items:
        if isinstance(item, article.Bullets):
            out += list(item.items)
        elif isinstance(item, (article.Heading, article.Para)):
            out.append(item.text)
    return "\n".join(out)


def _edit(src: Path, change) -> None:
    stats = json.loads((src / "stats.json").read_text())
    change(stats)
    (src / "stats.json").write_text(json.dumps(stats))


def test_the_fixture_is_in_todays_contract():
    stats = json.loads((FIXTURE / "stats.json").read_text())
    assert stats["stats_version"] == 2 and "warnings" not in stats
    assert all("payload" in f and "message" not in f for f in stats["findings"])


def test_the_article_states_the_numbers_of_stats_json(tmp_path):
    md, d = _render(_dir(tmp_path), tmp_path / "out")
    s = d.stats
    ref = s["physics"]["reference_reading"]
    assert f"Measured: {rate(ref['median'])} tok/s, or {pct(ref['efficiency'], 0)} of the ceiling" in md
    each = ", ".join(f"{w['workload']} {rate(w['median'])}" for w in ref["workloads"])
    assert f"Across workloads the reference's medians differ by {pct(ref['spread'])} ({each})." in md
    for g in s["budget_groups"]:
        for w in g["workloads"]:
            assert f"{w['workload']} {pct(w['change'], 1, True)}" in md
    for t in s["tokens_per_event"]:
        assert f"{t['arm']}: {t['tokens_per_event']:.2f} tokens per event" in md
    ran = s["design_ran"]
    assert f"Design: abab, {ran['rounds']} round, {ran['blocks']} blocks in the order below" in md
    assert f"{ran['warmup_runs']} warmup run and {ran['runs_per_block']} timed runs" in md
    recs, _ = article.recommendations(d)
    assert list(recs["use"]) == [s["best"][w]["use"] for w in recs["workload"]]
    assert s["findings"] and all(line in md for line in group(s["findings"]))


def test_the_text_follows_stats_json_not_runs_csv(tmp_path):
    src = _dir(tmp_path)
    runs = pd.read_csv(src / "runs.csv")
    runs["stream_events"] = 1  # were the article counting events itself, it would now say 256 per event
    runs.to_csv(src / "runs.csv", index=False)

    def change(s):
        r = s["physics"]["reference_reading"]
        r.update(spread=0.5, flat=False, regime="bandwidth-bound", median=12.5, efficiency=0.875)
        g = s["budget_groups"][0]
        g["workloads"][0]["change"] = 0.4321
        g["same_direction"] = True
        s["tokens_per_event"] = [{"arm": "ngram_4", "tokens_per_event": 7.0}]
        s["design_ran"].update(
            rounds=5, runs_per_block_min=9, runs_per_block_max=9, warmup_runs_min=2, warmup_runs_max=2
        )
        for b in s["best"].values():
            b.update(use="ngram_8", use_because="shown faster")
        s["findings"] = [
            F.Finding(F.FindingKind.SLOW_FIRST_RUN, F.SlowFirstRun(2, 3), arm="ngram_8", workload="code").record()
        ]

    _edit(src, change)
    md, d = _render(src, tmp_path / "out")
    assert "Measured: 12.50 tok/s, or 88% of the ceiling" in md
    assert "bandwidth-bound: the clock mostly measures how long it takes to read the weights" in md
    assert "differ by 50.0%" in md and "The rate moves with the work" in md
    w = d.stats["budget_groups"][0]["workloads"][0]["workload"]
    assert f"moves every workload the same way: {w} +43.2%" in md
    assert "ngram_4: 7.00 tokens per event" in md and "256.00 tokens per event" not in md
    assert "Design: abab, 5 rounds," in md and "2 warmup runs and 9 timed runs" in md
    recs, _ = article.recommendations(d)
    assert set(recs["use"]) == {"ngram_8"}
    assert "the first timed run was the slowest in 2 of 3 blocks: raise design.warmup_runs. (ngram_8 / code)" in md


def test_an_unmeasured_arm_is_the_one_stats_json_names(tmp_path):
    src = _dir(tmp_path)
    md, d = _render(src, tmp_path / "out")
    assert d.stats["unmeasured"] == [] and "has no valid run" not in md  # every arm of the fixture ran
    _edit(src, lambda s: s.update(unmeasured=[{"what": "arm", "name": "ngram_4", "reasons": {"error": 2}}]))
    md, d = _render(src, tmp_path / "out")
    assert "Error: arm ngram_4 has no valid run (2 error); nothing below measures it." in md
    assert article.title_line(d).startswith("No arm can be named fastest: ngram_4 had no valid run")


def test_a_block_that_ran_short_is_said_as_a_range(tmp_path):
    src = _dir(tmp_path)
    _edit(src, lambda s: s["design_ran"].update(runs_per_block_min=2, runs_per_block_max=3))
    md, _ = _render(src, tmp_path / "out")
    assert "1 warmup run and 2 to 3 timed runs" in md


@pytest.mark.parametrize(
    "key", ["physics", "budget_groups", "tokens_per_event", "design_ran", "unmeasured", "drift_worst"]
)
def test_a_version_1_file_is_read_with_the_same_numbers(tmp_path, key):
    """An older stats.json (no stats_version) gets what it lacks from the same functions of bracket.stats:
    the article reads it as it reads today's."""
    src = _dir(tmp_path)
    today = json.loads((src / "stats.json").read_text())

    def old(s):
        del s["stats_version"]
        if key == "physics":
            for k in ("reference_reading", "above_ceiling"):
                del s["physics"][k]
        elif key == "budget_groups":
            s["budget_groups"] = [{k: g[k] for k in ("method", "arms", "budgets")} for g in s["budget_groups"]]
        else:
            del s[key]

    _edit(src, old)
    _, d = _render(src, tmp_path / "out")
    if key == "tokens_per_event":  # from runs.csv as written: equal to its last digits
        assert [t["arm"] for t in d.stats[key]] == [t["arm"] for t in today[key]]
        assert [t[key] for t in d.stats[key]] == pytest.approx([t[key] for t in today[key]], rel=1e-12)
    else:
        assert d.stats[key] == today[key]
