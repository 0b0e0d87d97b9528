"""Secrets in every form, short keys, credentials in URLs, names and YAML that would hurt: round three of
hostile input (issue 33). Expected values are worked out here by hand (base64 and URL encodings of a
known key); the block-level cases run the real runner against the stand-in server over real HTTP."""

import base64
import json
import os
import re
import sys
import time
from urllib.parse import quote, quote_plus

import pytest
from bracket import engines, records, secrets
from bracket.experiment import config, preflight
from bracket.measure import session

from tests.support import faultkit as fk
from tests.support.leaks import decoded_leaks

KEY = fk.SECRET  # sk-bracket-test-7f3a9c1e5b


@pytest.fixture(autouse=True)
def no_secrets_carried_over():
    secrets.forget()
    yield
    secrets.forget()


def leaks(text: str, key: str = KEY) -> list[str]:
    """Every way `key` can be read back from `text`: raw, URL-decoded, base64-decoded."""
    from urllib.parse import unquote_plus

    out = [f for f in (key, quote(key, safe=""), quote_plus(key)) if f in text]
    if key in unquote_plus(text):
        out.append("url-decoded")
    return out + decoded_leaks(text, key)


def test_every_form_of_the_key_in_transit_is_redacted():
    secrets.register(KEY)
    header = f"Bearer {KEY}"
    echoed = [
        f"upstream said {header}",
        base64.b64encode(header.encode()).decode(),  # the header, base64 (key at byte 7)
        "x" + base64.b64encode(KEY.encode()).decode() + "==",  # the key alone, base64
        base64.urlsafe_b64encode(f"user:{KEY}".encode()).decode(),  # Basic auth, URL-safe (key at byte 5)
        base64.b64encode(f"ab{KEY}".encode()).decode(),  # key at byte 2
        f"GET /v1/models?api_key={quote_plus(KEY)}&x=1",
        f"http://user:{quote(KEY, safe='')}@gateway:8000/v1",
        json.dumps({"k": KEY + "\u2028"})[1:-1],
    ]
    for text in echoed:
        assert leaks(text), text  # the stand-in text really carries the key
        out = secrets.redact(text)
        assert leaks(out) == [], (text, out)
        assert "***" in out
    # whole forms only: text around them is kept
    assert secrets.redact(f"a {header} b") == "a Bearer *** b"


def test_redaction_changes_no_measured_value_nor_any_field_name():
    secrets.register(KEY)
    rec = records.new_record(
        experiment="experiment",
        arm="baseline",
        workload="code",
        block=0,
        position=0,
        run=1,
        warmup=False,
        prompt_id="p1",
        completion_tokens=8,
        max_tokens=8,
        wall_s=0.123,
        finish_reason="length",
        output_text=" x t t",
        error=None,
    )
    assert secrets.redact_obj(rec) == rec
    line = json.dumps(secrets.redact_obj(rec))
    assert json.loads(line) == rec


@pytest.mark.parametrize("key", ["x", "EMPTY", "token-abc12"])  # 1, 5, 11 characters
def test_a_key_too_short_to_redact_is_refused_before_any_server_with_the_fix(monkeypatch, key):
    cfg = config.validate(
        {"engine": {"kind": "vllm", "embedded": False, "model": "/m", "api_key_env": "MY_KEY"}, "arms": {"a": {}}}
    )
    found = preflight.secret_problems(cfg, {"MY_KEY": key})
    assert len(found) == 1
    msg = found[0]
    assert msg.startswith(f"engine.api_key_env: the secret in $MY_KEY is {len(key)} character(s) long")
    assert "Use a longer key (at least 12 characters" in msg
    monkeypatch.setenv("MY_KEY", key)
    assert preflight.problems(cfg, "/") == found  # before the model, engine and attach checks
    with pytest.raises(session.BlockFailed, match="Use a longer key"):
        session.credentials(cfg, engines.get("vllm"))
    with pytest.raises(secrets.SecretTooShort):
        secrets.register(key)
    assert secrets.known() == frozenset()
    # twelve characters pass
    assert preflight.secret_problems(cfg, {"MY_KEY": "token-abc123"}) == []


def test_a_short_secret_env_value_is_refused_by_its_name():
    cfg = config.validate(
        {"engine": {"kind": "vllm", "embedded": False, "model": "/m", "secret_env": ["HF_TOKEN"]}, "arms": {"a": {}}}
    )
    assert preflight.secret_problems(cfg, {"HF_TOKEN": "hf_1"})[0].startswith(
        "engine.secret_env: the secret in $HF_TOKEN is 4 character(s) long"
    )


@pytest.mark.parametrize(
    "url, said, fixed",
    [
        (
            f"http://user:{KEY}@10.0.0.5:8000",
            "holds credentials before its host (http://***@10.0.0.5:8000)",
            "engine.base_url: http://10.0.0.5:8000",
        ),
        (f"http://{KEY}@10.0.0.5:8000/", "holds credentials", "engine.base_url: http://10.0.0.5:8000/"),
        (
            f"https://10.0.0.5:8000/v1?api_key={KEY}",
            "has a query string (https://10.0.0.5:8000/v1?***)",
            "engine.base_url: https://10.0.0.5:8000/v1",
        ),
        (f"http://10.0.0.5:8000/#{KEY}", "has a fragment", "engine.base_url: http://10.0.0.5:8000/"),
    ],
)
def test_credentials_in_the_base_url_are_refused_without_repeating_them(url, said, fixed):
    with pytest.raises(config.ExperimentError) as err:
        config.validate(
            {"engine": {"kind": "openai", "launch": "attach", "embedded": False, "base_url": url}, "arms": {"a": {}}},
            source="x.yaml",
        )
    msg = str(err.value)
    assert msg.startswith("x.yaml: engine.base_url ") and said in msg and fixed in msg
    assert "api_key_env" in msg and leaks(msg) == [] and "\n" not in msg


@pytest.mark.parametrize("where", ["arms", "workloads"])
@pytest.mark.parametrize("name", ["code\n", "code\r", "co\tde", "code\x00", "code ", "\ncode"])
def test_a_name_with_a_newline_or_control_character_is_refused(where, name):
    body = {"arms": {"a": {}}, "workloads": {"code": {"prompts": "p.jsonl"}}}
    body[where] = {name: {"prompts": "p.jsonl"} if where == "workloads" else {}}
    with pytest.raises(config.ExperimentError, match=f"{where[:-1]} name {re.escape(repr(name))} is not allowed"):
        config.validate(body, source="x.yaml")
    assert config.name_problem("experiment", name) is not None


def test_a_host_name_with_a_trailing_newline_is_refused():
    with pytest.raises(config.ExperimentError, match="hosts.0"):
        config.validate({"arms": {"a": {}}, "hosts": ["box1\n", "box2"]})
    config.validate({"arms": {"a": {}}, "hosts": ["box1", "box2.lan"]})


def alias_bomb(levels: int = 9) -> str:
    """The billion laughs: each anchor holds 9 aliases of the one before, 9**levels values in all."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join(["*" + prev] * 9) + "]")
    return "\n".join(lines) + f"\narms: {{x: {{label: *{chr(ord('a') + levels - 1)}}}}}\n"


@pytest.mark.integration
@pytest.mark.serial
def test_an_alias_bomb_is_refused_in_under_a_second_with_one_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    assert len(path.read_bytes()) < 600  # 9**9 = 387 million strings once expanded
    t0 = time.monotonic()
    with pytest.raises(config.ExperimentError) as err:
        config.load(path)
    took = time.monotonic() - t0
    msg = str(err.value)
    assert took < 1.0, took
    assert msg == (
        f"{path}: it expands to more than 100,000 values (aliases `*name` repeat what an anchor `&name` "
        f"holds); an experiment needs a few hundred: write the values out, or use fewer aliases."
    )
    # a recursive alias is refused the same way
    path.write_text("a: &a [*a]\narms: {x: {}}\n")
    with pytest.raises(config.ExperimentError, match="expands to more than"):
        config.load(path)
    # a few aliases stay allowed
    path.write_text("s: &s {max_tokens: 8}\narms: {x: {}}\nrequest: *s\n")
    assert config._read_yaml(path)["request"] == {"max_tokens": 8}


@pytest.mark.integration
@pytest.mark.serial
def test_an_experiment_file_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("arms: {x: {}}\n" + "# padding\n" * 150_000)  # 1.5 MB
    t0 = time.monotonic()
    with pytest.raises(
        config.ExperimentError,
        match=r"big.yaml: 1,500,014 bytes, more than an experiment file "
        r"may hold \(1,000,000\)",
    ):
        config.load(path)
    assert time.monotonic() - t0 < 0.5


def test_a_design_of_thousands_of_blocks_is_refused_with_the_count():
    with pytest.raises(
        config.ExperimentError,
        match=r"design.rounds is 2000, which makes at least 4,000 blocks "
        r"\(2 arm\(s\)\), more than 500",
    ):
        config.validate({"arms": {"a": {}, "b": {}}, "design": {"rounds": 2000}}, source="x.yaml")
    config.validate({"arms": {"a": {}, "b": {}}, "design": {"rounds": 250}})  # 500 blocks: allowed


@pytest.mark.integration
def test_a_server_echoing_the_key_in_other_forms_leaves_it_in_no_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", KEY)
    port = fk.free_port()
    cfg = fk.experiment(tmp_path, port, runs=3, api_key_env="BRACKET_TEST_API_KEY")
    raw = fk.run(
        cfg, tmp_path, fk.fake_argv(port, "--api-key-env", "VLLM_API_KEY", "--script", "echo_forms,echo_forms_text,ok")
    )
    recs = fk.lines(raw)
    assert recs[0]["error"].startswith("HTTP 500") and "***" in recs[0]["error"]
    assert recs[1]["error"] is None and recs[1]["output_text"].count("***") >= 5
    log = fk.block_paths(tmp_path)["log_path"].read_text()
    assert "upstream saw" in log  # the server logged the forms, redacted once it stopped
    # nothing measured was changed: names, counts and the experiment column as sent
    for r in recs[1:]:
        assert (r["experiment"], r["arm"], r["workload"], r["completion_tokens"], r["finish_reason"]) == (
            "faults",
            "baseline",
            "code",
            8,
            "length",
        )
    runs = records.tidy(records.read([raw]))
    runs.to_csv(tmp_path / "runs.csv", index=False)
    assert list(runs["experiment"]) == ["faults"] * 3
    found = {str(p): leaks(p.read_text(errors="replace")) for p in tmp_path.rglob("*") if p.is_file()}
    assert {p: hit for p, hit in found.items() if hit} == {}
    out = capsys.readouterr()
    assert leaks(out.out + out.err) == []


FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from bracket.block import runner
from tests.support import faultkit
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))  # no file of this process may pass 2,000 bytes
tmp, port = Path({tmp!r}), {port}
try:
    faultkit.run(faultkit.experiment(tmp, port, runs=5), tmp, faultkit.fake_argv(port))
except runner.BlockFailed as exc:
    print(f"block failed: {{exc}}", file=sys.stderr)
    sys.exit(1)
"""


@pytest.mark.integration
def test_a_disk_that_fills_mid_block_gives_one_line_a_failed_meta_and_a_clean_rerun(tmp_path):
    """Records are 760 bytes: two fit under the 2,000-byte limit, the third does not (RLIMIT_FSIZE stands in
    for a full disk: the write fails with an OSError the same way, EFBIG instead of ENOSPC)."""
    import subprocess

    port = fk.free_port()
    script = FULL_DISK.format(tmp=str(tmp_path), port=port)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=fk.python_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.stderr.count("OSError") == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("block failed:")]
    assert len(said) == 1 and "block 1/1 (block-0) stopped: cannot write" in said[0], proc.stderr[-2000:]
    assert "File too large. The 2 whole records written before are kept" in said[0]
    meta = json.loads(fk.attempt(tmp_path, ext="meta.json").read_text())
    assert meta["status"] == "failed" and "File too large" in meta["error"]
    assert len(records.read([fk.attempt(tmp_path)])) == 2  # whole records only; the torn third is skipped
    raw = fk.run(fk.experiment(tmp_path, port, runs=5), tmp_path, fk.fake_argv(port))
    assert len(fk.lines(raw)) == 5
    assert json.loads(fk.block_paths(tmp_path)["meta_path"].read_text())["status"] == "complete"


@pytest.mark.integration
def test_the_server_log_of_a_killed_runner_reaches_failed_even_when_its_declared_log_is_deleted(tmp_path):
    import subprocess

    port = fk.free_port()
    driver = subprocess.Popen(
        [sys.executable, str(fk.HERE / "drive_block.py"), str(tmp_path), str(port), "50", "--script", "slow"],
        env=fk.python_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    paths = fk.block_paths(tmp_path)
    try:
        fk.wait_for(
            lambda: fk.count_lines(paths["raw_path"].with_name("block-0.jsonl.partial")) >= 2, 60, "two records"
        )
        driver.kill()
        driver.wait(timeout=10)
        fk.wait_for(lambda: fk.listener(port) is None, 15, "the server to go")
    finally:
        if driver.poll() is None:
            driver.kill()
    assert "serving on" in paths["log_path"].read_text()
    paths["log_path"].unlink()  # what Snakemake does to a killed job's declared log before rerunning it
    raw = fk.run(fk.experiment(tmp_path, port, runs=2), tmp_path, fk.fake_argv(port))
    assert len(fk.lines(raw)) == 2
    kept = fk.attempt(tmp_path, ext="log").read_text()
    assert "serving on" in kept and "request 1 slow" in kept
    assert not (tmp_path / "raw" / "block-0.log.partial").exists()  # a complete block leaves no second name


@pytest.mark.integration
def test_two_experiments_started_at_once_on_different_ports_never_measure_at_the_same_time(tmp_path):
    """Two checkouts' blocks (own folders, own port locks, own ports) share one host-wide lock folder."""
    import subprocess

    env = fk.python_env(dict(os.environ, BRACKET_LOCK_DIR=str(tmp_path / "host-locks")))
    runs = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        runs.append(
            (
                tmp_path / name,
                subprocess.Popen(
                    [
                        sys.executable,
                        str(fk.HERE / "drive_block.py"),
                        str(tmp_path / name),
                        str(fk.free_port()),
                        "2",
                        "--script",
                        "slow",
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    errs = [proc.communicate(timeout=120)[1] for _, proc in runs]
    assert [proc.returncode for _, proc in runs] == [0, 0], errs
    metas = [json.loads(fk.block_paths(folder)["meta_path"].read_text()) for folder, _ in runs]
    (a, b) = sorted(metas, key=lambda m: m["started_at"])
    # each block: a server started, 2 requests of 1.6 s, teardown; the second took the lock only after the first
    # gave it up with its server gone, and started its server after that (ended_at, when the first attempt's
    # records were closed, comes after the release: the second may start in between)
    la, lb = a["host_lock"], b["host_lock"]
    assert la["acquired_at"] < a["started_at"] < la["released_at"] <= lb["acquired_at"] < b["started_at"], (la, lb)
    assert b["host_lock"]["waited_s"] >= 3.0 and "faults block 1/1 (block-0)" in b["host_lock"]["waited_for"]
    assert a["host_lock"]["waited_for"] is None
    waiting = [e for e in errs if "waiting for the host-wide lock" in e]
    assert len(waiting) == 1 and "another measurement uses this host's cores" in waiting[0]
    assert b["host_lock"]["path"] == str(tmp_path / "host-locks" / f"host-{__import__('socket').gethostname()}.lock")


def test_the_host_lock_of_an_attached_server_is_named_for_the_server_host(monkeypatch):
    monkeypatch.setenv("BRACKET_LOCK_DIR", "/locks")
    here = __import__("socket").gethostname()
    launched = config.validate({"engine": {"kind": "vllm", "embedded": False, "model": "/m"}, "arms": {"a": {}}})
    assert str(session.host_lock_path(launched)) == f"/locks/host-{here}.lock"
    for url, name in (
        ("http://127.0.0.1:8000", here),
        ("http://localhost:8000", here),
        ("http://gpu-7.lan:8000", "gpu-7.lan"),
    ):
        cfg = config.validate(
            {"engine": {"kind": "openai", "launch": "attach", "embedded": False, "base_url": url}, "arms": {"a": {}}}
        )
        assert str(session.host_lock_path(cfg)) == f"/locks/host-{name}.lock"


def test_an_arm_without_a_valid_run_leaves_the_headline_without_a_winner():
    from types import SimpleNamespace

    from bracket.article import headline
    from bracket.stats.coverage import unmeasured
    from bracket.stats.results import Unmeasured

    rows = [
        records.new_record(
            arm=arm,
            workload="code",
            position=i,
            run=0,
            warmup=False,
            finish_reason="length",
            completion_tokens=8,
            max_tokens=8,
            cached_tokens=0,
            wall_s=wall,
            error=None if arm == "a" else "HTTP 400: too long",
        )
        for i, (arm, wall) in enumerate([("a", 0.1), ("b", 1.0)])
    ]
    runs = records.tidy(rows)
    assert records.arms_without_valid_run(runs, ["a", "b", "c"]) == ["b", "c"]
    experiment = config.validate(
        {"arms": {"a": {}, "b": {}, "c": {}}, "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}}},
        source="test",
    )
    gaps = tuple(Unmeasured.model_validate(u) for u in unmeasured(runs, experiment))
    d = SimpleNamespace(results=SimpleNamespace(unmeasured=gaps))  # stats.json's unmeasured, typed
    assert headline.unmeasured_arms(d) == ["b", "c"]
    row = {
        "workload": "code",
        "arm": "a",
        "median": 80.0,
        "n": 1,
        "min": 80.0,
        "max": 80.0,
        "is_reference": True,
        "unmeasured": ["b", "c"],
    }
    text = headline.headline_sentence(row, "a")
    assert text.startswith(
        "code: no arm is named fastest, because b and c had no valid run; the highest median "
        "among the arms measured, a's 80"
    )
    assert "was fastest" not in text and text.endswith("is a measurement, not a winner.")


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SECRET_TEXT = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Cs",)), min_size=12, max_size=40
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=SECRET_TEXT,
    prefix=st.text(max_size=8),
    suffix=st.text(max_size=8),
    form=st.sampled_from(["raw", "bearer_b64", "b64", "basic_urlsafe", "query", "userinfo", "json"]),
    measured=st.dictionaries(
        st.sampled_from(["experiment", "arm", "workload", "prompt_id", "finish_reason"]),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,10}", fullmatch=True),
    ),
)
def test_property_no_form_of_a_secret_survives_and_no_other_value_changes(key, prefix, suffix, form, measured):
    secrets.forget()
    secrets.register(key)
    encoded = {
        "raw": key,
        "bearer_b64": base64.b64encode(f"Bearer {key}".encode()).decode(),
        "b64": base64.b64encode(key.encode()).decode(),
        "basic_urlsafe": base64.urlsafe_b64encode(f"u:{key}".encode()).decode(),
        "query": f"?api_key={quote_plus(key)}",
        "userinfo": f"http://u:{quote(key, safe='')}@h/",
        "json": json.dumps(key)[1:-1],
    }[form]
    out = secrets.redact(prefix + encoded + suffix)
    if key not in prefix + suffix:
        assert key not in out and decoded_leaks(out, key) == [] and "***" in out
    # a record whose values hold no form of the key comes out as it went in
    if not any(f in json.dumps(measured) for f in secrets.known()):
        assert secrets.redact_obj({**measured, "completion_tokens": 8}) == {**measured, "completion_tokens": 8}
    secrets.forget()


@given(name=st.text(min_size=1, max_size=20))
def test_property_a_name_passes_only_if_it_is_a_plain_path_component(name):
    ok = config.name_problem("workload", name) is None
    assert ok == bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name, flags=re.ASCII))
    if ok:
        assert os.path.basename(name) == name and not any(ord(c) < 32 for c in name)
