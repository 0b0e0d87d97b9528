"""An adaptive design through Snakemake, in a copy of the workflow, attached to a stand-in server.

The DAG grows by a round only when a look asks for it (checkpoint `look`): with a wide margin the
first look (round 3, the first with two block df) settles and three rounds run; with a margin no interval can meet, rounds run to the
budget and the comparison is undetermined. Both articles show the looks. Both arms are the same
server, so the truth is "no effect".
"""

import json
import subprocess

import pytest
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration


def test_an_adaptive_design_adds_rounds_only_while_a_comparison_is_open(tmp_path_factory):
    repo = fk.repo_copy(tmp_path_factory.mktemp("adaptive") / "checkout")
    model = tiny_model(tmp_path_factory.mktemp("model"))
    port = fk.free_port()
    server = subprocess.Popen(
        fk.fake_argv(port, "--script", "slow"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # settles: a margin of +/-50 % on identical arms settles at the first look with a bounded interval (round 3,
    # the first with two block df, although min_rounds is 2), before the budget of 4. budget: a margin of 0.01 % cannot be met and a band of
    # 50 % cannot be cleared, so rounds run to the budget of 3.
    for name, margin, top, band in (("settles", 0.5, 4, 0.01), ("budget", 0.0001, 3, 0.5)):
        (repo / "experiments" / f"{name}.yaml").write_text(
            f"engine: {{kind: openai, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
            f"model: {model}}}\n"
            "arms: {first: {}, again: {}}\n"
            "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
            f"design: {{rounds: adaptive, min_rounds: 2, max_rounds: {top}, margin: {margin}, runs_per_block: 3, "
            "warmup_runs: 0, cooldown_s: 0}\n"
            f"request: {{max_tokens: 4}}\nanalysis: {{bootstrap_resamples: 200, noise_threshold: {band}}}\n"
        )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the stand-in server")
        proc = subprocess.run(
            fk.snakemake_argv("settles", "budget"),
            cwd=repo,
            env=fk.snakemake_env(),
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        server.kill()
        server.wait()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]

    res = repo / "results" / "settles"
    stats = json.loads((res / "stats.json").read_text())
    r = stats["sequential"]["rounds_run"]
    assert r < 4 and stats["comparisons"][0]["sequential"]["settled_round"] == r
    look = json.loads((res / "looks" / f"look-{r}.json").read_text())
    assert not look["another_round"] and look["comparisons"][0]["verdict"] == "no measurable effect"
    assert all(json.loads((res / "looks" / f"look-{k}.json").read_text())["another_round"] for k in range(2, r))
    assert not (res / "looks" / f"look-{r + 1}.json").exists()  # the DAG never grew past the settling look
    assert sorted(p.name for p in (res / "raw").glob("block-*.jsonl")) == sorted(
        f"block-{k}.jsonl" for k in range(2 * r)
    )

    res = repo / "results" / "budget"
    assert json.loads((res / "looks" / "look-2.json").read_text())["another_round"]
    assert json.loads((res / "looks" / "look-2.json").read_text())["adds"][0]["position"] == 4
    last = json.loads((res / "looks" / "look-3.json").read_text())
    assert not last["another_round"] and last["comparisons"][0]["verdict"] == "undetermined"
    assert len(list((res / "raw").glob("block-*.jsonl"))) == 6
    for name in ("settles", "budget"):
        article = (repo / "report" / name / "article.md").read_text()
        assert "When to stop: the looks of an adaptive design" in article and "repeated" in article

    # resumable and finished: nothing runs again
    again = subprocess.run(
        fk.snakemake_argv("-n", "settles", "budget"),
        cwd=repo,
        env=fk.snakemake_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
