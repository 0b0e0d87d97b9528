"""Round three of hostile input through Snakemake, in a copy of the workflow (issue 33): an experiment named
after a rule, a workload name ending in a newline, an alias bomb, and an arm whose every request fails.
The engine is a sentinel that leaves a mark if it is ever launched, or the stand-in server (attached to)."""

import shutil
import subprocess
import time

import pytest
from test_hostile_secrets import alias_bomb
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk
from tests.support import snakemake

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    sentinel = fk.sentinel_engine(root)
    model = tiny_model(root / "tiny-model")
    engine = (
        f"engine: {{embedded: false, python: {sentinel}, model: {model}, port: 8037, startup_timeout_s: 5}}\n"
        "request: {max_tokens: 8}\n"
    )
    for rule in ("report", "weights"):
        shutil.copy(root / "experiments" / "smoke.yaml", root / "experiments" / f"{rule}.yaml")
    (root / "experiments" / "newline.yaml").write_text(
        engine + 'arms: {baseline: {}}\nworkloads: {"code\\n": {prompts: experiments/prompts/code.jsonl}}\n'
    )
    (root / "experiments" / "bomb.yaml").write_text(alias_bomb())
    return root


def test_experiments_named_after_rules_are_refused_by_name_and_break_no_other_target(repo):
    proc = snakemake(repo, "-n", "smoke")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "CreateRuleException" not in out
    for rule in ("report", "weights"):
        assert (
            f"experiments/{rule}.yaml: experiment name '{rule}' is the name of one of the workflow's rules "
            f"(workflow/rules/), so `snakemake {rule}` would run that rule, not the experiment; rename the file "
            f"(for example experiments/{rule}_run.yaml)."
        ) in out
    proc = snakemake(repo, "-n", "report/report/article.html")
    assert proc.returncode != 0 and "rename the file" in proc.stderr and "Traceback" not in proc.stderr


def test_a_workload_name_ending_in_a_newline_is_refused_before_any_job(repo):
    proc = snakemake(repo, "newline")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "workload name 'code\\n' is not allowed" in out and "Traceback" not in out, out[-3000:]
    assert not (repo / "LAUNCHED").exists() and not (repo / "results" / "newline").exists()


def test_an_alias_bomb_stops_the_workflow_in_seconds_with_one_line(repo):
    t0 = time.monotonic()
    proc = snakemake(repo, "-n", "bomb")
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    said = [line for line in out.splitlines() if "expands to more than 100,000 values" in line]
    assert len(said) == 1 and "experiments/bomb.yaml: it expands" in said[0], out[-2000:]
    assert "Traceback" not in out and len(out) < 20_000
    assert took < 30, took  # Snakemake's own start-up included; the loader refuses in milliseconds


def test_an_arm_whose_every_request_fails_is_no_winner_and_the_run_exits_non_zero(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    model = tiny_model(tmp_path / "model")
    port = fk.free_port()
    # block 0 (arm fast) gets two good answers; every later request, all of arm broken's, an HTTP 400
    server = subprocess.Popen(
        fk.fake_argv(port, "--script", "ok,ok,http400"), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    (repo / "experiments" / "half.yaml").write_text(
        f"engine: {{kind: openai, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
        f"model: {model}}}\n"
        "arms: {fast: {}, broken: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0}\n"
        "request: {max_tokens: 8}\nanalysis: {bootstrap_resamples: 200}\n"
        "controls: {neutrality: false, neutrality_off: the stand-in answers by request count}\n"
    )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the stand-in server")
        proc = snakemake(repo, "half", timeout=900)
    finally:
        server.kill()
        server.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "broken: no valid run, so no arm of half can be named fastest" in out, out[-3000:]
    md = (repo / "report" / "half" / "article.md").read_text()
    assert "No arm can be named fastest: broken had no valid run" in md
    # (arms of one attached server share its settings: the article reads them as an A/A test, so the per-workload
    # sentence is test_hostile_secrets' headline test)
    assert "Error: arm broken has no valid run (2 error)" in md
    assert "fast reaches" not in md and not (repo / "results" / "half" / "arms_measured.json").exists()
