"""Hostile input and hard kills at the block level, provoked for real against the stand-in server
(tests/data/faults/fake_engine.py): a server that echoes the API key, one that drips tokens past the
request's limit, a runner killed with SIGKILL, prompts that cannot be served. The same rules through
Snakemake are in test_hostile_workflow.py.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from bracket import records, secrets
from bracket.experiment import config, prompts
from bracket.measure.session import BlockFailed

from tests.support import faultkit as fk


@pytest.fixture(autouse=True)
def no_secrets_carried_over():
    secrets.forget()
    yield
    secrets.forget()


@pytest.mark.integration
def test_a_server_that_echoes_the_api_key_leaves_it_in_no_file_and_no_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", fk.SECRET)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=3, api_key_env="BRACKET_TEST_API_KEY")
    raw = fk.run(
        cfg, tmp_path, fk.fake_argv(port, "--api-key-env", "VLLM_API_KEY", "--script", "echo_auth,echo_text,ok")
    )
    recs = fk.lines(raw)
    # the echoed header is in the record, with the key masked: the error stays readable
    assert recs[0]["error"].startswith("HTTP 500") and "Bearer ***" in recs[0]["error"]
    assert recs[1]["error"] is None and "Bearer ***" in recs[1]["output_text"]
    assert recs[2]["error"] is None
    # the server's log said it too (a proxy logging headers): redacted once the server stopped
    log = fk.block_paths(tmp_path)["log_path"].read_text()
    assert "Authorization: Bearer ***" in log
    runs = records.tidy(records.read([raw]))
    runs.to_csv(tmp_path / "runs.csv", index=False)
    assert fk.files_containing(tmp_path, fk.SECRET) == []
    out = capsys.readouterr()
    assert fk.SECRET not in out.out + out.err and "Bearer ***" in out.err


@pytest.mark.integration
def test_an_echoed_key_in_the_error_that_stops_a_block_is_redacted_in_the_exception(tmp_path, monkeypatch):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", fk.SECRET)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=2, on_error="stop", api_key_env="BRACKET_TEST_API_KEY")
    with pytest.raises(BlockFailed) as err:
        fk.run(cfg, tmp_path, fk.fake_argv(port, "--api-key-env", "VLLM_API_KEY", "--script", "echo_auth"))
    assert "Bearer ***" in str(err.value) and fk.SECRET not in str(err.value)
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert "Bearer ***" in meta["error"]
    assert fk.files_containing(tmp_path, fk.SECRET) == []


@pytest.mark.integration
def test_a_secret_env_value_echoed_anywhere_is_redacted_too(tmp_path, monkeypatch):
    token = "hf_bracketTestToken0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=1, secret_env=["HF_TOKEN"])
    # the stand-in checks the value it was given by environment and echoes the header it got
    monkeypatch.setenv("BRACKET_TEST_API_KEY", token)
    cfg = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"api_key_env": "BRACKET_TEST_API_KEY"})})
    fk.run(cfg, tmp_path, fk.fake_argv(port, "--api-key-env", "HF_TOKEN", "--script", "echo_auth"))
    assert fk.files_containing(tmp_path, token) == []
    meta = json.loads(fk.block_paths(tmp_path)["meta_path"].read_text())
    assert meta["env"]["HF_TOKEN"] == "***"


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"])
def test_a_secret_looking_name_in_engine_env_is_refused_with_the_fix(name):
    with pytest.raises(config.ExperimentError) as err:
        config.validate({"arms": {"a": {}}, "engine": {"env": {name: "hf_abcdef"}}}, source="x.yaml")
    msg = str(err.value)
    assert f"engine.env sets {name}" in msg and "Use secret_env instead" in msg
    assert f"engine.secret_env: [{name}]" in msg and "hf_abcdef" not in msg
    with pytest.raises(config.ExperimentError, match=f"arms.a.env sets {name}"):
        config.validate({"arms": {"a": {"env": {name: "v"}}}}, source="x.yaml")


def test_names_that_are_not_secrets_stay_allowed():
    cfg = config.validate(
        {"arms": {"a": {}}, "engine": {"env": {"TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": 1}}}
    )
    assert cfg.engine.env["TOKENIZERS_PARALLELISM"] == "false"


@pytest.mark.integration
def test_a_server_that_drips_tokens_is_cut_at_the_total_limit_and_recorded_as_an_error(tmp_path):
    port = fk.free_port()
    # 8 tokens, one every 0.4 s: 3.2 s of stream, never 1 s without data; the limit is 1 s in all
    cfg = fk.experiment(tmp_path, port, runs=2, request={"timeout_s": 1.0})
    t0 = time.monotonic()
    raw = fk.run(cfg, tmp_path, fk.fake_argv(port, "--script", "drip", "--drip-s", "0.4"))
    elapsed = time.monotonic() - t0
    recs = fk.lines(raw)
    assert len(recs) == 2
    for r in recs:
        assert r["error"] == "timed out after 1 s, still streaming (request.timeout_s limits the whole request)"
        assert 1.0 <= r["wall_s"] < 1.4, r["wall_s"]
    print(
        f"\ndrip: wall_s {[round(r['wall_s'], 3) for r in recs]} with timeout_s 1.0 (stream would take 3.2 s); "
        f"block {elapsed:.1f} s"
    )
    assert records.tidy(recs)["valid"].tolist() == [False, False]


@pytest.mark.integration
def test_a_runner_killed_with_sigkill_takes_its_server_down_and_keeps_log_and_meta(tmp_path):
    port = fk.free_port()
    driver = subprocess.Popen(
        [
            sys.executable,
            str(fk.HERE / "drive_block.py"),
            str(tmp_path),
            str(port),
            "50",
            "--script",
            "slow",
            "--child",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=fk.python_env(),
    )
    paths = fk.block_paths(tmp_path)
    partial = paths["raw_path"].with_name("block-0.jsonl.partial")
    try:
        fk.wait_for(lambda: fk.count_lines(partial) >= 2, 60, "two records")
        server = fk.listener(port)
        group = fk.group_members(server)
        assert len(group) >= 2  # the server and its child
        # the attempt's provenance is on disk before the first request, not only at teardown
        meta = json.loads(paths["meta_path"].with_name("block-0.meta.json.partial").read_text())
        assert meta["status"] == "started" and meta["pid"] == server
        driver.kill()  # SIGKILL: no teardown runs in the client
        t_kill = time.monotonic()
        driver.wait(timeout=10)
        fk.wait_for(lambda: fk.alive(group) == [], 10, "the server's group to go")
        gone_after = time.monotonic() - t_kill
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in fk.engine_processes(port):
            fk.kill_group(os.getpgid(pid))
    print(f"\nSIGKILL of the runner: server group of {len(group)} gone {gone_after:.2f} s later")
    assert gone_after < 5
    assert fk.engine_processes(port) == [] and fk.listener(port) is None
    assert "serving on" in paths["log_path"].read_text()  # the log stays
    # the next attempt sets the killed one aside, whole, and runs the block in a fresh server
    raw = fk.run(fk.experiment(tmp_path, port, runs=2), tmp_path, fk.fake_argv(port))
    assert len(fk.lines(raw)) == 2
    assert len(fk.lines(fk.attempt(tmp_path))) >= 2
    assert "serving on" in fk.attempt(tmp_path, ext="log").read_text()
    assert json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())["pid"] == server


@pytest.mark.integration
def test_teardown_stops_the_watchdog_and_leaves_no_process(tmp_path):
    import psutil

    port = fk.free_port()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    fk.run(fk.experiment(tmp_path, port, runs=1), tmp_path, fk.fake_argv(port, "--child"))
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def _model_dir(tmp_path, context=2048, longest=16):
    """A model's config.json and tokenizer.json, as far as the context check reads them."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": context}))
    vocab = {"a" * n: n for n in range(1, longest + 1)}
    (model / "tokenizer.json").write_text(
        json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": [{"content": "<|endoftext|>"}]})
    )
    return model


def _with_prompts(tmp_path, lines: str, **extra):
    path = tmp_path / "bad.jsonl"
    path.write_text(lines)
    return config.validate(
        {"arms": {"a": {}}, "workloads": {"code": {"prompts": str(path)}}, "request": {"max_tokens": 8}, **extra}
    ), path


@pytest.mark.parametrize(
    "lines, said",
    [
        ('{"id": 1, "prompt": "x"}\n{"id": 2, "prompt": "y"\n', ["bad.jsonl:2: not JSON"]),
        ("", ["no prompts; add one"]),
        ("\n\n", ["no prompts; add one"]),
        ('{"id": 1, "text": "x"}\n', ['bad.jsonl:1: each line must be an object with a "prompt" key']),
        ('{"id": 1, "prompt": ""}\n', ['bad.jsonl:1: "prompt" must be non-empty text']),
    ],
)
def test_a_prompt_file_that_cannot_be_used_is_named_with_its_line(tmp_path, lines, said):
    cfg, _ = _with_prompts(tmp_path, lines)
    with pytest.raises(config.ExperimentError) as err:
        config.check_prompt_files(cfg, tmp_path, source="x.yaml")
    for phrase in said:
        assert phrase in str(err.value)
    assert str(err.value).startswith("x.yaml: workloads.code.prompts:")


def test_the_context_bound_uses_the_longest_token_and_the_output_length(tmp_path):
    model = _model_dir(tmp_path, context=100, longest=16)
    assert prompts.longest_token_bytes(model) == 16  # 'a' * 16, longer than <|endoftext|>
    # (100 - 8 max_tokens) * 16 bytes per token at most: 1472 bytes fit, with the 13-byte prefix
    fits = "x" * (92 * 16 - prompts.PREFIX_BYTES)
    cfg, _ = _with_prompts(tmp_path, json.dumps({"id": "fits", "prompt": fits}) + "\n")
    prompts.check(cfg, tmp_path, model_dir=model)
    cfg, _ = _with_prompts(tmp_path, json.dumps({"id": "over", "prompt": fits + "x"}) + "\n")
    with pytest.raises(prompts.PromptError, match="prompt 'over'.*at least 93 tokens.*100-token context of arm 'a'"):
        prompts.check(cfg, tmp_path, model_dir=model)
    # an arm that asks for a longer context is judged by its own
    cfg, _ = _with_prompts(
        tmp_path,
        json.dumps({"id": "over", "prompt": fits + "x"}) + "\n",
        arms={"a": {"server": {"context_length": 4096}}},
    )
    prompts.check(cfg, tmp_path, model_dir=model)


@pytest.mark.integration
@pytest.mark.serial
def test_a_5_mb_prompt_is_refused_before_any_server_starts(tmp_path):
    model = _model_dir(tmp_path)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port)
    big = tmp_path / "big.jsonl"
    text = "lorem ipsum " * (5_000_000 // 12)
    big.write_text(json.dumps({"id": "huge", "prompt": text}) + "\n")
    code = cfg.workloads["code"].model_copy(update={"prompts": str(big)})
    cfg = cfg.model_copy(update={"workloads": {**cfg.workloads, "code": code}})
    from bracket.block import runner
    from bracket.experiment import design

    t0 = time.monotonic()
    with pytest.raises(BlockFailed) as err:
        runner.run_block(
            cfg,
            "faults",
            design.from_config(cfg)[0],
            1,
            model=str(model),
            python=sys.executable,
            root="/",
            argv=fk.fake_argv(port),
            **fk.block_paths(tmp_path),
        )
    msg = str(err.value)
    assert msg.startswith("block 1/1 (block-0) was not started:")
    nbytes = len(text) + prompts.PREFIX_BYTES
    assert f"prompt 'huge' of {big} is {nbytes:,} bytes, so at least {-(-nbytes // 16):,} tokens" in msg
    assert "2,048-token context" in msg and "Shorten the prompt" in msg
    assert time.monotonic() - t0 < 10
    assert not fk.block_paths(tmp_path)["log_path"].exists()  # no server was started


def test_counts_leave_warmups_out_and_count_each_invalid_run_once():
    import pandas as pd
    from bracket.stats.analyze import _counts

    runs = records.tidy(
        [
            records.new_record(arm="a", workload="w", position=0, run=0, warmup=True, error="HTTP 500: x", wall_s=1),
            records.new_record(
                arm="a",
                workload="w",
                position=0,
                run=1,
                warmup=False,
                finish_reason="stop",
                completion_tokens=4,
                max_tokens=8,
                cached_tokens=0,
                wall_s=1.0,
            ),
            records.new_record(
                arm="a",
                workload="w",
                position=0,
                run=2,
                warmup=False,
                finish_reason="length",
                completion_tokens=8,
                max_tokens=8,
                cached_tokens=0,
                wall_s=1.0,
            ),
        ]
    )
    c = _counts(runs, runs)
    assert c == {"total": 3, "valid": 1, "warmups": 1, "invalid": 1, "invalid_by_reason": {"early stop": 1}}
    assert records.nothing_valid(runs) is None
    assert records.nothing_valid(runs.assign(valid=False)).startswith("no valid measurement: all 2 timed")
    assert "1 x early stop; the first: early stop (stop)" in records.nothing_valid(runs.iloc[:2])
    assert records.nothing_valid(runs.iloc[:1]) == (
        "no valid measurement: runs.csv holds no timed request (1 warmups only)."
    )
    assert isinstance(runs, pd.DataFrame)


def test_an_arm_or_workload_without_a_valid_run_is_an_error_in_the_first_lines():
    from types import SimpleNamespace

    from bracket import article
    from bracket.stats.coverage import unmeasured
    from bracket.stats.results import Unmeasured

    rows = [
        records.new_record(
            arm=arm,
            workload=wl,
            position=i,
            run=0,
            warmup=False,
            finish_reason="length",
            completion_tokens=8,
            max_tokens=8,
            cached_tokens=0,
            wall_s=1.0,
            error=None if arm == "a" else "HTTP 400: too long",
        )
        for i, (arm, wl) in enumerate([("a", "code"), ("b", "code"), ("b", "code")])
    ]
    wl = {"prompts": "experiments/prompts/code.jsonl"}
    experiment = config.validate({"arms": {"a": {}, "b": {}}, "workloads": {"code": wl, "chat": wl}}, source="test")
    found = unmeasured(records.tidy(rows), experiment)
    assert found == [
        {"what": "arm", "name": "b", "reasons": {"error": 2}},
        {"what": "workload", "name": "chat", "reasons": {}},
    ]
    typed = tuple(Unmeasured.model_validate(u) for u in found)  # as stats.json holds them (bracket.stats.results)
    assert article.unmeasured(SimpleNamespace(results=SimpleNamespace(unmeasured=typed))) == [
        "Error: arm b has no valid run (2 error); nothing below measures it.",
        "Error: workload chat has no valid run (no timed request ran); nothing below measures it.",
    ]


def test_model_output_with_dollars_does_not_render_as_math_in_markdown():
    from bracket import article

    assert article.md_esc("$$x$$ costs $5") == "\\$\\$x\\$\\$ costs \\$5"


CLIENT = """
import sys, time
from pathlib import Path
from bracket.wire.server import Server
s = Server(argv=["sh", "-c", "sleep 600 & sleep 600"], env={{}}, log_path=Path({log!r}), base_url="http://x")
s.start()
print(s.proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.integration
def test_the_watchdog_takes_down_the_whole_group_of_a_killed_client(tmp_path):
    """sh's background child gets no parent-death signal (only the group leader does): the watchdog stops it."""
    script = CLIENT.format(log=str(tmp_path / "server.log"))
    client = subprocess.Popen([sys.executable, "-c", script], env=fk.python_env(), stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(client.stdout.readline())
        group = fk.wait_for(lambda: (g := fk.group_members(pgid)) and len(g) >= 2 and g, 10, "the server's group")
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        t0 = time.monotonic()
        fk.wait_for(lambda: fk.alive(group) == [], 10, "the group to go")
        print(f"\nwatchdog: group of {len(group)} gone {time.monotonic() - t0:.2f} s after the client's SIGKILL")
    finally:
        if client.poll() is None:
            client.kill()
        fk.kill_group(pgid)


SECRET_CLIENT = """
import sys, time
from pathlib import Path
from bracket import secrets
from bracket.wire.server import Server
secrets.register({secret!r})
s = Server(argv=["sh", "-c", "echo token=$HF_TOKEN; echo starting; sleep 600"], env={{"HF_TOKEN": {secret!r}}},
           log_path=Path({log!r}), base_url="http://x")
s.start()
print(s.proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.integration
def test_a_secret_the_server_logs_is_redacted_even_when_its_client_is_killed_outright(tmp_path):
    """The client redacts the server's log at teardown; SIGKILL runs none, so the watchdog does it,
    with the secrets it was handed on stdin (never on its command line)."""
    secret = "hf_watchdog_test_7c1e"
    log = tmp_path / "server.log"
    script = SECRET_CLIENT.format(log=str(log), secret=secret)
    client = subprocess.Popen([sys.executable, "-c", script], env=fk.python_env(), stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(client.stdout.readline())
        fk.wait_for(lambda: log.is_file() and "starting" in log.read_text(), 10, "the server's log line")
        assert secret in log.read_text()  # the server really wrote it
        watchdogs = [
            p for p in fk.psutil.process_iter(["cmdline"]) if "watchdog.py" in " ".join(p.info["cmdline"] or [])
        ]
        assert watchdogs and not any(secret in " ".join(p.info["cmdline"]) for p in watchdogs)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        fk.wait_for(lambda: secret not in log.read_text(), 15, "the log to be redacted")
    finally:
        if client.poll() is None:
            client.kill()
        fk.kill_group(pgid)
    assert "token=***" in log.read_text()


@pytest.mark.parametrize("args", [["--api-key", "sk-x"], ["--hf-token=hf_x"]])
def test_a_secret_on_the_servers_command_line_is_refused(args):
    with pytest.raises(config.ExperimentError, match=f"engine.args passes {args[0].split('=')[0]}.*api_key_env"):
        config.validate({"arms": {"a": {}}, "engine": {"args": args}}, source="x.yaml")
    config.validate({"arms": {"a": {"args": ["--max-num-batched-tokens", "512", "--tokenizer-mode", "auto"]}}})


@pytest.mark.integration
def test_malformed_counts_a_key_in_a_number_and_a_stalled_head_are_error_records_and_the_block_goes_on(
    tmp_path, monkeypatch, capsys
):
    """Issue 33 through the block runner: NaN as a token count, the API key where cached_tokens belongs, a
    server that sends one header every 0.3 s. Each is one error record with the response kept (key masked),
    the stalled head ends at request.timeout_s, and the block's next request is measured."""
    monkeypatch.setenv("BRACKET_TEST_API_KEY", fk.SECRET)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=5, api_key_env="BRACKET_TEST_API_KEY", request={"timeout_s": 2.0})
    raw = fk.run(
        cfg,
        tmp_path,
        fk.fake_argv(port, "--api-key-env", "VLLM_API_KEY", "--script", "ok,nan_count,key_in_count,stall_head,ok"),
    )
    recs = fk.lines(raw)
    assert len(recs) == 5
    assert recs[0]["error"] is None and recs[4]["error"] is None and recs[4]["completion_tokens"] == 8
    assert recs[1]["error"] == (
        "malformed token counts in the response: completion_tokens is nan, not a non-negative whole number"
    )
    assert '"completion_tokens": NaN' in recs[1]["raw_response"]
    assert recs[2]["error"] == (
        "malformed token counts in the response: cached_tokens is 'Bearer ***', not a non-negative whole number"
    )
    assert '"cached_tokens": "Bearer ***"' in recs[2]["raw_response"]
    assert recs[3]["error"] == "timed out after 2 s without data from the server (request.timeout_s)"
    assert 2.0 <= recs[3]["wall_s"] < 3.0, recs[3]["wall_s"]
    assert json.loads(fk.block_paths(tmp_path)["meta_path"].read_text())["status"] == "complete"
    assert records.tidy(recs)["valid"].tolist() == [True, False, False, False, True]
    assert fk.files_containing(tmp_path, fk.SECRET) == []
    out = capsys.readouterr()
    assert fk.SECRET not in out.out + out.err and "Traceback" not in out.out + out.err
