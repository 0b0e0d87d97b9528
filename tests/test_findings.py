"""Findings are data (bracket.stats.findings) and become text in one place (bracket.article.findings)."""

from __future__ import annotations

import ast
import dataclasses
import json
import typing
from pathlib import Path

import pandas as pd
import pytest
from bracket.article.findings import MESSAGES, group, message, text, where
from bracket.experiment import config
from bracket.stats import findings as F
from bracket.stats.analyze import analyze
from bracket.stats.contract import current
from bracket.stats.findings import Finding, FindingKind

K = FindingKind
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = {
    int: 2,
    float: 0.5,
    str: "x",
    bool: True,
    tuple[float, ...]: (1.5, 2.5),
    dict: {"why": "thin", "blocks": 4, "df": 1.0},  # an undetermined comparison's reason (bracket.stats.reasons)
}


def _sample(cls) -> object:
    """A payload of `cls` with a plain value of each field's type (the first of an Optional's)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        args = [a for a in typing.get_args(t) if a is not type(None)]
        values[f.name] = SAMPLE[t] if t in SAMPLE else SAMPLE[args[0]]
    return cls(**values)


@pytest.mark.parametrize("kind", list(FindingKind), ids=lambda k: k.value)
def test_every_kind_has_a_payload_a_sentence_and_survives_json(kind):
    f = Finding(kind, _sample(F.PAYLOADS[kind]), arm="a", vs="b", workload="w")
    back = Finding.of(json.loads(json.dumps(f.record())))
    assert back == f and back.record() == f.record()
    assert isinstance(message(f), str) and message(f) and message(back) == message(f)
    assert text(f) == f"a vs b / w: {message(f)}"


def test_the_set_is_closed_and_the_presenter_covers_it():
    assert set(F.PAYLOADS) == set(FindingKind) == set(MESSAGES)


def test_a_payload_of_the_wrong_type_an_unknown_kind_or_field_is_refused_with_the_fix():
    with pytest.raises(TypeError, match="'few runs' finding carries a FewRuns payload, not Nothing"):
        Finding(K.FEW_RUNS)
    with pytest.raises(ValueError, match="unknown finding kind 'cell'.*run its analyze step again"):
        Finding.of({"kind": "cell", "message": "only 3 valid runs"})
    with pytest.raises(ValueError, match=r"payload has fields \['m'\], expected \['n'\]"):
        Finding.of({"kind": "few runs", "payload": {"m": 3}})


def test_where_names_the_cell_the_comparison_or_the_host():
    assert where(Finding(K.POOLED)) is None
    assert where(Finding(K.POOLED, arm="x", workload="code")) == "x / code"
    assert where(Finding(K.POOLED, arm="x", vs="a", workload="code")) == "x vs a / code"
    assert (
        where(Finding(K.POOLED, host="box-2", vs="box-1", arm="base", workload="code"))
        == "box-2 vs box-1 / base / code"
    )


def test_sentences_are_worked_from_the_payload():
    # 4 of 12 runs at 38.0 against 8 at 40.0 (+5.3 %): a cell's two modes, as the article has said them
    two = Finding(K.TWO_MODES, F.TwoModes("within blocks", 8, 38.0, 4, 40.0))
    assert message(two).startswith("two modes (within blocks): 8 runs near 38 and 4 near 40 (+5.3%); the median")
    # a comparison's: share 4 / 12 = 33 %, 67 % low
    cm = F.ComparisonModes("candidate", "within blocks", 8, 38.0, 4, 40.0, True)
    said = message(Finding(K.COMPARISON_MODES, cm))
    assert said.startswith(
        "two modes in the candidate (within blocks): 8 runs near 38 (67%) and 4 near 40 (33%), 5.3% apart"
    )
    assert "block means of log rate" in said
    assert message(Finding(K.OUTLIERS, F.Outliers((12.345678,), 3.5))).startswith(
        "1 run is an outlier (modified z > 3.5; kept): 12.35."
    )
    assert message(Finding(K.INVALID, F.Invalid(1, "error", "sweep"))) == (
        "1 run invalid (error), left out of statistics: requests failed: each error is in runs.csv (column error), "
        "the servers' logs in logs/sweep/server/."
    )
    assert message(Finding(K.INVALID, F.Invalid(3, "no positive value", "s"))) == (
        "3 runs invalid (no positive value), left out of statistics."
    )


def test_identical_messages_are_merged_with_where_each_applies():
    fs = [
        Finding(K.FEW_RUNS, F.FewRuns(3), arm="a", workload="code").record(),
        Finding(K.FEW_RUNS, F.FewRuns(3), arm="b", workload="chat").record(),
        Finding(K.FEW_RUNS, F.FewRuns(4), arm="b", workload="code").record(),
        Finding(K.SEQUENTIAL).record(),
    ]
    g = group(fs)
    assert len(g) == 3 and g[0].startswith("only 3 valid runs") and g[0].endswith("(a / code, b / chat)")
    assert g[1].startswith("only 4 valid runs") and g[1].endswith("(b / code)")
    assert (
        g[2]
        == "design.kind is sequential: every arm ran in one stretch of time, so drift and arm are confounded; use abab or abba."
    )


def test_a_version_1_file_keeps_its_sentences_and_loses_nothing():
    old = {
        "reference": "a",
        "findings": [
            {"kind": "cell", "message": "only 3 valid runs: ...", "arm": "a", "vs": None, "workload": "w", "host": None}
        ],
        "warnings": ["a / w: only 3 valid runs: ..."],
        "best": {"w": {"arm": "b", "verdict": "undetermined"}},
    }
    new = current(old)
    assert new["stats_version"] == 2 and "warnings" not in new and "warnings" in old
    (f,) = new["findings"]
    assert f["kind"] == "recorded" and text(f) == "a / w: only 3 valid runs: ..."
    # the recommendation an old file lacks: the fastest was not shown faster, so keep the reference
    assert (new["best"]["w"]["use"], new["best"]["w"]["use_because"]) == ("a", "not shown")
    older = current({"reference": "a", "warnings": ["the first sentence"]})
    assert [text(f) for f in older["findings"]] == ["the first sentence"]


def _rows(n_a: int, n_b: int, kind: str = "abab") -> pd.DataFrame:
    rows = []
    for b, arm in enumerate(["a", "b", "a", "b"]):
        for r in range(n_a if arm == "a" else n_b):
            rows.append(
                {"arm": arm, "workload": "w", "block": b, "round": b // 2 + 1, "run": r, "warmup": False, "invalid": ""}
            )
            rows[-1]["decode_tok_s"] = (100.0 if arm == "a" else 110.0) * (1 + 0.01 * r)
    return pd.DataFrame(rows)


def test_analyze_writes_kinds_and_numbers_worked_by_hand():
    """Two runs per block, two blocks per arm: 4 valid runs per cell (< 5), and a sequential design."""
    experiment = config.validate(
        {
            "arms": {"a": {}, "b": {}},
            "reference": "a",
            "workloads": {"w": {"prompts": "experiments/prompts/code.jsonl"}},
            "design": {"kind": "sequential"},
        },
        source="test",
    )
    out = analyze(_rows(2, 2), experiment).data()
    kinds = [(f["kind"], f["arm"], f["workload"]) for f in out["findings"]]
    assert (
        ("few runs", "a", "w") in kinds
        and ("few runs", "b", "w") in kinds
        and ("sequential design", None, None) in kinds
    )
    few = [f for f in out["findings"] if f["kind"] == "few runs"]
    assert [f["payload"] for f in few] == [{"n": 4}, {"n": 4}]
    assert "warnings" not in out and json.dumps(out, allow_nan=False)


def test_no_sentence_is_made_in_stats():
    """No module of bracket.stats builds a Finding from a string: each carries a payload of numbers."""
    for path in sorted((ROOT / "workflow" / "bracket" / "stats").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Finding":
                assert not any(isinstance(a, (ast.Constant, ast.JoinedStr)) for a in node.args[1:]), (path, node.lineno)
