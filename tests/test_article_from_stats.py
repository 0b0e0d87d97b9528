"""The article only formats: every number and judgement it states is read from stats.json.

The committed fixture (tests/data/report/probe) is rendered section by section, as
notebooks/article.py does, from stats.json and runs.csv alone: the experiment file, weights.json,
ceiling.json, schedule.csv and the raw records with their provenance (raw/: the blocks' meta, the failed
attempts, the model's build record) are all withheld, and runs.csv is there for the raw tables only. Then
stats.json is changed where the article used to work things out itself or read another file (efficiency and
flatness, the draft budget's effect, tokens per event, the recommendation, the design that ran, the findings;
the experiment's title, arms, labels, workloads, design and request; the byte account and the ceiling; what
ran: the schedule's status, what served, the hardware, the launch commands, the arms' flags and server state,
failed blocks and attempts, the model's build) and the text must follow stats.json.
A last test reads the article package's source: it imports nothing that reads an experiment file, a
byte account or a ceiling, and names no such file, no block meta, failed attempts or build record.
"""

from __future__ import annotations

import ast
import copy
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from bracket import article
from bracket.article.findings import group
from bracket.article.text import TIMES, pct, rate, size
from bracket.engines.provenance import read_block_metas
from bracket.experiment import config
from bracket.stats import findings as F
from bracket.stats.contract import OldStats, current

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"
FILES = ("stats.json", "runs.csv")
PACKAGE = ROOT / "workflow" / "bracket" / "article"


def _dir(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    for name in FILES:
        shutil.copy(FIXTURE / name, src / name)
    assert sorted(p.name for p in src.iterdir()) == sorted(FILES)
    return src  # no experiment, weights, ceiling or schedule file; no raw/: no records, meta, model build, ledger


def _render(src: Path, out: Path) -> tuple[str, article.Data]:
    d = article.load(src / "runs.csv", src / "stats.json", src / "raw", None, out)
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
    assert stats["stats_version"] == 4 and "warnings" not in stats
    assert {"experiment", "physics", "provenance"} <= set(stats) and {"weights", "ceiling"} <= set(stats["physics"])
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


def test_the_experiment_byte_account_and_ceiling_are_the_ones_stats_json_states(tmp_path):
    src = _dir(tmp_path)
    md, d = _render(src, tmp_path / "out")
    e, w, c = d.stats["experiment"], d.stats["physics"]["weights"], d.stats["physics"]["ceiling"]
    assert md.startswith(e["title"]) and f"The question: {e['question']}" in md
    assert d.arms == [a["arm"] for a in e["arms"]] and d.workloads == e["workloads"]
    assert "baseline (no speculation)" in md  # the reference's label
    r = e["request"]
    assert f"Requests: max_tokens {r['max_tokens']}, temperature {r['temperature']}, seed {r['seed']}; " in md
    assert f"drawn once with seed {e['design']['seed']} and recorded" in md
    assert "Served by vLLM" in md and "(embedded: vLLM's CPU build serving a tiny model trained locally)" in md
    bpt = size(w["bytes_per_token"])
    assert f"{c['bandwidth_gbps']:.4g} GB/s {TIMES} {bpt} = {c['ceiling_tok_s']:.2f} tok/s" in md
    assert "A text token reads 8.39 MB: everything stored, because the output layer is the embedding" in md
    assert list(d.schedule["arm"]) == [b["arm"] for b in e["schedule"]]

    def change(s):
        e = s["experiment"]
        e.update(title="Another title", question="Another question?", workloads=["chat", "prose", "code"])
        e["arms"] = [e["arms"][2], e["arms"][0], {**e["arms"][1], "label": "four drafted"}]
        e["request"].update(max_tokens=99, temperature=0.5, seed=7, unique_prefix=False)
        e["design"].update(kind="abba", seed=42, cooldown_s=3)
        e["engine"].update(kind="llamacpp", embedded=False, model="/models/m.gguf")
        # what ran names no engine (no block recorded one): the experiment's is said
        s["provenance"]["served"].update(kind=None, versions=[])
        e["schedule"] = [{"position": 0, "arm": "ngram_8", "round": 1, "seed": 5}]
        w = s["physics"]["weights"]
        w.update(tied_embeddings=False, model="the-model", notes=["a note of the account"])
        s["physics"]["ceiling"].update(
            bandwidth_gbps=14.4, ceiling_tok_s=1715.46, bandwidth_source={"kind": "probe", "method": "a copy loop"}
        )

    _edit(src, change)
    md, d = _render(src, tmp_path / "out")
    assert md.startswith("Another title") and "The question: Another question?" in md
    assert d.arms == ["ngram_8", "baseline", "ngram_4"] and d.workloads == ["chat", "prose", "code"]
    assert d.label("ngram_4") == "ngram_4 (four drafted)"
    arms = next(
        t.frame for t in article.section_method(d).items if isinstance(t, article.Table) and t.csv == "arms.csv"
    )
    assert list(arms["arm"]) == d.arms and list(arms["label"]) == ["", "no speculation", "four drafted"]
    assert "Requests: max_tokens 99, temperature 0.5, seed 7; prompts were sent without a unique prefix" in md
    assert "Design: abba, 1 round, 1 blocks in the order below, drawn once with seed 42" in md
    assert "3 s of cooldown between blocks" in md
    assert (
        "Served by llama.cpp (llama-server), a fresh process per block. Model: /models/m.gguf." in md
        and "embedded" not in md.split("Served by", 1)[1].split("\n")[0]
    )
    assert f"14.4 GB/s {TIMES} 8.39 MB = 1715.46 tok/s" in md and "measured by a copy probe: a copy loop" in md
    assert "Byte account of the-model" in _tables(d) and "Note from the account: a note of the account" in md
    assert "A text token reads 8.39 MB: everything stored." in md  # no longer tied


def _method(d: article.Data) -> tuple[str, str, dict]:
    """The method section's prose, its preformatted text (launch commands, log tails) and its tables by file."""
    items = article.section_method(d).items
    pre = "\n".join(i.text for i in items if isinstance(i, article.Pre))
    tables = {i.csv: i.frame for i in items if isinstance(i, article.Table)}
    return _words(article.Section(items)), pre, tables


def test_what_ran_is_the_one_stats_json_states(tmp_path):
    """The method section's provenance (schedule status, served-by, hardware, launch commands, the arms' flags
    and server state, failed blocks and attempts, the model's build) from stats.json alone, and changed with it."""
    src = _dir(tmp_path)
    md, d = _render(src, tmp_path / "out")
    words, pre, tables = _method(d)
    prov = d.stats["provenance"]
    assert list(tables["schedule.csv"]["status"]) == ["complete"] * 3
    assert list(tables["schedule.csv"]["ready (s)"]) == [b["ready_s"] for b in prov["blocks"]]
    assert list(tables["schedule.csv"]["server"]) == [b["server_id"] for b in prov["blocks"]]
    assert "Served by vLLM 0.32.0 (embedded: vLLM's CPU build serving a tiny model trained locally), a fresh " in md
    assert "Platform: Linux-6.18.44-fc-v669-x86_64-with-glibc2.36." in md and "Hardware:" not in md
    arms = tables["arms.csv"].set_index("arm")
    assert arms.loc["baseline", "flags as launched"] == "(no speculative flags)"
    assert arms.loc["ngram_4", "flags as launched"].startswith('--speculative-config \'{"method":"ngram"')
    vllm_default = "prefix cache on (no prefix-caching flag (vLLM's default: on)); CUDA graphs off (--enforce-eager)"
    assert set(arms["server state"]) == {vllm_default} and "ran with different server state" not in md
    assert "Launch command of baseline (block 0):" in md and "Launch command of ngram_8 (block 2):" in md
    assert "VLLM_TARGET_DEVICE=cpu" in pre and "--served-model-name bracket-model" in pre
    assert "ended with status" not in md and "attempt(s) failed" not in md
    assert (
        "Built locally (build.json): 4 layers, hidden 256, vocabulary 4096, 300 training steps of batch 24 x 96 "
        "tokens at lr 0.003 on first 300 stdlib .py files + pydoc_data.topics, Python 3.11.7, final loss 4.86, "
        "seed 1, 238.9 s with torch 2.13.0+cpu."
    ) in md
    assert "Its files:" not in md

    def change(s):
        p = s["provenance"]
        p["blocks"][1].update(status="failed", log_tail="Error: unrecognized arguments: --x", ready_s=99.5)
        p["served"].update(versions=["9.9.9"], platforms=["Plan 9"], model_dir="resources/models/m")
        p["hardware"] = [
            {
                "cpu": "EPYC",
                "cpus": 8,
                "memory_gib": 16,
                "kernel": "6.1",
                "gpus": [{"name": "H200", "memory_mib": 143771, "driver": "570", "count": 2}],
                "hosts": ["a", "c"],
            },
            {"cpu": "Xeon", "cpus": 4, "memory_gib": None, "kernel": None, "gpus": [], "hosts": ["b"]},
        ]
        a = next(x for x in p["arms"] if x["arm"] == "ngram_4")
        a.update(flags=["--spec-x", "1"], launch={"block": 1, "argv": ["srv", "--spec-x", "1"], "env": {"A": "1"}})
        a["states"] = [{"prefix_cache": "off", "how": ["--no-cache"], "graphs": None}]
        p["arm_states_differ"] = True
        p["failed_attempts"] = [
            {
                "block": 2,
                "arm": "ngram_8",
                "status": "failed",
                "error": "killed",
                "records_kept": 5,
                "file": "raw/failed/block-2.attempt-1.jsonl",
            }
        ]
        p["model_build"] = {**p["model_build"], "layers": 9, "final_loss": None}
        p["priority"] = {"differs": True, "value": None}
        p["weights_served"] = {
            "files": ["model.safetensors"],
            "sha256": ["bb"],
            "pinned": ["aa"],
            "blocks": 2,
            "of": 3,
            "reading": "other",
        }

    _edit(src, change)
    md, d = _render(src, tmp_path / "out")
    words, pre, tables = _method(d)
    assert list(tables["schedule.csv"]["status"]) == ["complete", "failed", "complete"]
    assert list(tables["schedule.csv"]["ready (s)"])[1] == 99.5
    assert "Block 1 ended with status failed; the last lines of its log:" in md
    assert "Error: unrecognized arguments: --x" in pre
    assert "Served by vLLM 9.9.9 (embedded" in md and "Platform: Plan 9." in md
    assert (
        "Model: bracket-model" not in md
        and "Model: resources/models/m." in md
        and "Its files: resources/models/m." in md
    )
    assert (
        "Hardware: a, c: EPYC, 8 logical CPUs, 16 GiB memory, 2 x H200 (143771 MiB, driver 570), Linux 6.1; "
        "b: Xeon, 4 logical CPUs, no NVIDIA GPU reported."
    ) in md
    arms = tables["arms.csv"].set_index("arm")
    assert arms.loc["ngram_4", "flags as launched"] == "--spec-x 1"
    assert arms.loc["ngram_4", "server state"] == "prefix cache off (--no-cache)"
    assert "The arms ran with different server state" in md
    assert "Launch command of ngram_4 (block 1):" in md and "A=1 \\\n  srv --spec-x 1" in pre
    assert "1 block attempt(s) failed and were run again" in md
    assert tables["failed_attempts.csv"].to_dict("records") == [
        {
            "block": 2,
            "arm": "ngram_8",
            "records kept": 5,
            "file": "raw/failed/block-2.attempt-1.jsonl",
            "error": "killed",
        }
    ]
    assert "Built locally (build.json): 9 layers" in md and "untrained (no final loss)" in md
    assert "The server's priority differed between blocks" in md
    assert "sha256 bb in 2 of 3 blocks. The package pins aa for this model" in md and "other weights" in md


def _tables(d: article.Data) -> str:
    return "\n".join(t.caption for t in article.section_ceiling(d).items if isinstance(t, article.Table))


def test_an_unknown_byte_account_is_said_from_stats_json(tmp_path):
    src = _dir(tmp_path)

    def unknown(s):
        s["physics"]["weights"] = {"status": "unknown", "reason": "no headers at /m", "key": "engine.model"}
        s["physics"]["ceiling"] = {"status": "unknown", "bandwidth_gbps": 7.2}

    _edit(src, unknown)
    md, _ = _render(src, tmp_path / "out")
    assert "The ceiling is unknown: no byte account of the model" in md and "Why: no headers at /m." in md
    assert "Memory bandwidth was found (7.2 GB/s)" in md


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_file_stops_the_article_with_the_command_that_analyses_it_again(tmp_path, version):
    src = _dir(tmp_path)
    _edit(
        src,
        lambda s: (s.pop("provenance"), s.pop("experiment") if version < 3 else None, s.update(stats_version=version)),
    )
    with pytest.raises(OldStats, match=f"version {version} lacks what the article states since version 4") as e:
        _render(src, tmp_path / "out")
    assert f"snakemake --cores 1 results/{src.name}/stats.json --forcerun analyze" in str(e.value)
    assert "the blocks' provenance" in str(e.value)


def _metas(cfg) -> list[dict]:
    # as the analysis is handed them: an old block's server state read by its engine's adapter
    return read_block_metas(sorted((FIXTURE / "raw").glob("block-*.meta.json")), cfg)


def test_a_version_3_file_gets_the_provenance_the_analysis_states_from_the_blocks_meta():
    """bracket.stats.contract.current, given the experiment and the blocks' meta, the failed attempts and the
    model's build record, states what the analysis would: the fixture's own provenance."""
    today = json.loads((FIXTURE / "stats.json").read_text())
    old = {k: v for k, v in copy.deepcopy(today).items() if k != "provenance"}
    old["stats_version"] = 3
    cfg = config.load(FIXTURE / "probe.yaml", measured=True)
    assert "provenance" not in current(old, cfg=cfg)  # without the metas it stays a version 3 file
    got = current(
        old,
        cfg=cfg,
        metas=_metas(cfg),
        failed_attempts=[],
        model_build=json.loads((FIXTURE / "raw" / "model-build.json").read_text()),
    )
    assert got["stats_version"] == 5 and got["provenance"] == today["provenance"]


@pytest.mark.parametrize(
    "key", ["physics", "budget_groups", "tokens_per_event", "design_ran", "unmeasured", "drift_worst", "experiment"]
)
def test_an_older_file_gets_the_same_numbers_from_the_experiment_and_its_files(key):
    """A version 1 stats.json (no stats_version) passed through bracket.stats.contract.current with the experiment,
    runs.csv, weights.json, ceiling.json and schedule.csv gets what it lacks from the same functions of
    bracket.stats as the analysis: what the article reads is today's."""
    today = json.loads((FIXTURE / "stats.json").read_text())
    old = copy.deepcopy(today)
    del old["stats_version"], old["experiment"]
    for k in ("weights", "ceiling"):
        del old["physics"][k]
    if key == "physics":
        for k in ("reference_reading", "above_ceiling"):
            del old["physics"][k]
    elif key == "budget_groups":
        old["budget_groups"] = [{k: g[k] for k in ("method", "arms", "budgets")} for g in old["budget_groups"]]
    elif key != "experiment":
        del old[key]
    runs = pd.read_csv(FIXTURE / "runs.csv")
    got = current(
        old,
        cfg=config.load(FIXTURE / "probe.yaml", measured=True),
        runs=runs,
        ceiling=json.loads((FIXTURE / "ceiling.json").read_text()),
        weights=json.loads((FIXTURE / "weights.json").read_text()),
        schedule=pd.read_csv(FIXTURE / "schedule.csv"),
    )
    assert got["stats_version"] == 3  # no metas given: the provenance stays missing (version 4 needs them)
    if key == "tokens_per_event":  # from runs.csv as written: equal to its last digits
        assert [t["arm"] for t in got[key]] == [t["arm"] for t in today[key]]
        assert [t[key] for t in got[key]] == pytest.approx([t[key] for t in today[key]], rel=1e-12)
    else:
        assert got[key] == today[key]
    assert got["experiment"] == today["experiment"] and got["physics"] == today["physics"]


def _imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def _strings(tree: ast.AST) -> list[str]:
    """String constants outside docstrings."""
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


FORBIDDEN_IMPORTS = ("bracket.experiment", "bracket.physics", "yaml", "ruamel", "bracket.engines.provenance")
FORBIDDEN_FILES = ("weights.json", "ceiling.json", ".yaml")  # the corrections ledger is read by bracket.controls
#: The provenance files stats.json states (a name that ends a path the article would open or glob; its prose may
#: still name build.json as where a number came from).
PROVENANCE_FILES = (".meta.json", "failed_attempts.json", "build.json")
#: Functions that read provenance files (bracket.records.failed_attempts) or ask an engine's adapter for a state.
FORBIDDEN_CALLS = ("failed_attempts", "server_state")


def _calls(tree: ast.AST) -> set[str]:
    """The names of functions and attributes the module calls."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return out


def _provenance_files(tree: ast.AST) -> list[str]:
    return [s for s in _strings(tree) if s.strip().endswith(PROVENANCE_FILES)]


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_article_package_reads_no_experiment_byte_account_or_ceiling(path):
    tree = ast.parse(path.read_text(), str(path))
    bad = sorted(m for m in _imports(tree) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN_IMPORTS))
    assert not bad, f"{path.name} imports {bad}: the article reads stats.json (bracket.stats.stated), not the files"
    named = [s for s in _strings(tree) if any(f in s.replace("corrections.yaml", "") for f in FORBIDDEN_FILES)]
    assert not named, f"{path.name} names {named}: stats.json states the experiment, byte account and ceiling"


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_article_package_reads_no_block_meta_failed_attempts_or_build_record(path):
    tree = ast.parse(path.read_text(), str(path))
    named = _provenance_files(tree)
    assert not named, f"{path.name} names {named}: stats.json states what ran (bracket.stats.provenance)"
    called = sorted(_calls(tree) & set(FORBIDDEN_CALLS))
    assert not called, f"{path.name} calls {called}: the analysis reads what ran (bracket.stats.provenance)"


def test_the_package_test_would_catch_a_reader():
    """The checks above on a module that does what the article must not."""
    tree = ast.parse(
        'import yaml\nfrom bracket.experiment import config\ndef f(p):\n    "doc weights.json"\n'
        '    return config.load(p / "probe.yaml"), open(p / "ceiling.json")\n'
    )
    assert {"yaml", "bracket.experiment", "bracket.experiment.config"} <= _imports(tree)
    assert sorted(_strings(tree)) == ["ceiling.json", "probe.yaml"]
    meta = ast.parse(
        "from bracket import records, engines\n"
        "def f(p, k, m):\n"
        '    metas = [json.loads(q.read_text()) for q in p.glob("block-*.meta.json")]\n'
        '    build = p / "build.json"\n'
        '    tried = json.loads((p / "failed_attempts.json").read_text())\n'
        '    return open(f"{p}/block-{k}.meta.json"), records.failed_attempts(p), engines.get(m).server_state([], {}, None)\n'
    )
    assert sorted(_provenance_files(meta)) == [".meta.json", "block-*.meta.json", "build.json", "failed_attempts.json"]
    assert {"failed_attempts", "server_state"} <= _calls(meta)
    # the prose of the model's section names where its numbers came from, and is no reader
    assert _provenance_files(ast.parse('x = "Built locally (build.json): 4 layers"')) == []
