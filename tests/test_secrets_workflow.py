"""A key given properly, through engine.api_key_env, reaches the server and no file of the run (issue 40).

`snakemake --cores 1 NAME` on the reference engine (engine.kind: reference) whose server answers 401 to any
request without "Authorization: Bearer KEY": every run is valid only if the key reached the server. Then every
file the run left, results/, logs/, report/ and Snakemake's own .snakemake/ (its metadata holds each job's
params and code) included, is read for the key as it is, JSON-escaped, URL-encoded, in hex, HTML-escaped
and base64-encoded at any alignment. The run happens in a copy of the workflow (faultkit.repo_copy)."""

import base64
import html
import json
import re
import secrets as random_source
import subprocess
from urllib.parse import unquote_plus

import pandas as pd
import pytest
from bracket.engines.reference import API_KEY_ENV

from tests.support import faultkit as fk
from tests.support.leaks import decoded_leaks

pytestmark = pytest.mark.integration
EXP = "keysafe"
KEY_ENV = "BRACKET_TEST_WORKFLOW_KEY"
EXPERIMENT = """\
title: "A key given by engine.api_key_env"
question: "Does the key reach the server and no file?"
engine: {{kind: reference, port: {port}, api_key_env: {key_env}, args: ["--ttft", "0.01"]}}
arms:
  baseline: {{args: ["--rate", "2000"]}}
  faster: {{args: ["--rate", "4000"]}}
reference: baseline
workloads:
  code: {{prompts: experiments/prompts/code.jsonl}}
design: {{kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0, seed: 1}}
request: {{max_tokens: 16}}
analysis: {{bootstrap_resamples: 200}}
hardware: {{probe_bandwidth: false, bandwidth_gbps: 20}}
"""


def json_text(s: str) -> str:
    """`s` with JSON's escapes resolved wherever they stand, twice (JSON inside a JSON string)."""
    for _ in range(2):
        s = re.sub(r'\\(["\\/])', r"\1", s)
        s = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s)
    return s


def base64_leaks(text: str, key: str) -> bool:
    """A run of base64 characters in `text` that decodes (either alphabet, any start) to 8 bytes of `key` in a row."""
    return bool(decoded_leaks(text, key))


def leaks(text: str, key: str) -> list[str]:
    """The readings of `text` in which `key` is found."""
    found = [
        name
        for name, reading in (
            ("as is", text),
            ("JSON-escaped", json_text(text)),
            ("URL-encoded", unquote_plus(text)),
            ("HTML-escaped", html.unescape(text)),
        )
        if key in reading
    ]
    if key.encode().hex() in text.lower():
        found.append("hex")
    if base64_leaks(text, key):
        found.append("base64")
    return found


def test_the_scan_finds_the_key_in_every_encoding_it_looks_for():
    key = "k3y-" + random_source.token_urlsafe(18)
    planted = {
        "as is": f"argv: --api-key {key}",
        "JSON-escaped": "".join(f"\\u{ord(c):04x}" for c in key),
        "URL-encoded": "".join(f"%{b:02X}" for b in key.encode()),
        "HTML-escaped": "".join(f"&#{ord(c)};" for c in key),
        "hex": key.encode().hex().upper(),
        "base64": base64.b64encode(f"Bearer {key}".encode()).decode(),
    }
    for name, text in planted.items():
        assert name in leaks(text, key), name
    assert leaks("nothing here " + key[:-1], key) == []


@pytest.fixture(scope="module")
def key_run(tmp_path_factory):
    """The workflow's folder after `snakemake --cores 1 keysafe` ran there with the key in KEY_ENV, the key,
    and the run's console."""
    key = "sk-ref-" + random_source.token_urlsafe(24)
    root = fk.repo_copy(tmp_path_factory.mktemp("keysafe"))
    (root / "experiments" / f"{EXP}.yaml").write_text(EXPERIMENT.format(port=fk.free_port(), key_env=KEY_ENV))
    env = dict(fk.snakemake_env(), **{KEY_ENV: key})
    proc = subprocess.run(fk.snakemake_argv(EXP), cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return root, key, proc.stdout + proc.stderr


def test_the_key_reached_the_server(key_run):
    root, _, _ = key_run
    runs = pd.read_csv(root / "results" / EXP / "runs.csv")
    assert len(runs) == 4 and runs["valid"].all()  # the server answers 401 to a request without the key
    metas = sorted((root / "results" / EXP / "raw").glob("block-*.meta.json"))
    assert len(metas) == 2
    for meta in metas:
        assert json.loads(meta.read_text())["env"][API_KEY_ENV] == "***"


def test_no_file_of_the_run_holds_the_key_in_any_form(key_run):
    root, key, console = key_run
    for folder in ("results", "logs", "report", ".snakemake"):
        assert any(p.is_file() for p in (root / folder).rglob("*")), folder
    expected = [
        root / "results" / EXP / "experiment.resolved.json",
        root / "results" / EXP / "settings" / "block-0.json",
        root / "results" / EXP / "raw" / "block-0.meta.json",
        root / "report" / EXP / "article.html",
    ]
    assert all(p.is_file() for p in expected), [p for p in expected if not p.is_file()]
    assert any((root / ".snakemake" / "metadata").iterdir())
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            hits = leaks(path.read_bytes().decode("utf-8", errors="replace"), key)
            if hits:
                found[str(path.relative_to(root))] = hits
    assert found == {}
    assert leaks(console, key) == []


def test_the_resolved_experiment_names_the_variable_not_its_value(key_run):
    root, key, _ = key_run
    resolved = json.loads((root / "results" / EXP / "experiment.resolved.json").read_text())
    assert resolved["engine"]["api_key_env"] == KEY_ENV
    assert key not in json.dumps(resolved)
