"""End to end on the reference engine: `snakemake --cores 1 refsmoke`, experiment file to article, in seconds.

experiments/smoke.yaml's shape (two arms, two rounds, two workloads, a fresh server per block) on
`engine.kind: reference`, bracket's calibrated server, whose every timing follows from its flags: the
baseline streams one token per event at 400 tok/s, ngram_4 drafts 4 tokens per step, all accepted, at 800
tok/s. So the values the workflow reports have a known truth (reference_server.truth), which the real
engine's smoke run (tests/test_pipeline.py) cannot give; and a reproduction, three more servers, costs
seconds instead of three vLLM starts. The run happens in a copy of the workflow under tmp_path
(faultkit.repo_copy), with no engine environment and no model: nothing is built.
"""

import json
import re
import shutil
from functools import partial
from pathlib import Path

import pandas as pd
import psutil
import pytest
from bracket.engines.reference_server import truth
from bracket.experiment import design

from tests.support import repo_copy
from tests.support import snakemake as run_snakemake

# Timed against a known truth with milliseconds of slack: run alone, after the parallel pass (`serial`).
pytestmark = [pytest.mark.integration, pytest.mark.serial]
EXP = "refsmoke"
PORT = 8014
TTFT, BASE_RATE, SPEC_RATE, TOKENS, DRAFTS = 0.02, 400, 800, 64, 4
EXPERIMENT = f"""\
title: "Smoke test on the reference engine"
question: "Does the whole loop, from server launch to article, report the schedule's truth?"
engine: {{kind: reference, port: {PORT}, args: ["--ttft", "{TTFT}"]}}
arms:
  baseline: {{args: ["--rate", "{BASE_RATE}"]}}
  ngram_4: {{speculative: {{method: ngram, draft_tokens: {DRAFTS}}}, args: ["--rate", "{SPEC_RATE}"]}}
reference: baseline
workloads:
  code: {{prompts: experiments/prompts/code.jsonl}}
  chat: {{prompts: experiments/prompts/chat.jsonl}}
design: {{kind: abab, rounds: 2, runs_per_block: 3, warmup_runs: 1, cooldown_s: 0, seed: 1}}
request: {{max_tokens: {TOKENS}}}
analysis: {{bootstrap_resamples: 500}}
hardware: {{probe_bandwidth: false, bandwidth_gbps: 20}}
"""
# What a perfect client reports (the module docstring of bracket.engines.reference_server).
BASE = truth(TOKENS, BASE_RATE, 1, TTFT)  # wall 0.02 + 63 / 400 = 0.1775 s
SPEC = truth(TOKENS, SPEC_RATE, DRAFTS + 1, TTFT, prefill_token=True)  # 14 events, wall 0.02 + 13 * 5 / 800
# A client's own latency (the request's send, the connection, its parsing) comes on top: on this loaded 2-core
# machine a few milliseconds at most; the schedule itself is never early.
SLACK_S = 0.03


snakemake = partial(run_snakemake, timeout=900)


def engine_processes():
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "bracket.engines.reference_server" in cmd and f"--port {PORT}" in cmd:
            out.append(p.info["pid"])
    return out


@pytest.fixture(scope="module")
def ref_run(tmp_path_factory) -> Path:
    """The workflow's folder after `snakemake --cores 1 refsmoke` ran there."""
    root = repo_copy(tmp_path_factory.mktemp("refsmoke"))
    (root / "experiments" / f"{EXP}.yaml").write_text(EXPERIMENT)
    proc = snakemake(root, EXP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "rule engine_venv" not in proc.stdout + proc.stderr  # no engine built, no model trained
    return root


def test_the_truth_the_run_is_read_against():
    assert (BASE.events, BASE.wall_s) == (64, pytest.approx(0.1775))
    assert (SPEC.events, SPEC.wall_s, SPEC.acceptance_length) == (14, pytest.approx(0.10125), pytest.approx(64 / 14))


def test_every_block_ran_in_a_fresh_server_in_schedule_order(ref_run):
    blocks = design.read(ref_run / "results" / EXP / "schedule.csv")
    assert [(b.arm, b.round) for b in blocks] == [("baseline", 1), ("ngram_4", 1), ("baseline", 2), ("ngram_4", 2)]
    metas = [
        json.loads((ref_run / "results" / EXP / "raw" / f"block-{b.position}.meta.json").read_text()) for b in blocks
    ]
    assert all(m["status"] == "complete" for m in metas)
    assert len({m["pid"] for m in metas}) == 4  # one server per block
    assert [m["arm"] for m in metas] == [b.arm for b in blocks]
    assert metas[1]["started_at"] > metas[0]["ended_at"]
    argv = metas[1]["argv"]
    assert argv[argv.index("--tokens-per-event") + 1] == "5" and argv[argv.index("--draft-budget") + 1] == "4"
    assert "--tokens-per-event" not in metas[0]["argv"]
    assert all(m["argv"][m["argv"].index("--host") + 1] == "127.0.0.1" for m in metas)
    # the schedule each server ran, as it reported it: the arm's flags took effect
    assert [m["server_info"]["schedule"]["rate"] for m in metas] == [BASE_RATE, SPEC_RATE] * 2
    assert engine_processes() == []  # teardown left nothing behind


def test_raw_records_pass_the_guards_and_carry_the_schedules_truth(ref_run):
    runs = pd.read_csv(ref_run / "results" / EXP / "runs.csv")
    # 4 blocks x 2 workloads x (1 warmup + 3 runs)
    assert len(runs) == 32 and runs["warmup"].sum() == 8
    timed = runs[~runs["warmup"]]
    assert timed["valid"].all()
    assert (timed["cached_tokens"] == 0).all() and (timed["finish_reason"] == "length").all()
    assert (timed["completion_tokens"] == TOKENS).all()
    assert (timed["decode_tok_s"] - timed["completion_tokens"] / timed["wall_s"]).abs().max() < 1e-6
    for arm, t in (("baseline", BASE), ("ngram_4", SPEC)):
        mine = timed[timed["arm"] == arm]
        assert ((mine["wall_s"] >= t.wall_s) & (mine["wall_s"] < t.wall_s + SLACK_S)).all(), mine["wall_s"]
        assert ((mine["ttft_s"] >= t.ttft_s) & (mine["ttft_s"] < t.ttft_s + SLACK_S)).all(), mine["ttft_s"]
    spec = timed[timed["arm"] == "ngram_4"]
    assert (spec["acceptance_length"] - SPEC.acceptance_length).abs().max() < 1e-9
    assert (spec["verify_steps"] == SPEC.events).all() and (spec["draft_tokens"] == DRAFTS * SPEC.events).all()
    assert (spec["accepted_tokens"] == TOKENS - SPEC.events).all()
    assert timed.loc[timed["arm"] == "baseline", "acceptance_length"].isna().all()
    raw = [
        json.loads(line)
        for f in sorted((ref_run / "results" / EXP / "raw").glob("block-*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    arms = [r for r in raw if not r.get("control")]
    assert len(arms) == 32 and all(r["output_text"] is not None for r in arms)
    # the neutrality control: 2 pairs per block (4 blocks), timed by the server's vLLM-named decode histogram
    ctl = [r for r in raw if r.get("control") == "neutrality"]
    assert len(ctl) == 16 and {r["body"] for r in ctl} == {"bracket", "plain"}
    assert all(r["server_tokens"] == TOKENS - 1 for r in ctl)
    for r in ctl:  # per token: 1 / rate with one token per event; (E - 1) k / rate / (n - 1) with drafts
        per_token = 1 / BASE_RATE if r["arm"] == "baseline" else (SPEC.events - 1) * 5 / SPEC_RATE / (TOKENS - 1)
        assert r["server_decode_s"] / r["server_tokens"] == pytest.approx(per_token, rel=1e-6)


def test_stats_find_the_known_speedup_and_the_article_shows_every_value(ref_run):
    stats = json.loads((ref_run / "results" / EXP / "stats.json").read_text())
    cells = {(c["arm"], c["workload"]): c for c in stats["cells"]}
    runs = pd.read_csv(ref_run / "results" / EXP / "runs.csv")
    assert set(cells) == {("baseline", "code"), ("baseline", "chat"), ("ngram_4", "code"), ("ngram_4", "chat")}
    for (arm, wl), c in cells.items():
        vals = runs[(runs["arm"] == arm) & (runs["workload"] == wl) & runs["valid"]]["decode_tok_s"]
        assert c["n"] == 6
        assert c["median"] == pytest.approx(vals.median())
        assert c["spread"] == pytest.approx((vals.max() - vals.min()) / vals.median())
        truth_rate = (BASE if arm == "baseline" else SPEC).decode_tok_s
        # below the truth by the client's own latency only: a few per cent of a 0.1 s request at most
        assert 0.85 * truth_rate < c["median"] <= truth_rate
    # ngram_4 against baseline: the true ratio is 0.1775 / 0.10125 = 1.753 per workload
    comps = [c for c in stats["comparisons"] if "ngram_4" in (c.get("candidate"), c.get("arm"))]
    assert len(comps) == 2, stats["comparisons"]
    for c in comps:
        assert c["ratio"] == pytest.approx(BASE.wall_s / SPEC.wall_s, rel=0.1)
        assert c["verdict"] == "faster"
    html = (ref_run / "report" / EXP / "article.html").read_text()
    md = (ref_run / "report" / EXP / "article.md").read_text()
    for v in runs.loc[runs["valid"], "decode_tok_s"]:
        assert f"{v:.2f}" in md
    assert "<script>" not in md and "ngram_4" in html
    n = stats["neutrality"]  # the instrument's cost, from the server's own timing: none is charged here
    assert n["status"] == "on" and n["basis"] == "server timing" and n["blocks"] == 4 and n["pairs"] == 8
    assert [n["ci_low"], n["ratio"], n["ci_high"]] == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)


def test_nothing_to_do_the_second_time(ref_run):
    proc = snakemake(ref_run, EXP, "--dry-run", "--quiet")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def planned(out: str) -> tuple[list[int], set[str]]:
    """The blocks (k) and the rules a dry run plans."""
    chunks = re.split(r"\n(?=rule \w+:|localrule \w+:)", out)
    blocks = [int(re.search(r"wildcards: exp=\w+, k=(\d+)", c).group(1)) for c in chunks if c.startswith("rule block:")]
    return sorted(blocks), {m.group(1) for c in chunks if (m := re.match(r"(?:local)?rule (\w+):", c))}


def test_an_edit_reruns_what_it_changes_and_a_comment_or_a_move_nothing(ref_run, tmp_path):
    """Every stage reads the resolved experiment (results/NAME/experiment.resolved.json), rewritten by the DAG only
    when the experiment's content changes: a block reruns when its own settings do, the analysis and the article
    when anything does; a comment reruns nothing, and --forcerun block still reaches every block when the same
    invocation changes the experiment (no job stands upstream of the blocks to hide them)."""
    path = ref_run / "experiments" / f"{EXP}.yaml"
    original = path.read_text()
    fast, base = f'["--rate", "{SPEC_RATE}"]', f'["--rate", "{BASE_RATE}"]'

    def dry_run(text: str, *args: str) -> tuple[list[int], set[str]]:
        path.write_text(text)
        proc = snakemake(ref_run, EXP, "--dry-run", *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return planned(proc.stdout + proc.stderr)

    try:
        layout = "# a comment, and the same keys laid out otherwise\n" + original.replace(": {", ":   {")
        assert dry_run(layout) == ([], set())
        one = original.replace(fast, f'["--rate", "{SPEC_RATE + 1}"]')  # ngram_4: blocks 1 and 3
        blocks, rules = dry_run(one)
        assert blocks == [1, 3] and {"collect", "analyze", "report"} <= rules and "plan" not in rules
        assert dry_run(one.replace(base, f'["--rate", "{BASE_RATE + 1}"]'))[0] == [0, 1, 2, 3]  # two arms: both
        # what no block measures: the analysis and the article again, never a block or the schedule
        resamples = original.replace("bootstrap_resamples: 500", "bootstrap_resamples: 600")
        blocks, rules = dry_run(resamples)
        assert blocks == [] and {"analyze", "report"} <= rules and not rules & {"plan", "block", "collect"}
        blocks, rules = dry_run(original.replace("ngram_4: {", 'ngram_4: {label: "ngram, 4 drafts", '))
        assert blocks == [] and "analyze" in rules
        # an edit and --forcerun block in one invocation: every block
        assert dry_run(resamples, "--forcerun", "block")[0] == [0, 1, 2, 3]
    finally:
        path.write_text(original)
    # back as it was: the resolved file holds what the analysis last read (Snakemake compares its checksum)
    proc = snakemake(ref_run, EXP, "--dry-run", "--quiet")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    resolved = json.loads((ref_run / "results" / EXP / "experiment.resolved.json").read_text())
    assert resolved["arms"]["ngram_4"]["args"] == ["--rate", str(SPEC_RATE)]
    assert str(ref_run) not in json.dumps(resolved)  # nothing of where the checkout lies
    moved = tmp_path / "moved"
    shutil.copytree(ref_run, moved, symlinks=True)  # times kept, as a move keeps them
    proc = snakemake(moved, EXP, "--dry-run", "--quiet")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_a_reproduction_judges_the_published_cell_and_lands_in_the_article(ref_run):
    """`snakemake reproduce`: fresh servers (REF, cell, REF), a verdict on the run's figure, the ledger appended
    only when the figure does not hold, and the article re-rendered with it (moved here from the vLLM smoke run:
    what it checks is the workflow's)."""
    ledger = ref_run / "experiments" / f"{EXP}.corrections.yaml"
    before = ledger.read_text() if ledger.exists() else None
    name = f"{EXP}--repro-pytest"
    proc = snakemake(ref_run, "reproduce", "--config", f"experiment={EXP}", "cell=ngram_4,code", "runs=3", "id=pytest")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    schedule = design.read(ref_run / "results" / name / "schedule.csv")
    assert [b.arm for b in schedule] == ["baseline", "ngram_4", "baseline"]
    v = json.loads((ref_run / "results" / name / "verdict.json").read_text())
    (cell,) = v["cells"]
    assert cell["workload"] == "code" and cell["verdict"] in ("holds", "does not hold", "undecided")
    original = pd.read_csv(ref_run / "results" / EXP / "runs.csv")
    orig = original[(original["arm"] == "ngram_4") & (original["workload"] == "code") & original["valid"]]
    assert cell["original"]["median"] == pytest.approx(orig["decode_tok_s"].median())
    after = ledger.read_text() if ledger.exists() else None
    if cell["verdict"] == "does not hold":
        assert after is not None and after.startswith(before or "") and len(after) > len(before or "")
    else:
        assert after == before  # only corrections enter the ledger
    md = (ref_run / "report" / EXP / "article.md").read_text()
    assert "Reproductions" in md and name in md
    assert engine_processes() == []
