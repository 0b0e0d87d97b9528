"""Faults through Snakemake on the reference engine (engine.kind reference), provoked for real.

In a copy of the workflow (so no job can lean on files it does not declare), on
tests/data/faults/fault_resume.yaml (two blocks, an API key from the environment, a server with a second
process in its group as vLLM's engine core is):
run 1: block 0 completes; block 1's server is killed with SIGKILL mid-block;
run 2: Ctrl-C (SIGINT to snakemake's process group) mid-block;
run 3: the same target again, to the article.
Each failure keeps what it measured, stops every engine process, and the reruns redo only block 1.
The API key reaches the server and no file of the run.

What is asserted is the workflow's, not the engine's: on vLLM each of the four server starts cost 30-60 s
(tests/test_faults_engine.py keeps the fault only vLLM shows, its own message for a flag it rejects).
"""

import json
import os
import signal
import subprocess
import time

import httpx
import pandas as pd
import pytest

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

PORT = 8031


@pytest.fixture(autouse=True)
def no_engine_left_behind():
    yield
    for pid in fk.engine_processes(PORT):  # only ours: this port is this test's
        fk.kill_group(os.getpgid(pid))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    repo = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    exp = "fault_resume"
    (repo / "experiments" / f"{exp}.yaml").write_text((fk.FAULTS / f"{exp}.yaml").read_text())
    env = dict(fk.snakemake_env(), BRACKET_TEST_API_KEY=fk.SECRET)
    raw = repo / "results" / exp / "raw"
    partial = raw / "block-1.jsonl.partial"
    obs = {"repo": repo, "exp": exp, "raw": raw}

    def start(n):
        out = open(repo / f"snakemake-{n}.out", "w")
        return subprocess.Popen(
            fk.snakemake_argv(exp),
            cwd=repo,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=fk.as_from_a_terminal,
        )

    def finish(proc, timeout):
        try:
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                fk.kill_group(proc.pid)
                proc.wait()
        return proc.returncode

    def engine_group():
        server = fk.wait_for(lambda: fk.listener(PORT), 30, "the server's socket")
        return server, fk.group_members(os.getpgid(server))

    plan = subprocess.run(fk.snakemake_argv("-n", exp), cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0 and "rule block" in plan.stdout, plan.stdout[-3000:] + plan.stderr[-3000:]
    # the reference engine needs no engine environment and no model: nothing may be built
    assert "rule engine_venv" not in plan.stdout and "rule embedded_model" not in plan.stdout, plan.stdout[-3000:]
    procs = []
    try:
        # run 1: block 0 completes, then block 1's server dies by SIGKILL
        procs.append(sm := start(1))
        fk.wait_for(lambda: fk.count_lines(partial) >= 3 or sm.poll() is not None, 600, "block 1 to measure")
        assert sm.poll() is None, (repo / "snakemake-1.out").read_text()[-4000:]
        obs["block0_meta"] = json.loads((raw / "block-0.meta.json").read_text())
        obs["block0_mtime"] = (raw / "block-0.jsonl").stat().st_mtime
        server, group = engine_group()
        with httpx.Client(timeout=5) as http:
            obs["no_key_status"] = http.get(f"http://127.0.0.1:{PORT}/v1/models").status_code
            obs["key_status"] = http.get(
                f"http://127.0.0.1:{PORT}/v1/models", headers={"Authorization": f"Bearer {fk.SECRET}"}
            ).status_code
        obs["killed_group"] = group
        obs["kill_at_records"] = fk.count_lines(partial)
        os.killpg(os.getpgid(server), signal.SIGKILL)
        t_kill = time.monotonic()
        obs["run1_rc"] = finish(sm, 180)
        obs["run1_exit_after_kill_s"] = time.monotonic() - t_kill
        obs["run1_out"] = (repo / "snakemake-1.out").read_text()
        obs["run1_partial"] = fk.lines(fk.attempt(raw, 1, k=1))
        obs["run1_meta"] = json.loads(fk.attempt(raw, 1, k=1, ext="meta.json").read_text())
        obs["run1_log"] = fk.attempt(raw, 1, k=1, ext="log").read_text()
        obs["run1_left"] = fk.alive(group) + fk.engine_processes(PORT)

        # run 2: Ctrl-C in the middle of block 1's second attempt
        procs.append(sm := start(2))
        fk.wait_for(
            lambda: fk.count_lines(partial) >= 3 or sm.poll() is not None, 600, "block 1's second attempt to measure"
        )
        assert sm.poll() is None, (repo / "snakemake-2.out").read_text()[-4000:]
        server, group = engine_group()
        obs["interrupted_group"] = group
        os.killpg(sm.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        obs["run2_rc"] = finish(sm, 180)
        obs["run2_out"] = (repo / "snakemake-2.out").read_text()
        obs["run2_left"] = fk.alive(group) + fk.engine_processes(PORT)
        obs["run2_partial_text"] = fk.attempt(raw, 2, k=1).read_text()
        obs["run2_meta"] = json.loads(fk.attempt(raw, 2, k=1, ext="meta.json").read_text())

        # run 3: the same target again, to the end
        procs.append(sm := start(3))
        obs["run3_rc"] = finish(sm, 900)
        obs["run3_out"] = (repo / "snakemake-3.out").read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                fk.kill_group(p.pid)
        for pid in fk.engine_processes(PORT):
            fk.kill_group(os.getpgid(pid))
    return obs


def test_a_killed_server_fails_its_block_and_keeps_what_was_measured(scenario):
    s = scenario
    assert len(s["killed_group"]) >= 2  # the server and its core process
    assert s["run1_rc"] != 0 and s["run1_exit_after_kill_s"] < 60
    assert "server exited with code -9 in the middle of block 2/2 (block-1)" in s["run1_out"]
    assert s["run1_meta"]["status"] == "failed" and "code -9" in s["run1_meta"]["error"]
    recs = s["run1_partial"]  # fk.lines checked it ends on a whole record
    assert len(recs) >= s["kill_at_records"] >= 3
    assert all(r["error"] is None for r in recs[: s["kill_at_records"]])
    assert f"reference server on http://127.0.0.1:{PORT}" in s["run1_log"]  # the attempt's server log is kept too
    assert "records it measured, its provenance and server log are kept in" in s["run1_out"]
    assert s["run1_left"] == []


def test_ctrl_c_stops_the_servers_whole_group_and_ends_on_a_whole_record(scenario):
    s = scenario
    assert len(s["interrupted_group"]) >= 2
    assert s["run2_rc"] != 0
    assert s["run2_left"] == []  # checked PID by PID
    text = s["run2_partial_text"]
    assert text.endswith("\n") and all(json.loads(line)["block"] == 1 for line in text.splitlines())
    assert s["run2_meta"]["status"] == "failed" and "KeyboardInterrupt" in s["run2_meta"]["error"]
    assert "Run the same target again to resume at this block" in s["run2_out"]


def test_the_rerun_resumes_at_the_unfinished_block_and_keeps_every_attempt(scenario):
    s = scenario
    raw = s["raw"]
    assert s["run3_rc"] == 0, s["run3_out"][-4000:]
    # block 0 ran once, in run 1
    assert json.loads((raw / "block-0.meta.json").read_text())["pid"] == s["block0_meta"]["pid"]
    assert (raw / "block-0.jsonl").stat().st_mtime == s["block0_mtime"]
    assert "k=0" not in s["run2_out"] and "k=0" not in s["run3_out"]
    # block 1 finished in a third server; both failed attempts are kept, whole
    meta1 = json.loads((raw / "block-1.meta.json").read_text())
    assert meta1["status"] == "complete"
    assert len({s["block0_meta"]["pid"], s["run1_meta"]["pid"], s["run2_meta"]["pid"], meta1["pid"]}) == 4
    failed = sorted(p.name for p in (raw / "failed").iterdir())
    assert failed == [f"block-1.attempt-{n}.{ext}" for n in (1, 2) for ext in ("jsonl", "log", "meta.json")]
    assert fk.lines(raw / "failed" / "block-1.attempt-1.jsonl") == s["run1_partial"]
    assert (raw / "failed" / "block-1.attempt-2.jsonl").read_text() == s["run2_partial_text"]
    runs = pd.read_csv(raw.parent / "runs.csv")
    assert len(runs) == 2 * 2 * (1 + 6) and runs.loc[~runs["warmup"], "valid"].all()
    report = s["repo"] / "report" / s["exp"]
    assert (report / "article.html").exists() and (report / "article.md").exists()


def test_the_api_key_reaches_the_server_and_no_file(scenario):
    s = scenario
    assert s["no_key_status"] == 401 and s["key_status"] == 200  # the server got the key...
    runs = pd.read_csv(s["raw"].parent / "runs.csv")
    assert runs["error"].isna().all()  # ...and every request carried it
    for name in ("block-0.meta.json", "block-1.meta.json"):
        meta = json.loads((s["raw"] / name).read_text())
        assert meta["env"]["BRACKET_REFERENCE_API_KEY"] == "***"
        assert "--api-key" not in meta["argv"]
        assert meta["argv"][meta["argv"].index("--host") + 1] == "127.0.0.1"
    repo = s["repo"]
    leaks = [
        hit
        for folder in ("results", "logs", "report", ".snakemake")
        for hit in fk.files_containing(repo / folder, fk.SECRET)
    ]
    leaks += [f"snakemake output {n}" for n in (1, 2, 3) if fk.SECRET in s[f"run{n}_out"]]
    assert leaks == []
