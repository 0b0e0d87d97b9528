"""End to end on the real embedded engine: `snakemake --cores 1 smoke` from experiment file to article.

Builds the engine's virtual environment and the tiny model on first use (a few minutes), then runs
experiments/smoke.yaml: two arms (baseline, ngram_4), two rounds, two workloads, real vLLM CPU
servers launched and torn down per block. The run happens in a copy of the workflow under tmp_path
(faultkit.repo_copy, the engine linked and the model copied in), so the checkout is left as it was.

The one end-to-end run on a real engine: what is the workflow's alone (a reproduction's fresh servers and
verdict, the schedule's truth in every number) runs on the reference engine, tests/test_reference_workflow.py.
"""

import json
import re
import sys
from functools import partial
from pathlib import Path

import pandas as pd
import psutil
import pytest
from bracket.experiment import config, design

from tests.support import repo_copy
from tests.support import snakemake as run_snakemake

pytestmark = pytest.mark.engine
EXP = "smoke"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


snakemake = partial(run_snakemake, timeout=1800)


def engine_processes():
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "vllm.entrypoints" in cmd and "--port 8012" in cmd:
            out.append(p.info["pid"])
    return out


@pytest.fixture(scope="module")
def smoke_run(embedded_engine, tmp_path_factory) -> Path:
    """The workflow's folder after `snakemake --cores 1 smoke` ran there."""
    engine, model = embedded_engine
    root = repo_copy(tmp_path_factory.mktemp("smoke"), engine_dir=engine, model_dir=model)
    proc = snakemake(root, EXP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return root


def test_every_block_ran_in_a_fresh_server_in_schedule_order(smoke_run):
    cfg = config.load(smoke_run / "experiments" / f"{EXP}.yaml")
    blocks = design.read(smoke_run / "results" / EXP / "schedule.csv")
    assert [(b.arm, b.round) for b in blocks] == [("baseline", 1), ("ngram_4", 1), ("baseline", 2), ("ngram_4", 2)]
    metas = [
        json.loads((smoke_run / "results" / EXP / "raw" / f"block-{b.position}.meta.json").read_text()) for b in blocks
    ]
    assert all(m["status"] == "complete" for m in metas)
    assert len({m["pid"] for m in metas}) == 4  # one server per block
    assert [m["arm"] for m in metas] == [b.arm for b in blocks]
    assert metas[1]["started_at"] > metas[0]["ended_at"]
    spec = metas[1]["argv"][metas[1]["argv"].index("--speculative-config") + 1]
    assert json.loads(spec)["num_speculative_tokens"] == 4
    assert "--speculative-config" not in metas[0]["argv"]
    assert all(m["argv"][m["argv"].index("--host") + 1] == "127.0.0.1" for m in metas)
    assert cfg.design.runs_per_block == 3
    assert engine_processes() == []  # teardown left nothing behind


def test_raw_records_pass_the_guards(smoke_run):
    runs = pd.read_csv(smoke_run / "results" / EXP / "runs.csv")
    # 4 blocks x 2 workloads x (1 warmup + 3 runs)
    assert len(runs) == 32
    assert runs["warmup"].sum() == 8
    timed = runs[~runs["warmup"]]
    assert (timed["cached_tokens"] == 0).all()
    assert (timed["finish_reason"] == "length").all()
    assert (timed["completion_tokens"] == 64).all()
    assert timed["valid"].all()
    assert (timed["decode_tok_s"] - timed["completion_tokens"] / timed["wall_s"]).abs().max() < 1e-6
    spec = timed[timed["arm"] == "ngram_4"]
    assert spec["acceptance_length"].notna().all()
    assert (spec["acceptance_length"] > 1).all() and (spec["acceptance_length"] <= 5).all()
    assert (spec["accepted_tokens"] <= spec["draft_tokens"]).all()
    assert timed.loc[timed["arm"] == "baseline", "acceptance_length"].isna().all()
    # the unique prefix makes every prompt distinct
    raw = [
        json.loads(line)
        for f in sorted((smoke_run / "results" / EXP / "raw").glob("block-*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    arms = [r for r in raw if not r.get("control")]
    assert len(arms) == 32 and all(r["output_text"] is not None for r in arms)
    # the neutrality control: 2 pairs per block (4 blocks), timed by vLLM's own decode histogram
    ctl = [r for r in raw if r.get("control") == "neutrality"]
    assert len(ctl) == 16 and {r["body"] for r in ctl} == {"bracket", "plain"}
    assert all(r["server_decode_s"] and r["server_tokens"] == 63 for r in ctl)


def test_stats_and_article(smoke_run):
    stats = json.loads((smoke_run / "results" / EXP / "stats.json").read_text())
    cells = {(c["arm"], c["workload"]): c for c in stats["cells"]}
    runs = pd.read_csv(smoke_run / "results" / EXP / "runs.csv")
    for (arm, wl), c in cells.items():
        vals = runs[(runs["arm"] == arm) & (runs["workload"] == wl) & runs["valid"]]["decode_tok_s"]
        assert c["n"] == 6
        assert c["median"] == pytest.approx(vals.median())
        assert c["spread"] == pytest.approx((vals.max() - vals.min()) / vals.median())
    assert set(cells) == {("baseline", "code"), ("baseline", "chat"), ("ngram_4", "code"), ("ngram_4", "chat")}
    html = (smoke_run / "report" / EXP / "article.html").read_text()
    md = (smoke_run / "report" / EXP / "article.md").read_text()
    # every raw value is in the article
    for v in runs.loc[runs["valid"], "decode_tok_s"]:
        assert f"{v:.2f}" in md
    assert "<script>" not in md
    assert "ngram_4" in html
    n = stats["neutrality"]  # the instrument's cost on the real engine, stated in the method section
    assert n["status"] == "on" and n["basis"] == "server timing" and n["blocks"] == 4 and n["pairs"] == 8
    assert n["ci_low"] <= n["ratio"] <= n["ci_high"]
    assert "bracket's body and the plainest body that yields the same tokens" in md


def test_nothing_to_do_the_second_time(smoke_run):
    proc = snakemake(smoke_run, EXP, "--dry-run", "--quiet")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def block_jobs(dry_run_output: str) -> list[int]:
    """Block numbers of the `block` jobs a dry run lists."""
    out = []
    for chunk in re.split(r"\n(?=rule \w+:|localrule \w+:)", dry_run_output):
        if re.match(r"rule block:", chunk):
            out.append(int(re.search(r"wildcards: exp=\w+, k=(\d+)", chunk).group(1)))
    return sorted(out)


def test_changing_arms_reruns_only_their_blocks(smoke_run):
    path = smoke_run / "experiments" / f"{EXP}.yaml"
    original = path.read_text()
    ngram = "ngram_4: {speculative: {method: ngram, draft_tokens: 4}}"
    try:
        path.write_text(original.replace(ngram, ngram.replace("4}}", "4, prompt_lookup_max: 4}}")))
        proc = snakemake(smoke_run, EXP, "--dry-run")
        assert block_jobs(proc.stdout + proc.stderr) == [1, 3], proc.stdout + proc.stderr
        # two arms at once: both are seen in one invocation
        path.write_text(
            original.replace(ngram, ngram.replace("4}}", "4, prompt_lookup_max: 4}}")).replace(
                "baseline: {}", 'baseline: {args: ["--max-num-seqs", "4"]}'
            )
        )
        proc = snakemake(smoke_run, EXP, "--dry-run")
        assert block_jobs(proc.stdout + proc.stderr) == [0, 1, 2, 3], proc.stdout + proc.stderr
        # a new label names the arm differently but measures nothing
        path.write_text(original.replace("baseline: {}", 'baseline: {label: "plain decoding"}'))
        proc = snakemake(smoke_run, EXP, "--dry-run")
        assert block_jobs(proc.stdout + proc.stderr) == [], proc.stdout + proc.stderr
    finally:
        path.write_text(original)
