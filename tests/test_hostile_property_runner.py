"""Property (issue 33): generated names, secrets and server responses, through the real block runner (the
stand-in server over real HTTP, launched by bracket as a block's server) and the article's raw-value and
output sections rendered to HTML and Markdown. Whatever is generated:

- no form of the secret is in any file written (records, provenance, server log, tables, article);
- no file is written outside the experiment's folders (results/NAME, logs/NAME, report/NAME, the locks);
- no value is changed by redaction: names, prompt ids, counts and generated text without the secret come
  back as they went in, and text with it comes back with the secret replaced;
- every run ends in a named state: valid, or invalid with one of records.INVALID_KINDS and a reason; the
  block's provenance says complete;
- server text reaches the article escaped (no tag it sent is a tag in the HTML).
A name the config refuses stops before any file is written, with the name and the rule."""

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from bracket import records, secrets
from bracket.article import raw as raw_section
from bracket.article import render as report
from bracket.article.inputs import Data
from bracket.block import runner
from bracket.experiment import config, design
from bracket.stats import stated
from bracket.stats.results import Stats
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st
from test_hostile_secrets import leaks

from tests.support import faultkit as fk

pytestmark = pytest.mark.integration  # a server process per example

NAME_OK = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,11}", fullmatch=True)
HOSTILE = "./\\\n\r\t\x00\x1b$`'\"<>&|*?%{}~ é名\u202e"
NAMES = st.one_of(
    NAME_OK,
    NAME_OK,
    NAME_OK,
    NAME_OK,
    NAME_OK,
    NAME_OK,
    st.text(st.sampled_from(HOSTILE + "ab"), min_size=1, max_size=10),
)
# a key of printable ASCII, as an Authorization header carries it; 12 characters at least (secrets.MIN_LENGTH),
# with a prefix as API keys have, so that no number a file holds (1.0000000000000002) can read as one
KEYS = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=9, max_size=29).map(lambda t: "sk-" + t)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # what a model may generate
WORDS = [
    "ok",
    "say",
    "no_usage",
    "malformed",
    "http500",
    "http429",
    "http400",
    "truncated",
    "cache_hit",
    "early_stop",
    "short",
    "echo_auth",
    "echo_text",
    "echo_forms",
    "echo_forms_text",
]
RUNS, MAX_TOKENS = 4, 6


def folders(root: Path, exp: str) -> tuple[Path, ...]:
    return root / "results" / exp, root / "logs" / exp, root / "report" / exp, root / "locks"


class _Unanalysed(Data):
    """The article's inputs before any analysis: stats.json states the experiment only, so its typed results hold
    no guards and the raw section checks the runs itself (records.guards)."""

    @property
    def results(self) -> Stats:
        return Stats.model_construct(guards=None)


def article(root: Path, exp: str, cfg: dict, raw: Path) -> tuple[Path, str]:
    """The article's raw values and outputs, rendered as the report rule writes HTML and Markdown; returns
    the folder and the sections' HTML."""
    out = root / "report" / exp
    recs = records.read([raw])
    d = _Unanalysed(
        name=exp,
        runs=records.tidy(recs),
        stats={"experiment": stated.experiment(cfg, exp)},
        schedule=pd.DataFrame(),
        raw=recs,
        corrections=None,
        corrections_path="",
        out_dir=out,
    )
    sections = [s for s in (raw_section.section_outputs(d), raw_section.section_raw(d)) if s is not None]
    for s in sections:
        s.save_tables(out)
    body = "\n".join(s._repr_html_() for s in sections)
    (out / "article.html").write_text(report.page(body, exp))
    (out / "article.md").write_text("\n\n".join(s._repr_markdown_() for s in sections))
    return out, body


# No shrinking: each example starts a server, and a failing example is reported as found.
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    exp=NAME_OK,
    arm=NAMES,
    workload=NAMES,
    key=KEYS,
    ids=st.lists(
        st.text(st.sampled_from(HOSTILE + "abc123"), min_size=1, max_size=12), min_size=1, max_size=3, unique=True
    ),
    script=st.lists(st.sampled_from(WORDS + ["say"] * 5), min_size=1, max_size=RUNS),
    said=TEXT,
    with_key=st.booleans(),
)
def test_property_hostile_input_through_the_runner_and_the_article(
    tmp_path_factory, monkeypatch, exp, arm, workload, key, ids, script, said, with_key
):
    root = tmp_path_factory.mktemp("hostile")
    monkeypatch.chdir(root)
    monkeypatch.setenv("BRACKET_LOCK_DIR", str(root / "locks"))
    monkeypatch.setenv("BRACKET_TEST_API_KEY", key)
    secrets.forget()
    say = said[: len(said) // 2] + (key if with_key else "") + said[len(said) // 2 :]
    assume(key not in said and not any(key in i for i in ids))  # the key only where it is put
    (root / "say.txt").write_text(say, encoding="utf-8", newline="")
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"def f{n}(x):"}) + "\n" for n, i in enumerate(ids)))
    before = {p for p in root.rglob("*")}
    port = fk.free_port()
    try:
        cfg = config.validate(
            {
                "engine": {"port": port, "startup_timeout_s": 30, "api_key_env": "BRACKET_TEST_API_KEY"},
                "arms": {arm: {}},
                "workloads": {workload: {"prompts": str(prompts)}},
                "design": {"rounds": 1, "runs_per_block": RUNS, "warmup_runs": 0, "cooldown_s": 0},
                "request": {"max_tokens": MAX_TOKENS, "timeout_s": 10, "on_error": "continue"},
                "controls": {"neutrality": False, "neutrality_off": "the stand-in answers by request count"},
            },
            source="hostile.yaml",
        )
    except config.ExperimentError as exc:
        bad = [n for kind, n in (("arm", arm), ("workload", workload)) if config.name_problem(kind, n)]
        assert bad and any(f"name {n!r} is not allowed" in str(exc) for n in bad), str(exc)
        assert "^[A-Za-z0-9][A-Za-z0-9_-]*$" in str(exc)
        assert {p for p in root.rglob("*")} == before
        event("a name refused")
        return
    res, logs = root / "results" / exp, root / "logs" / exp
    blocks = design.from_config(cfg)
    argv = fk.fake_argv(
        port, "--api-key-env", "VLLM_API_KEY", "--script", ",".join(script), "--say-file", str(root / "say.txt")
    )
    raw = runner.run_block(
        cfg,
        exp,
        blocks[0],
        len(blocks),
        raw_path=res / "raw" / "block-0.jsonl",
        meta_path=res / "raw" / "block-0.meta.json",
        log_path=logs / "server" / "block-0.log",
        model="unused",
        python=sys.executable,
        root="/",
        argv=argv,
        lock_dir=root / "locks",
    )
    meta = json.loads((res / "raw" / "block-0.meta.json").read_text())
    out, body = article(root, exp, cfg, raw)

    # every run ends in a named state, and the block says it completed
    recs = fk.lines(raw)
    event("through the runner" + (", the key in the generated text" if with_key and "say" in script[:RUNS] else ""))
    assert meta["status"] == "complete" and len(recs) == RUNS
    runs = records.tidy(recs)
    for _, r in runs.iterrows():
        assert r["valid"] or (r["invalid_kind"] in records.INVALID_KINDS and r["invalid_reason"])
    # no value changed by redaction
    forms = secrets.forms(key)
    for n, r in enumerate(recs):
        word = script[min(n, len(script) - 1)]
        assert (r["experiment"], r["arm"], r["workload"], r["run"]) == (exp, arm, workload, n)
        assert r["prompt_id"] == ids[n % len(ids)] or any(f in ids[n % len(ids)] for f in forms)
        if word in ("ok", "say", "cache_hit", "short", "early_stop"):
            expected = {"short": MAX_TOKENS - 1, "early_stop": MAX_TOKENS // 2}.get(word, MAX_TOKENS)
            assert r["error"] is None and r["completion_tokens"] == expected
            assert r["finish_reason"] == ("stop" if word == "early_stop" else "length")
        if word == "say":
            text = say + " t" * (MAX_TOKENS - 1)
            if not any(f in text for f in forms):
                assert r["output_text"] == text  # untouched, however hostile
            else:
                assert "***" in r["output_text"] and leaks(r["output_text"], key) == []
    # no form of the secret in any file; no file outside the experiment's folders
    written = [p for p in root.rglob("*") if p.is_file() and p not in before]
    assert {
        str(p): leaks(p.read_text(errors="replace"), key) for p in written if leaks(p.read_text(errors="replace"), key)
    } == {}
    assert all(any(p.is_relative_to(f) for f in folders(root, exp)) for p in written), [
        str(p) for p in written if not any(p.is_relative_to(f) for f in folders(root, exp))
    ]
    assert (out / "article.html").is_file() and (out / "tables" / f"raw_{workload}.csv").is_file()
    # the server's text reaches the article as text: no tag it sent survives as a tag
    for tag in set(re.findall(r"<[A-Za-z/][^<>]*>", say)):
        assert tag not in body
    secrets.forget()
