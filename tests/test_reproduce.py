"""Reproduction: the derived experiment, the verdict rule on seed 000's numbers, and the append-only ledger."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bracket import article
from bracket.controls import corrections, reproduce
from bracket.experiment import config
from bracket.stats.summary import summarize
from conftest import ROOT

from tests.support import repo_copy

# Seed 000, round three: ten fresh runs of DFlash2 at draft budget 12, and the no-speculation baseline.
TEN = [56.63, 63.76, 68.46, 68.17, 66.68, 62.98, 64.56, 65.48, 63.47, 69.30]
BASE_TEN = [12.32, 12.38, 12.33, 12.34, 12.31, 12.30, 12.34, 12.31, 12.31, 12.31]


def stats_with(cells, comparisons=(), reference="REF"):
    return {
        "reference": reference,
        "confidence": 0.95,
        "cells": list(cells),
        "comparisons": list(comparisons),
        "drift": {},
    }


def cell(arm, values, workload="code", **extra):
    s = summarize(values, rng=20261129, n_resamples=2000)
    return {
        "arm": arm,
        "workload": workload,
        "n": s.n,
        "median": s.median,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
        "min": s.min,
        "max": s.max,
        "spread": s.spread,
        **extra,
    }


# The original: five runs with median 68.57 (round two's D1), beside a baseline at 12.44.
ORIGINAL = stats_with(
    [
        {
            "arm": "D1",
            "workload": "code",
            "n": 5,
            "median": 68.57,
            "ci_low": 60.1,
            "ci_high": 70.2,
            "min": 60.1,
            "max": 70.2,
            "spread": 0.147,
        },
        {
            "arm": "REF",
            "workload": "code",
            "n": 5,
            "median": 12.44,
            "ci_low": 12.4,
            "ci_high": 12.5,
            "min": 12.4,
            "max": 12.5,
            "spread": 0.008,
        },
    ],
    [{"candidate": "D1", "workload": "code", "ratio": 68.57 / 12.44, "ci_low": 5.3, "ci_high": 5.7}],
)


def repro_stats(ratio_ci=(5.05, 5.45)):
    return stats_with(
        [cell("D1", TEN), cell("REF", BASE_TEN)],
        [
            {
                "candidate": "D1",
                "workload": "code",
                "ratio": 65.0181 / 12.3162,
                "ci_low": ratio_ci[0],
                "ci_high": ratio_ci[1],
            }
        ],
    )


def test_seed_000_five_run_median_does_not_hold():
    """68.57 over 5 runs lies above the 95 % CI of ten fresh runs (upper edge below 68.57: the bootstrap
    median reaches 68.57 only when at least 5 of 10 draws are 69.30, probability < 0.002)."""
    v = reproduce.verdict(ORIGINAL, repro_stats(), "D1", ["code"])
    c = v["cells"][0]
    assert c["reproduction"]["median"] == pytest.approx(65.02, abs=0.005)
    assert c["reproduction"]["ci_high"] < 68.57
    assert c["median_inside_ci"] is False
    assert c["ratio_inside_ci"] is False  # 5.51x against a same-session CI of 5.05x-5.45x
    assert v["verdict"] == c["verdict"] == reproduce.FAILS
    assert reproduce.sentence(c).startswith("was 68.57 over 5 runs; 10 fresh runs give 65.02, 56.6\u201369.3")
    assert "ratio to REF in the same session 5.28x" in reproduce.sentence(c)
    assert "was 5.51x" in reproduce.sentence(c)


def test_a_figure_holds_when_median_and_ratio_lie_inside_both_cis():
    original = stats_with(
        [{**ORIGINAL["cells"][0], "median": 65.5}, ORIGINAL["cells"][1]],
        [{"candidate": "D1", "workload": "code", "ratio": 5.30, "ci_low": 5.1, "ci_high": 5.6}],
    )
    v = reproduce.verdict(original, repro_stats(), "D1", ["code"])
    assert v["verdict"] == reproduce.HOLDS
    assert reproduce.correction_entries(v, "x", "x--repro-1", "2026-11-29") == []


def test_ratio_survives_drift_but_the_absolute_number_does_not():
    """The absolute median moved (drift), the ratio did not: still a correction, and it says which check failed."""
    original = stats_with(
        ORIGINAL["cells"], [{"candidate": "D1", "workload": "code", "ratio": 5.30, "ci_low": 5.1, "ci_high": 5.6}]
    )
    v = reproduce.verdict(original, repro_stats(), "D1", ["code"])
    (c,) = v["cells"]
    assert (c["median_inside_ci"], c["ratio_inside_ci"], c["verdict"]) == (False, True, reproduce.FAILS)
    (entry,) = reproduce.correction_entries(v, "sweep", "sweep--repro-1", "2026-11-29")
    assert entry["correction"].endswith("Outside the reproduction's CI: the median.")
    assert entry["claim"].startswith("D1 / code decodes at 68.57 tok/s (5 runs, 60.1\u201370.2)")
    assert entry["evidence"].startswith("results/sweep--repro-1/verdict.json")


def test_undecided_without_a_ci_and_without_runs():
    one = stats_with([{**cell("D1", [65.0]), "ci_low": None, "ci_high": None}])
    assert reproduce.verdict(ORIGINAL, one, "D1", ["code"])["verdict"] == reproduce.UNDECIDED
    v = reproduce.verdict(ORIGINAL, repro_stats(), "D1", ["code", "chat"])
    assert v["cells"][1]["verdict"] == reproduce.UNDECIDED and "no valid runs" in v["cells"][1]["note"]
    assert v["verdict"] == reproduce.FAILS  # the worst cell decides


def test_a_reproduction_on_another_model_refuses_to_compare(tmp_path):
    """The original served weights with one sha256, the reproduction another: the figures that would
    not hold are not judged and no ledger entry is written; the article says why."""
    import json

    for who, h in (("original", "a" * 64), ("repro", "b" * 64)):
        raw = tmp_path / who / "raw"
        raw.mkdir(parents=True)
        for k in range(2):
            (raw / f"block-{k}.meta.json").write_text(json.dumps({"model_sha256": {"file": "m.gguf", "sha256": h}}))
    models = {
        "original": reproduce.served_models(tmp_path / "original" / "raw"),
        "reproduction": reproduce.served_models(tmp_path / "repro" / "raw"),
    }
    assert models == {"original": ["a" * 64], "reproduction": ["b" * 64]}
    v = reproduce.verdict(ORIGINAL, repro_stats(), "D1", ["code"], models)
    assert v["verdict"] == v["cells"][0]["verdict"] == reproduce.OTHER_MODEL
    assert "sha256 bbbbbbbbbbbb" in v["refused"] and "original aaaaaaaaaaaa" in v["refused"]
    assert reproduce.correction_entries(v, "x", "x--repro-1", "2026-11-29") == []
    v.update(name="x--repro-1", id="1", runs=10, created="2026-11-29T08:00:00+00:00", rule=reproduce.RULE)
    md = article.section_reproductions(
        None, article.Controls(verdicts=[v], determinism=None, agreement=None, arena=None)
    )._repr_markdown_()
    assert "Not compared" in md and "other weights" in md
    # the same model, or a session that recorded no hash, is compared as before
    same = reproduce.verdict(
        ORIGINAL, repro_stats(), "D1", ["code"], {"original": ["a" * 64], "reproduction": ["a" * 64]}
    )
    assert same["verdict"] == reproduce.FAILS
    assert (
        reproduce.verdict(ORIGINAL, repro_stats(), "D1", ["code"], {"original": [], "reproduction": ["b" * 64]})[
            "verdict"
        ]
        == reproduce.FAILS
    )


# ---------------------------------------------------------------- the derived experiment


def smoke():
    return config.load(ROOT / "experiments" / "smoke.yaml")


def test_derive_brackets_the_arm_with_the_reference():
    base = smoke()
    before = config.as_data(base)
    cfg = reproduce.derive(base, "smoke", "ngram_4", ["code"], 10, "r1", created="2026-11-29T08:00:00+00:00")
    assert config.as_data(base) == before  # the base experiment is left as it was
    assert list(cfg.arms) == ["baseline", "ngram_4"] and cfg.reference == "baseline"
    assert cfg.arms["ngram_4"] == base.arms["ngram_4"] and cfg.arms["baseline"] == base.arms["baseline"]
    assert list(cfg.workloads) == ["code"]
    assert config.as_data(cfg.design) == {
        **config.as_data(base.design),
        "kind": "bracket",
        "rounds": 1,
        "runs_per_block": 10,
    }
    assert cfg.controls.determinism is False
    from bracket.experiment import design

    assert [b.arm for b in design.from_config(cfg)] == ["baseline", "ngram_4", "baseline"]
    assert cfg.request == base.request and cfg.engine == base.engine
    assert cfg.reproduces.experiment == "smoke" and cfg.reproduces.runs == 10
    assert cfg.reproduces.created == "2026-11-29T08:00:00+00:00"


def test_a_cell_of_an_adaptive_experiment_is_reproduced_in_one_fixed_round():
    """The adaptive design's stopping keys do not carry over to the reproduction's one bracket round."""
    raw = yaml.safe_load((ROOT / "experiments" / "smoke.yaml").read_text())
    raw["design"] = {**raw.get("design", {}), "kind": "abba", "rounds": "adaptive", "max_rounds": 6}
    base = config.validate(raw)
    assert base.design.max_rounds == 6 and base.design.min_rounds == 2
    cfg = reproduce.derive(base, "smoke", "ngram_4", ["code"], 4, "r1")
    d = cfg.design
    assert (d.kind, d.rounds, d.runs_per_block) == ("bracket", 1, 4)
    assert (d.min_rounds, d.max_rounds, d.target, d.margin) == (None, None, None, None)
    assert d.seed == base.design.seed and d.warmup_runs == base.design.warmup_runs


@pytest.mark.parametrize(
    "arm, wls, runs, needle",
    [
        ("ngram_9", None, 10, "no arm 'ngram_9'"),
        ("baseline", None, 10, "is the reference arm"),
        ("ngram_4", ["prose"], 10, "no workload 'prose'"),
        ("ngram_4", None, 1, "at least 2 runs"),
    ],
)
def test_derive_names_the_mistake(arm, wls, runs, needle):
    with pytest.raises(reproduce.ReproduceError, match=needle):
        reproduce.derive(smoke(), "smoke", arm, wls, runs, "r1")


def test_request_from_config_and_names():
    now = dt.datetime(2026, 11, 29, 8, 5, 0, tzinfo=dt.timezone.utc)
    r = reproduce.request_from_config({"experiment": "smoke", "cell": "ngram_4,code", "runs": 5}, now=now)
    assert (r.base, r.arm, r.workloads, r.runs, r.name) == (
        "smoke",
        "ngram_4",
        ["code"],
        5,
        "smoke--repro-20261129T080500Z",
    )
    assert reproduce.request_from_config({"experiment": "smoke"}) is None
    assert reproduce.base_of(r.name) == "smoke" and reproduce.is_derived(r.name)
    assert reproduce.experiment_path("/w", r.name) == Path("/w/results") / r.name / "experiment.yaml"
    assert reproduce.experiment_path("/w", "smoke") == Path("/w/experiments/smoke.yaml")
    with pytest.raises(reproduce.ReproduceError, match="id"):
        reproduce.request_from_config({"experiment": "smoke", "cell": "ngram_4", "id": "a/b"})


def test_the_derived_config_is_recorded_once(tmp_path):
    cfg = reproduce.derive(smoke(), "smoke", "ngram_4", ["code"], 5, "r1")
    p = reproduce.record(cfg, tmp_path / "experiment.yaml")
    assert config.load(p) == cfg  # loads back as the same validated experiment
    before = p.read_text()
    # the same input records the same bytes: the experiment as data, keys as validated
    when = cfg.reproduces.created
    again = reproduce.derive(smoke(), "smoke", "ngram_4", ["code"], 5, "r1", created=when)
    assert reproduce.record(again, tmp_path / "again.yaml").read_bytes() == p.read_bytes()
    assert yaml.safe_load(before) == config.as_data(cfg)
    reproduce.record(reproduce.derive(smoke(), "smoke", "ngram_4", ["code"], 5, "r1"), p)
    assert p.read_text() == before  # never rewritten (created stays)
    with pytest.raises(reproduce.ReproduceError, match="another --config id"):
        reproduce.record(reproduce.derive(smoke(), "smoke", "ngram_4", None, 5, "r1"), p)


# ---------------------------------------------------------------- the ledger

ENTRY = {
    "date": "2026-11-29",
    "claim": "D1 / code decodes at 68.57 tok/s (5 runs, 60.1\u201370.2)",
    "correction": "was 68.57 over 5 runs; 10 fresh runs give 65.02, 56.6\u201369.3",
    "evidence": "results/x--repro-1/verdict.json",
}


def test_ledger_is_append_only(tmp_path):
    p = tmp_path / "x.corrections.yaml"
    hand = (
        "# written by hand\n- date: '2026-11-01'\n  claim: ngram_8 is fastest everywhere\n"
        "  correction: only on code\n  evidence: stats.json best\n"
    )
    p.write_text(hand)
    assert corrections.append(p, [ENTRY]) == [ENTRY]
    text = p.read_text()
    assert text.startswith(hand)  # every earlier byte kept
    assert [e["claim"] for e in article.load_corrections(p)] == ["ngram_8 is fastest everywhere", ENTRY["claim"]]
    assert corrections.append(p, [ENTRY]) == []  # the same evidence twice: nothing added
    assert p.read_text() == text
    second = {**ENTRY, "evidence": "results/x--repro-2/verdict.json"}
    corrections.append(p, [second])
    assert p.read_text().startswith(text)
    assert [e["evidence"] for e in article.load_corrections(p)][1:] == [ENTRY["evidence"], second["evidence"]]


def test_ledger_created_with_a_header_and_refuses_what_it_cannot_append_to(tmp_path):
    p = tmp_path / "new.corrections.yaml"
    corrections.append(p, [ENTRY])
    assert p.read_text().startswith("# Corrections") and article.load_corrections(p) == [ENTRY]
    flow = tmp_path / "flow.corrections.yaml"
    flow.write_text("[]\n")
    with pytest.raises(article.CorrectionsError, match="block list"):
        corrections.append(flow, [ENTRY])
    assert flow.read_text() == "[]\n"
    with pytest.raises(article.CorrectionsError, match="exactly"):
        corrections.append(p, [{"date": "x", "claim": "y"}])


def test_ledger_entries_survive_re_rendering(tmp_path):
    """The corrections section renders every entry, in order, each time it is built from the file."""
    p = tmp_path / "x.corrections.yaml"
    corrections.append(p, [ENTRY])
    d = article.Data(
        name="x",
        runs=None,
        stats={},
        schedule=None,
        raw=[],
        corrections=article.load_corrections(p),
        corrections_path=str(p),
        out_dir=tmp_path,
    )
    first = article.section_corrections(d)._repr_markdown_()
    corrections.append(p, [{**ENTRY, "evidence": "results/x--repro-2/verdict.json", "claim": "second claim"}])
    d.corrections = article.load_corrections(p)
    again = article.section_corrections(d)._repr_markdown_()
    assert "65.02" in first and first.split("second claim")[0] in again
    assert again.index("68.57") < again.index("second claim")


def test_reproductions_section_shows_both_sessions(tmp_path):
    v = reproduce.verdict(ORIGINAL, repro_stats(), "D1", ["code"])
    v.update(name="x--repro-1", id="1", runs=10, created="2026-11-29T08:00:00+00:00", rule=reproduce.RULE)
    c = article.Controls(verdicts=[v], determinism=None, agreement=None, arena=None)
    md = article.section_reproductions(None, c)._repr_markdown_()
    assert "does not hold" in md and "68.57" in md and "65.02" in md and "5.28x" in md


# ---------------------------------------------------------------- the rules


@pytest.mark.integration
def test_reproduce_dry_run_plans_a_bracket_beside_the_reference(tmp_path):
    wf = repo_copy(tmp_path / "wf")  # a dry run still writes Snakemake's cache (.snakemake/), so not in the checkout
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "snakemake"),
            "-n",
            "--cores",
            "1",
            "reproduce",
            "--config",
            "experiment=smoke",
            "cell=ngram_4,code",
            "runs=5",
            "id=pytestdry",
        ],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "results/smoke--repro-pytestdry/verdict.json" in out.stdout
    assert not (wf / "results" / "smoke--repro-pytestdry").exists()  # a dry run records nothing
    bad = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "--cores", "1", "reproduce"],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "cell=ARM" in bad.stdout + bad.stderr
