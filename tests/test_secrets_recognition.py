"""Secrets by recognition, not by spelling (issue 40): an engine argument the engine's own parser reads as a
secret is refused at validation with the fix, whatever its spelling; a key a server echoes escaped, one
character at a time or all of them, in JSON, URL, hex or HTML encodings, is masked in every record.

Known truths, not bracket's own code, say what a spelling means: Python's argparse (vLLM's and SGLang's
parser) says which option an argument is, json.loads / unquote / bytes.fromhex / html.unescape say what an
encoded text holds. The encoded echoes are written out by hand."""

import argparse
import base64
import html
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, unquote_plus

import httpx
import pytest
from bracket import engines, records, secrets
from bracket.experiment import config
from bracket.measure import session
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import faultkit as fk

KEY = "sk-bracket-test-7f3a9c1e5b"  # faultkit.SECRET
# KEY with every character as JSON's \uXXXX, written out by hand from the ASCII table (s = 0x73, k = 0x6b, ...).
KEY_U = (
    r"\u0073\u006b\u002d\u0062\u0072\u0061\u0063\u006b\u0065\u0074\u002d\u0074\u0065\u0073\u0074\u002d"
    r"\u0037\u0066\u0033\u0061\u0039\u0063\u0031\u0065\u0035\u0062"
)
# KEY's bytes in hex, by hand: "sk-" is 73 6b 2d, "bracket" 62 72 61 63 6b 65 74, ...
KEY_HEX = "736b2d627261636b65742d746573742d376633613963316535" + "62"


@pytest.fixture(autouse=True)
def no_secrets_carried_over():
    secrets.forget()
    yield
    secrets.forget()


def test_the_hand_written_encodings_hold_the_key():
    assert KEY == fk.SECRET
    assert json.loads(f'"{KEY_U}"') == KEY
    assert bytes.fromhex(KEY_HEX).decode() == KEY


# -- recognition: what the engine's parser reads ---------------------------------------------------------------


def engine_parser() -> argparse.ArgumentParser:
    """The secret-bearing options of vLLM and SGLang beside neighbours that share their first letters, in the
    parser both use (argparse, allow_abbrev on, as by default)."""
    ap = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    for option in ("--api-key", "--admin-api-key", "--hf-token"):
        ap.add_argument(option)
    for option in ("--api-server-count", "--allowed-origins", "--hf-overrides", "--host", "--port", "--max-model-len"):
        ap.add_argument(option)
    return ap


SECRET_DESTS = ("api_key", "admin_api_key", "hf_token")


def read_as_secret(args: list[str]) -> bool:
    """True when argparse, given `args`, sets a secret-bearing option (the truth the refusal must follow)."""
    try:
        ns, _ = engine_parser().parse_known_args(args)
    except (argparse.ArgumentError, SystemExit):
        return False
    return any(getattr(ns, d) is not None for d in SECRET_DESTS)


def validate_args(args: list[str], where: str = "engine", **engine):
    body = {"engine": {"kind": "vllm", "embedded": False, "model": "/m", **engine}, "arms": {"a": {}}}
    if where == "engine":
        body["engine"]["args"] = args
    else:
        body["arms"]["a"]["args"] = args
    return config.validate(body, source="x.yaml")


@pytest.mark.parametrize(
    "args, said",
    [
        (["--api-ke", KEY], "passes --api-ke, which an engine's parser reads as --api-key"),  # the case
        (["--api-k", KEY], "reads as --api-key"),
        (["--api", KEY], "reads as --api-key"),
        ([f"--api-ke={KEY}"], "passes --api-ke, which"),
        ([f"--api-key={KEY}"], "passes --api-key, whose value would be a secret"),
        (["--api_key", KEY], "passes --api_key, whose value"),
        ([f"--api_ke={KEY}"], "passes --api_ke, which an engine's parser reads as --api-key"),
        (["--admin-api", KEY], "reads as --admin-api-key"),  # SGLang
        (["--hf-tok", "hf_abcdefghijklmnop"], "reads as --hf-token"),  # vLLM
        (["-hft", "hf_abcdefghijklmnop"], "passes -hft, whose value"),  # llama.cpp's short form
        (["--api-key-file", "/run/secrets/key"], "passes --api-key-file"),  # llama.cpp
        ([f"--port 8000 --api-key {KEY}"], "passes --api-key, whose value"),  # several words in one argument
        (["--api-key", "${VLLM_API_KEY}"], "passes --api-key"),
        (["--served-model-name", "$VLLM_API_KEY"], "refers to the environment variable $VLLM_API_KEY"),
        (["--served-model-name", "${HF_TOKEN:-fallback}"], "refers to the environment variable $HF_TOKEN"),
        (["--served-model-name", "%OPENAI_API_KEY%"], "refers to the environment variable $OPENAI_API_KEY"),
        (["--hf-overrides", '{"hf_token": "hf_abcdefghijklmnop"}'], "sets hf_token inside it"),
        (["--model", "https://host/m.gguf?token=abcdefghijklmnop"], "sets token inside it"),
    ],
)
@pytest.mark.parametrize("where", ["engine", "arms"])
def test_an_argument_the_engine_reads_as_a_secret_is_refused_with_the_fix(args, said, where):
    with pytest.raises(config.ExperimentError) as err:
        validate_args(args, where)
    msg = str(err.value)
    place = "engine.args" if where == "engine" else "arms.a.args"
    assert msg.startswith(f"x.yaml: {place} ") and said in msg, msg
    assert "Give an API key by engine.api_key_env" in msg and "engine.secret_env" in msg
    assert msg.endswith(f"and remove it from {place}.")
    for value in (KEY, "hf_abcdefghijklmnop", "fallback"):
        assert value not in msg


def test_the_refusals_follow_what_argparse_itself_reads_as_a_key():
    """Every spelling above that argparse reads as a secret option is refused, and the neighbours it reads as
    other options are not (ambiguous prefixes, an error of argparse, are refused too)."""
    secret = [["--api-ke", KEY], ["--api-k", KEY], [f"--api-key={KEY}"], ["--admin-api", KEY], ["--hf-tok", KEY]]
    for args in secret:
        assert read_as_secret(args), args
        assert secrets.argument_problem(args[0], environ={}) is not None, args
    for args in (["--api-s", "2"], ["--allowed-o", "*"], ["--hf-o", "{}"], ["--max-model", "512"], ["--host", "h"]):
        assert not read_as_secret(args), args
        assert [secrets.argument_problem(a, environ={}) for a in args] == [None, None], args


@settings(max_examples=300, deadline=None)
@given(
    option=st.sampled_from(["--api-key", "--admin-api-key", "--hf-token"]),
    cut=st.integers(min_value=3, max_value=15),
    equals=st.booleans(),
)
def test_property_every_spelling_argparse_reads_as_a_secret_is_refused(option, cut, equals):
    written = option[:cut]
    args = [f"{written}={KEY}"] if equals else [written, KEY]
    if read_as_secret(args):
        assert secrets.argument_problem(args[0], environ={}) is not None, args
        underscored = "--" + args[0][2:].replace("-", "_")  # as vLLM reads it: dashes
        assert secrets.argument_problem(underscored, environ={}) is not None, underscored


@pytest.mark.parametrize(
    "args",
    [
        ["--max-model-len", "4096", "--tokenizer-mode", "auto", "--host", "0.0.0.0"],
        ["--ssl-keyfile", "/etc/ssl/private/server.pem"],  # a path, not a key
        ["--max-num-batched-tokens", "512", "--served-model-name", "$HOME"],  # not a secret's variable
        ["--hf-overrides", '{"max_position_embeddings": 4096}'],
        ["-a", "alias", "--alias", "qwen"],  # llama.cpp's -a is --alias
    ],
)
def test_arguments_that_carry_no_secret_stay_allowed(args):
    validate_args(args)


def test_the_value_of_a_secret_variable_written_out_is_refused_by_the_variables_name(monkeypatch):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", KEY)
    monkeypatch.setenv("MY_DEPLOY_CRED", "cred-0123456789abcdef")  # not a secret by its name: named below
    for arg, name in (
        (KEY, "BRACKET_TEST_API_KEY"),
        (f"--served-model-name={KEY}", "BRACKET_TEST_API_KEY"),
        (base64.b64encode(f"user:{KEY}".encode()).decode(), "BRACKET_TEST_API_KEY"),
        ("cred-0123456789abcdef", "MY_DEPLOY_CRED"),
    ):
        with pytest.raises(config.ExperimentError) as err:
            validate_args(["--served-model-name", arg], secret_env=["MY_DEPLOY_CRED"])
        msg = str(err.value)
        assert f"holds the value of ${name}" in msg and KEY not in msg and "cred-0123" not in msg
    validate_args(["--served-model-name", "cred-0123456789abcdef"])  # unnamed, and its name says nothing


def test_a_secret_in_an_engine_environment_value_is_refused():
    for env, said in (
        ({"VLLM_EXTRA": "${VLLM_API_KEY}"}, "engine.env.VLLM_EXTRA refers to the environment variable $VLLM_API_KEY"),
        ({"HF_HUB_OPTS": "token=hf_abcdefghijklmnop"}, "engine.env.HF_HUB_OPTS sets token inside it"),
    ):
        with pytest.raises(config.ExperimentError) as err:
            config.validate({"arms": {"a": {}}, "engine": {"env": env}}, source="x.yaml")
        assert str(err.value).startswith(f"x.yaml: {said}") and "hf_abcdefghijklmnop" not in str(err.value)


# -- redaction: what a server may echo --------------------------------------------------------------------------


def json_text(s: str) -> str:
    """`s` with JSON's escapes resolved wherever they stand, again and again (JSON inside a JSON string); a
    surrogate pair becomes its character."""
    for _ in range(3):
        s = re.sub(r'\\(["\\/])', r"\1", s)
        s = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s)
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def readings(text: str) -> list[str]:
    """`text` as each decoder a reader may apply would read it."""
    return [
        text,
        json_text(text),
        unquote(text),
        unquote_plus(text),
        html.unescape(text),
        *(bytes.fromhex(h).decode(errors="replace") for h in re.findall(r"(?:[0-9a-fA-F]{2}){12,}", text)),
        re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text),
    ]


def holds(text: str, key: str = KEY) -> bool:
    return any(key in r for r in readings(text))


HALF = "".join(rf"\u{ord(c):04X}" if i % 2 else c for i, c in enumerate(KEY))  # every other character, upper-case hex
ECHOES = {
    "json_every_char": f'{{"error": "invalid key {KEY_U}"}}',
    "json_every_char_upper_hex": KEY_U.upper().replace(r"\U", r"\u"),
    "json_mixed": f"Bearer {HALF}",
    "json_in_json": KEY_U.replace("\\", "\\\\"),  # escaped again: JSON inside a JSON string
    "percent_every_byte_lower": "".join(f"%{b:02x}" for b in KEY.encode()),
    "percent_mixed": "sk%2dbracket-t%65st-7f3a9c1e5b",
    "hex": f"key=0x{KEY_HEX}",
    "hex_upper": KEY_HEX.upper(),
    "backslash_x": "".join(f"\\x{b:02x}" for b in KEY.encode()),
    "html_decimal": "".join(f"&#{ord(c)};" for c in KEY),
    "html_hex_mixed": "sk-bracket-&#x74;est-7f3a9c1e5b",
}


@pytest.mark.parametrize("name", sorted(ECHOES))
def test_a_key_echoed_escaped_or_encoded_is_masked(name):
    text = ECHOES[name]
    assert holds(text), name  # the echo really carries the key
    secrets.register(KEY)
    out = secrets.redact(text)
    assert "***" in out and not holds(out), (name, out)


def test_base64_with_escaped_slashes_is_masked():
    """A key whose base64 holds `/`, echoed by a JSON writer that escapes every slash (PHP's json_encode)."""
    key2 = "k??k??k??k??"  # 6b 3f 3f: 011010 110011 111100 111111, base64 az8/ each
    secrets.register(key2)
    echoed = json.dumps(base64.b64encode(key2.encode()).decode()).replace("/", "\\/")
    assert echoed == '"az8\\/az8\\/az8\\/az8\\/"' and base64.b64decode(json.loads(echoed)).decode() == key2
    assert secrets.redact(echoed) == '"***"'


def test_a_key_beyond_the_basic_plane_is_masked_as_json_writes_it():
    key = "key-\U0001f511-0123456789"
    secrets.register(key)
    escaped = json.dumps(key)[1:-1]  # ensure_ascii: the emoji as a surrogate pair
    assert escaped == "key-\\ud83d\\udd11-0123456789"
    assert secrets.redact(escaped) == "***" and secrets.redact(escaped.replace("d83d\\udd11", "D83D\\uDD11")) == "***"


def test_escaped_forms_change_no_measured_value():
    secrets.register(KEY)
    text = r"caf\u00e9 \u0073k and %73k, 0x736b2d, &#115;k: parts of a key are not the key"
    assert secrets.redact(text) == text
    rec = {"output_text": KEY_U[:-6], "arm": "baseline", "error": None}  # one character short
    assert secrets.redact_obj(rec) == rec


def test_known_forms_include_the_all_escaped_ones_for_the_log_watchdog():
    """The server log's last redaction runs in another process from secrets.known() (literal forms only)."""
    secrets.register(KEY)
    assert {KEY_U, KEY_HEX, KEY_HEX.upper(), "".join(f"%{b:02x}" for b in KEY.encode())} <= secrets.known()


def test_redact_file_masks_an_escaped_echo_in_place(tmp_path):
    secrets.register(KEY)
    log = tmp_path / "server.log"
    log.write_text(f"INFO rejected Authorization: Bearer {HALF}\n")
    assert secrets.redact_file(log) is True
    assert log.read_text() == "INFO rejected Authorization: Bearer ***\n"
    assert secrets.redact_file(log) is False


ESCAPES = [
    lambda c: c,
    lambda c: f"\\u{ord(c):04x}",
    lambda c: f"\\u{ord(c):04X}",
    lambda c: "".join(f"%{b:02X}" for b in c.encode()),
    lambda c: "".join(f"%{b:02x}" for b in c.encode()),
    lambda c: f"&#{ord(c)};",
    lambda c: f"&#x{ord(c):x};",
]


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=40),
    picks=st.lists(st.integers(0, len(ESCAPES) - 1), min_size=40, max_size=40),
    prefix=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=10),
)
def test_property_a_key_with_any_mix_of_escaped_characters_is_masked(key, picks, prefix):
    secrets.forget()
    secrets.register(key)
    echoed = "".join(ESCAPES[p](c) for p, c in zip(picks, key))
    out = secrets.redact(prefix + echoed)
    assert "***" in out and key not in out
    for reader in (json_text, unquote, html.unescape):  # whoever can read the key back from the echo, cannot from out
        if key in reader(prefix + echoed):
            assert key not in reader(out), (reader, out)
    secrets.forget()


# -- a raw record written through the real client and records path ---------------------------------------------


class EchoHandler(BaseHTTPRequestHandler):
    """/v1/completions: the first request gets HTTP 500 whose body quotes the Authorization header with every
    character of the key \\u-escaped; the second streams a completion whose text quotes it escaped again."""

    protocol_version = "HTTP/1.0"
    count = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        escaped = "".join(f"\\u{ord(c):04x}" for c in key)
        type(self).count += 1
        if type(self).count == 1:
            body = ('{"error": {"message": "invalid credentials", "authorization": "Bearer ' + escaped + '"}}').encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        text = "you sent " + escaped.replace("\\", "\\\\")  # in the event's JSON: the text holds \u0073...
        for event in (
            {"choices": [{"index": 0, "text": text, "finish_reason": None}]},
            {"choices": [{"index": 0, "text": " ok", "finish_reason": "length"}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
        ):
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.mark.integration
def test_a_raw_record_of_an_escaped_echo_holds_no_form_of_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("BRACKET_TEST_API_KEY", KEY)
    exp = config.validate(
        {
            "engine": {"kind": "vllm", "embedded": False, "model": "/m", "api_key_env": "BRACKET_TEST_API_KEY"},
            "arms": {"a": {}},
            "request": {"max_tokens": 2, "timeout_s": 10},
        }
    )
    adapter = engines.get("vllm")
    creds = session.credentials(exp, adapter)  # registers the key, as a block does
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    raw = tmp_path / "raw" / "block-0.jsonl"
    try:
        with httpx.Client(headers=creds.headers) as http, records.RecordWriter(raw) as writer:
            for run in range(2):
                measured = adapter.measure(http, base, "m", "hello", exp.request, 0, exp.arms["a"])
                writer.append(records.new_record(arm="a", run=run, **measured.measurement.fields()))
    finally:
        server.shutdown()
        server.server_close()
    recs = records.read([raw])
    assert recs[0]["error"] is not None and "***" in (recs[0]["raw_response"] or "") + recs[0]["error"]
    assert recs[1]["error"] is None and recs[1]["output_text"].startswith("you sent ***")
    text = raw.read_text()
    assert not holds(text)
    for rec in recs:
        for value in rec.values():
            assert not (isinstance(value, str) and holds(value)), value


def test_the_watchdogs_redaction_of_a_dead_clients_server_log_catches_mixed_escapes(tmp_path):
    """The watchdog (its own process, importing nothing of bracket until the server is down) redacts the log of a
    server whose client was killed: the literal forms the client sent, then the package's whole redaction."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    key = "sk-watchdog-0123456789abcdef"
    mixed = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(key))  # every other character escaped
    log = tmp_path / "server.log"
    log.write_text(f"literal {key}\nmixed {mixed}\n")
    wire = Path(__file__).resolve().parents[1] / "workflow" / "bracket" / "wire"
    code = f"import watchdog; watchdog.redact_log({str(log)!r}, [{key.encode()!r}])"
    env = dict(os.environ, PYTHONPATH=str(wire))  # the watchdog alone, as the client starts it
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert log.read_text() == "literal ***\nmixed ***\n"
