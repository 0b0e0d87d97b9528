"""What the article says about what served it and on what, how it reads an A/A experiment, and how it
prints an interval too wide to mean anything (issue 31): from the committed fixture's files, with the
provenance fields a block records (bracket.engines.provenance.collect) put in its metadata, which the analysis
states in stats.json (bracket.stats.provenance) and the article words."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
from bracket import article
from bracket.experiment import config
from bracket.stats.analyze import analyze, same_settings
from bracket.stats.provenance import provenance

FIXTURE = Path(__file__).resolve().parent / "data" / "report" / "probe"


@pytest.fixture(scope="module")
def fixture_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("served")
    return article.load(
        FIXTURE / "runs.csv",
        FIXTURE / "stats.json",
        FIXTURE / "raw",
        FIXTURE / "probe.corrections.yaml",
        out,
    )


def fixture_cfg():
    """The fixture's experiment as the analysis reads it (the article reads only stats.json's echo of it)."""
    return config.load(FIXTURE / "probe.yaml", measured=True)


def with_arms(experiment, arms: dict):
    """`experiment` with these arms instead of its own, validated as the run it re-reads."""
    return config.validate({**config.as_data(experiment), "arms": arms}, source="test", measured=True)


def fixture_metas() -> dict:
    """The fixture's blocks' provenance (raw/block-K.meta.json), by block."""
    return {
        int(p.name.split(".")[0].split("-")[1]): json.loads(p.read_text())
        for p in sorted((FIXTURE / "raw").glob("block-*.meta.json"))
    }


def variant(d, *, engine=None, stats=None, metas=None, model_dir=None, model_build="fixture"):
    """The fixture's article with stats.json changed: the engine as the experiment states it, and the provenance
    the analysis states from `metas` (default: the fixture's), `model_dir` and `model_build`."""
    stats = copy.deepcopy(stats if stats is not None else d.stats)
    if engine:
        stats["experiment"]["engine"].update(engine)
    build = d.stats["provenance"]["model_build"] if model_build == "fixture" else model_build
    metas = metas if metas is not None else fixture_metas()
    stats["provenance"] = provenance(list(metas.values()), [], model_dir, build, fixture_cfg())
    return article.Data(**{**d.__dict__, "stats": stats})


def attached(d, **fields):
    """The fixture's blocks as an attach run records them: no model directory ("embedded", the default)."""
    engine = dict(kind="openai", launch="attach", embedded=False, base_url="http://127.0.0.1:8000")
    metas = {
        k: {
            **m,
            "launch": "attach",
            "engine": "openai",
            "base_url": "http://127.0.0.1:8000",
            "served_model": "Qwen/Qwen3-0.6B",
            "model": "Qwen/Qwen3-0.6B",
            **fields,
        }
        for k, m in fixture_metas().items()
    }
    return variant(d, engine=engine, metas=metas, model_dir="embedded", model_build=None)


# ---------------------------------------------------------------- what served it


def test_an_attached_server_the_engine_did_not_identify_is_named_as_declared(fixture_data):
    text = article.section_method(attached(fixture_data))._repr_markdown_()
    assert "embedded" not in text.split("Served by", 1)[1].split("\n")[0]
    assert (
        "Served by an OpenAI-compatible server reporting version 0.32.0 (engine.kind: openai; its engine was "
        "not identified), attached at http://127.0.0.1:8000"
    ) in text
    assert "Model: Qwen/Qwen3-0.6B." in text
    assert "Served from" not in text and "The model" not in text  # no directory, no build: no model section


def test_an_identified_engine_is_named_with_its_version_and_evidence(fixture_data):
    found = {"kind": "vllm", "version": "0.32.0", "evidence": "GET /version and vllm: metrics on /metrics"}
    d = attached(fixture_data, engine_identified=found)
    line = article.served_sentence(d)
    assert line.startswith(
        "Served by vLLM 0.32.0 (identified from what it serves: GET /version and vllm: metrics "
        "on /metrics), attached at http://127.0.0.1:8000"
    )


def test_a_launched_embedded_engine_names_the_engine_and_the_models_files(fixture_data):
    line = article.served_sentence(variant(fixture_data, model_dir="resources/models/tiny"))
    assert line == (
        "Served by vLLM 0.32.0 (embedded: vLLM's CPU build serving a tiny model trained locally), a fresh "
        "process per block. Model: resources/models/tiny."
    )


# ---------------------------------------------------------------- the hardware


def test_the_hardware_recorded_is_shown(fixture_data):
    hw = {"cpu": "AMD EPYC 9654 96-Core Processor", "cpus": 16, "memory_gib": 125.7, "kernel": "6.8.0"}
    gpus = [{"index": "0", "name": "NVIDIA H200", "driver": "570.86.15", "memory_mib": "143771", "bus_id": "x"}]
    metas = {k: {**m, "host_info": hw, "gpus": gpus} for k, m in fixture_metas().items()}
    text = article.section_method(variant(fixture_data, metas=metas))._repr_markdown_()
    assert (
        "Hardware: AMD EPYC 9654 96-Core Processor, 16 logical CPUs, 125.7 GiB memory, 1 x NVIDIA H200 "
        "(143771 MiB, driver 570.86.15), Linux 6.8.0."
    ) in text
    # two hosts with different machines: each named
    metas[0] = {**metas[0], "host": "b", "host_info": {**hw, "cpus": 8}, "gpus": None}
    line = article.hardware_sentence(variant(fixture_data, metas=metas))
    assert "b: AMD EPYC 9654 96-Core Processor, 8 logical CPUs, 125.7 GiB memory, no NVIDIA GPU reported" in line
    assert "vm: AMD EPYC 9654 96-Core Processor, 16 logical CPUs" in line
    # an attached server may run elsewhere: the host is bracket's
    assert "client ran on" in article.hardware_sentence(attached(fixture_data, host_info=hw))
    # nothing recorded (older records): nothing said
    assert article.hardware_sentence(fixture_data) == ""


# ---------------------------------------------------------------- an A/A experiment


def test_same_settings_tells_an_aa_experiment_from_a_control_and_a_sweep():
    def experiment(**arms):
        return config.validate({"engine": {"kind": "reference"}, "arms": arms, "reference": "first"}, source="test")

    first, again = {"label": "the server"}, {"label": "later"}
    ngram = {"speculative": {"method": "ngram", "draft_tokens": 4}}
    assert same_settings(experiment(first=first, again=again)) == {"reference": "first", "arms": ["again"], "all": True}
    assert same_settings(experiment(first=first, again=again, ngram=ngram)) == {
        "reference": "first",
        "arms": ["again"],
        "all": False,
    }
    assert same_settings(experiment(first=first, ngram=ngram)) is None
    # the reference alone: compared with itself, block by block
    assert same_settings(experiment(first=first)) == {"reference": "first", "arms": [], "all": True}


def test_an_aa_experiment_is_headlined_as_a_drift_test_and_recommends_nothing(fixture_data):
    """The fixture's runs analysed as if its three arms had the same settings: the analysis marks it A/A,
    and the article reads it as a drift test, never "Keep baseline"."""
    base = fixture_cfg()
    cfg = with_arms(base, {arm: {"label": arm} for arm in base.arms})
    stats = analyze(pd.read_csv(FIXTURE / "runs.csv"), cfg).data()
    assert stats["aa"] == {"reference": "baseline", "arms": ["ngram_4", "ngram_8"], "all": True}
    d = variant(fixture_data, stats=stats)
    verdicts = {c["verdict"] for c in stats["comparisons"]}
    title = article.title_line(d)
    assert title.startswith("A drift test (A/A): every arm ran the settings of baseline")
    if verdicts == {"no measurable effect"}:
        assert title.endswith("measured the same in every comparison (no measurable effect)")
    head = article.section_headline(d)._repr_markdown_()
    assert "this is an A/A test, a drift test" in head and "Read the verdict before the ratio" not in head
    assert head.count("the same settings:") == len(stats["comparisons"])
    # one block per arm: no interval, so it says what would give one, never "n/a"
    assert "95% CI undetermined (run " in head and "n/a" not in head
    rec = article.section_recommendations(d)._repr_markdown_()
    assert "Keep" not in rec and rec.split("\n\n")[1].startswith("None: every arm ran the settings of baseline")

    # one arm only (the reference's runs): a drift test too, never "Keep baseline"
    runs = pd.read_csv(FIXTURE / "runs.csv")
    one = with_arms(fixture_cfg(), {"baseline": {"label": "no speculation"}})
    solo = analyze(runs[runs["arm"] == "baseline"], one).data()
    d1 = variant(fixture_data, stats=solo)
    assert article.title_line(d1).startswith("A drift test: one arm, baseline (no speculation), measured block after")
    assert "- code: " in article.section_headline(d1)._repr_markdown_()
    assert (
        article.section_recommendations(d1)
        ._repr_markdown_()
        .split("\n\n")[1]
        .startswith("None: baseline was the only arm.")
    )

    # the same runs, analysed as the sweep they were: no A/A, the usual headline
    assert analyze(pd.read_csv(FIXTURE / "runs.csv"), fixture_cfg()).data()["aa"] is None
    assert not article.title_line(fixture_data).startswith("A drift test")


# ---------------------------------------------------------------- an undetermined interval


def test_an_interval_too_wide_to_read_is_printed_as_undetermined_with_the_rounds_needed(fixture_data):
    assert article.interval(0.98, 1.04, 2) == "0.98\u20131.04"
    assert article.interval(0.5, 5.0, 2) == "0.50\u20135.00"  # a factor of ten: still digits
    assert article.interval(0.004, 32765.14, 2, "run 7 rounds") == "undetermined (run 7 rounds)"
    assert article.interval(0.0, 3.0, 2) == "undetermined"
    assert article.interval(float("nan"), 3.0, 2) == "undetermined"
    assert article.interval(None, None, 2) == "n/a"
    assert article.interval(None, None, 2, "run 3 rounds") == "undetermined (run 3 rounds)"  # one block per arm
    comp = fixture_data.results.comparisons[0].model_copy(update={"rounds_needed_power": None})  # an older plan
    assert article.rounds_needed(comp.model_copy(update={"verdict": "undetermined", "rounds_needed": 7})) == (
        "run 7 rounds"
    )
    assert article.rounds_needed(comp.model_copy(update={"verdict": "undetermined", "rounds_needed": None})) == (
        "more than 200 rounds"
    )
    assert article.rounds_needed(comp.model_copy(update={"verdict": "faster", "rounds_needed": 7})) == ""


def test_the_lead_and_the_results_table_never_quote_an_unbounded_interval(fixture_data):
    stats = copy.deepcopy(fixture_data.stats)
    stats["best"]["code"].update(arm="ngram_8", ci_low=0.004, ci_high=32765.14, verdict="undetermined")
    comp = next(c for c in stats["comparisons"] if c["workload"] == "code" and c["candidate"] == "ngram_8")
    comp.update(
        verdict="undetermined",
        rounds_needed=7,
        ci_low=0.004,
        ci_high=32765.14,
        raw_ratio=3.48,
        raw_ci_low=0.004,
        raw_ci_high=32765.14,
    )
    d = variant(fixture_data, stats=stats)
    head = article.section_headline(d)._repr_markdown_()
    line = next(x for x in head.splitlines() if x.startswith("- code:"))
    assert "undetermined (run 7 rounds); verdict: undetermined" in line and "32765" not in line
    table = article.results_table(d, "code").set_index("arm")
    assert table.loc["ngram_8", "raw ratio (95% CI)"].endswith("(undetermined)")
    assert table.loc["ngram_8", "verdict rests on"].endswith("undetermined")
    assert table.loc["ngram_8", "verdict"] == "undetermined (run 7 rounds)"


def test_an_untrained_embedded_model_is_described_not_a_crash(fixture_data):
    """train_steps 0 (a model built in seconds, for a quick check) records no final loss."""
    stats = copy.deepcopy(fixture_data.stats)
    stats["provenance"]["model_build"].update(steps=0, final_loss=None)
    d = article.Data(**{**fixture_data.__dict__, "stats": stats})
    assert "0 training steps" in article.section_method(d)._repr_markdown_()
    assert "untrained (no final loss)" in article.section_method(d)._repr_markdown_()
