"""llama-benchy's coherence check (llama_benchy/client.py run_coherence_test): its body, its verdict on the
answers it reads, a server that cannot be asked, and the cell and article that name a failure."""

import json

import pytest
from bracket import article
from bracket.arena import coherence as arena_coherence
from bracket.arena import readings as arena_stats
from bracket.article.elements import Para
from bracket.experiment import config
from test_arena import user
from test_engines import Recorded


def answer(content=None, reasoning=None, key="reasoning"):
    msg = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg[key] = reasoning
    return {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    "response,ok",
    [
        (answer("Paris"), True),
        (answer("paris."), True),  # lower-cased before the search
        (answer("The capital is PARIS, of course"), True),
        (answer("", "The user asks about France... Paris"), True),  # a thinking model's reasoning counts
        (answer(None, "Paris", key="reasoning_content"), True),
        (answer("London"), False),
        (answer("def paragraph(self):"), False),  # 'par' alone is not the answer
        (answer(None), False),
        ({"choices": []}, False),
        ({"error": {"message": "model not found"}}, False),
        ([], False),
        ({"choices": ["Paris"]}, False),  # a malformed choice is no message
    ],
)
def test_verdict_reads_answers_as_llama_benchy_does(response, ok):
    assert arena_coherence.verdict(response)[0] is ok


def test_verdict_keeps_the_answer_and_says_why():
    assert arena_coherence.verdict(answer("Lyon", "thinking"))[1:] == ("Lyonthinking", "expected 'paris' in the answer")
    assert arena_coherence.verdict({"choices": []})[2] == "no choices in the response"


def test_check_sends_llama_benchys_body_and_records_the_answer():
    rec = Recorded({"POST /v1/chat/completions": (200, json.dumps(answer("Paris")).encode())})
    c = arena_coherence.check(rec.http, "http://v", "bracket-model")
    assert rec.sent("/v1/chat/completions") == {
        "model": "bracket-model",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "What is the capital of France? Please reply with one word only"}],
    }
    assert (c["coherent"], c["output_text"], c["error"]) == (True, "Paris", None)


def test_a_wrong_answer_fails_and_a_hostile_one_is_kept_bounded():
    hostile = "[red]<script>alert(1)</script>" + "x" * 100_000
    rec = Recorded({"POST /v1/chat/completions": (200, json.dumps(answer(hostile)).encode())})
    c = arena_coherence.check(rec.http, "http://v", "m")
    assert c["coherent"] is False and c["error"] is None
    assert len(c["output_text"]) == arena_coherence.ANSWER_CHARS and c["output_text"].startswith("[red]<script>")


@pytest.mark.parametrize(
    "route,status,content",
    [
        ("POST /v1/other", 200, b"{}"),  # no chat route: 404
        ("POST /v1/chat/completions", 500, b"boom"),
        ("POST /v1/chat/completions", 200, b"not json"),
    ],
)
def test_a_server_that_cannot_be_asked_is_not_checked_and_says_why(route, status, content):
    c = arena_coherence.check(Recorded({route: (status, content)}).http, "http://v", "m")
    assert c["coherent"] is None and c["error"].startswith("coherence check:")


def control(server, ok, text):
    return {"control": "coherence", "server_id": server, "coherent": ok, "output_text": text, "error": None}


def test_a_cell_takes_the_verdicts_of_its_own_servers():
    checks = [control("s1", True, "Paris"), control("s2", False, "import os"), control("s3", False, "other cell")]
    c = arena_coherence.of_cell(checks, {"s1", "s2"})
    assert (c["status"], c["checked"], c["failed"], c["answers"]) == ("failed", 2, 1, ["import os"])
    assert arena_coherence.of_cell(checks, {"s1"})["status"] == "passed"
    assert arena_coherence.of_cell(checks, {"s4"})["status"] == "not checked"
    assert arena_coherence.of_cell([control("s1", None, None)], {"s1"})["status"] == "not checked"


def test_the_cell_and_the_article_name_a_failed_check():
    cfg = config.validate(
        {
            "workloads": {"arena": {"kind": "arena", "depth": 1024, "prompt_tokens": 128, "prompts": "p"}},
            "arms": {"b": {}},
            "analysis": {"confidence": 0.95, "bootstrap_resamples": 200, "seed": 1, "spread_warning": 0.15},
        }
    )
    raw = [control("srv", False, "<b>import</b> os")]
    for run, tg in enumerate([100.0, 110.0, 120.0]):
        for ttft in (0.5, 0.6):
            raw.append(
                user(
                    10.0 * run,
                    ttft,
                    128,
                    tg,
                    arm="b",
                    workload="arena",
                    block=0,
                    run=run,
                    warmup=False,
                    cached_tokens=0,
                    finish_reason="length",
                    max_tokens=128,
                    wall_s=2.0,
                    prompt_tokens=1152,
                    server_id="srv",
                )
            )
    (cell,) = arena_stats.summarize(raw, cfg)["cells"]
    assert len(cell["runs"]) == 3  # the control record is no run
    assert cell["coherence"]["status"] == "failed" and cell["coherence"]["answers"] == ["<b>import</b> os"]
    assert [f["kind"] for f in cell["findings"]] == ["coherence"]
    section = article.section_arena(None, article.Controls([], None, None, {"cells": [cell]}))
    warn = [e for e in section.items if isinstance(e, Para) and e.kind == "warn"]
    assert len(warn) == 1 and "b / arena" in warn[0].text and "<b>import</b> os" in warn[0].text
    assert "&lt;b&gt;import" in warn[0].html()  # the server's words escaped, never markup
    # a passing check is not named
    raw[0] = control("srv", True, "Paris")
    (cell,) = arena_stats.summarize(raw, cfg)["cells"]
    section = article.section_arena(None, article.Controls([], None, None, {"cells": [cell]}))
    assert cell["coherence"]["status"] == "passed" and not [
        e for e in section.items if isinstance(e, Para) and e.kind == "warn"
    ]
