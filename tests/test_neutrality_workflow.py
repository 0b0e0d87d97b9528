"""The neutrality control through Snakemake, on a server whose cost depends on the request body.

bracket/engines/reference_server.py with body_cost=0.25 serves any body carrying a field beyond a plain
client's at rate / 1.25: its per-token time is exactly 1.25 times a plain body's, and it reports
that time in vLLM's request_decode_time histogram (from its schedule, so no clock enters the
expected value). bracket's vLLM body carries `seed`, which the plain body leaves out, so:

    instrument cost = (1/(rate/1.25)) / (1/rate) - 1 = 0.25 in every pair, every block;
    CI = [1.25, 1.25] (no spread between blocks), which excludes <= 1 %: the finding fires.

Without the option both bodies cost the same: ratio exactly 1, no finding.
"""

import json
import subprocess
import sys

import pandas as pd
import pytest
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

REFERENCE = fk.ROOT / "workflow" / "bracket" / "engines" / "reference_server.py"


def run_experiment(tmp_path, name, body_cost, target):
    repo = fk.repo_copy(tmp_path / "checkout")
    model = tiny_model(tmp_path / "model")
    port = fk.free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(REFERENCE),
            "--port",
            str(port),
            "--rate",
            "4000",
            "--ttft",
            "0.002",
            "--body-cost",
            str(body_cost),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    (repo / "experiments" / f"{name}.yaml").write_text(
        f"engine: {{kind: vllm, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
        f"served_model: reference-model, model: {model}}}\n"
        "arms: {first: {}, again: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {rounds: 2, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0}\n"
        "request: {max_tokens: 16}\nanalysis: {bootstrap_resamples: 200}\n"
        "controls: {neutrality_pairs: 2}\n"
    )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the reference server")
        proc = subprocess.run(
            fk.snakemake_argv(target.format(name=name)),
            cwd=repo,
            env=fk.snakemake_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.kill()
        server.wait()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return repo / "results" / name, repo


def test_a_body_that_costs_the_server_25_percent_is_named_with_its_cost(tmp_path):
    res, repo = run_experiment(tmp_path, "costly", 0.25, "{name}")
    stats = json.loads((res / "stats.json").read_text())
    n = stats["neutrality"]
    assert n["status"] == "on" and n["basis"] == "server timing"
    assert n["blocks"] == 4 and n["pairs"] == 8  # 2 rounds x 2 arms, 2 pairs each
    assert n["ratio"] == pytest.approx(1.25, abs=1e-9) and n["cost"] == pytest.approx(0.25, abs=1e-9)
    assert n["ci_low"] == pytest.approx(1.25, abs=1e-6) and n["ci_high"] == pytest.approx(1.25, abs=1e-6)
    # per token: 1 / (4000 / 1.25) = 0.3125 ms against 1 / 4000 = 0.25 ms
    assert n["bracket_ms_per_token"] == pytest.approx(0.3125) and n["plain_ms_per_token"] == pytest.approx(0.25)
    found = [f for f in stats["findings"] if f["kind"] == "instrument"]
    assert len(found) == 1 and found[0]["payload"]["cost"] == pytest.approx(0.25, abs=1e-9)
    # the control's records are in raw/ but never in runs.csv, so no arm's statistics hold them
    runs = pd.read_csv(res / "runs.csv")
    assert len(runs) == 4 * 2 and stats["counts"]["total"] == 8
    control = pd.read_csv(res / "neutrality.csv")
    assert len(control) == 16 and set(control["body"]) == {"bracket", "plain"} and control["valid"].all()
    assert list(control.loc[control["position"] == 0, "body"]) == ["bracket", "plain", "plain", "bracket"]
    assert list(control.loc[control["position"] == 1, "body"]) == ["plain", "bracket", "bracket", "plain"]
    article = (repo / "report" / "costly" / "article.md").read_text()
    assert "bracket's request cost the server +25.0% per token" in article
    assert "95% CI +25.0% to +25.0%" in article


def test_a_server_indifferent_to_the_body_gives_no_finding(tmp_path):
    res, _ = run_experiment(tmp_path, "neutral", 0.0, "results/{name}/stats.json")
    n = json.loads((res / "stats.json").read_text())["neutrality"]
    assert n["ratio"] == pytest.approx(1.0, abs=1e-9) and n["ci_high"] == pytest.approx(1.0, abs=1e-6)
    stats = json.loads((res / "stats.json").read_text())
    assert not [f for f in stats["findings"] if f["kind"] == "instrument"]
