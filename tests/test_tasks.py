"""Task files and answer extractors (bracket.experiment.tasks): the rules as stated, bad lines refused by line."""

from __future__ import annotations

import json
import time

import pytest
from bracket.experiment import tasks
from bracket.experiment.tasks import Extractor, TaskError, extract, extract_gsm8k, is_correct, load, score


@pytest.mark.parametrize(
    "output, expected",
    [
        ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
        ("#### 1,234.50", "1234.5"),
        ("#### $1,000", "1000"),
        ("The answer is 72.0", "72"),  # no mark: the last number
        ("#### -0", "0"),
        ("#### +5", "5"),
        ("x = 007.", "7"),
        ("3-4 days", "4"),  # a minus after a digit is no sign
        ("-5 apples", "-5"),
        ("1,2,3", "3"),  # commas only between groups of three
        ("#### 12\nlater text 99", "12"),  # the number after the last mark wins over later numbers
        ("#### 5 then #### 6", "6"),
        ("#### foo 12", "12"),  # no number right after the mark: the last number
        ("no number here", None),
        ("٧٢", None),  # only ASCII digits are numbers
        ("", None),
    ],
)
def test_gsm8k_rule(output, expected):
    assert extract_gsm8k(output) == expected


def test_gsm8k_correct_against_a_solution_or_a_number():
    solution = "Weng earns 12/60 = $0.2 per minute.\n#### 10"
    assert is_correct("So she earned $10.00\n#### 10.00", solution, "gsm8k")
    assert is_correct("#### 10", "10", "gsm8k")
    assert not is_correct("#### 100", "10", "gsm8k")
    assert not is_correct(None, "10", "gsm8k")


@pytest.mark.parametrize(
    "output, answer, extractor, case_sensitive, correct",
    [
        ("  Paris \n", "Paris", "exact", True, True),
        ("paris", "Paris", "exact", True, False),
        ("paris", "Paris", "exact", False, True),
        ("The capital is Paris.", "Paris", "exact", True, False),
        ("The capital is Paris.", "Paris", "contains", True, True),
        ("The capital is PARIS.", "Paris", "contains", True, False),
        ("The capital is PARIS.", "Paris", "contains", False, True),
        ("Cafe\u0301", "Café", "exact", True, True),  # NFC: a combining accent equals the composed letter
        ("", "Paris", "contains", True, False),
    ],
)
def test_exact_and_contains(output, answer, extractor, case_sensitive, correct):
    assert is_correct(output, answer, extractor, case_sensitive) is correct


def test_hostile_outputs_are_read_in_bounded_linear_time():
    long_digits = "9" * 5_000_000
    commas = "1," * 1_000_000
    t0 = time.process_time()
    assert extract_gsm8k(long_digits) is None  # a number longer than any answer is none
    assert extract_gsm8k(commas + " #### 7") == "7"
    assert extract_gsm8k("#" * 1_000_000) is None
    assert extract("x" * 3_000_000 + "Paris", "exact") == "x" * (tasks.MAX_OUTPUT_CHARS - 5) + "Paris"
    assert time.process_time() - t0 < 20  # generous: linear patterns take well under a second
    assert extract(b"#### 7", "gsm8k") is None  # not text: nothing read
    with pytest.raises(ValueError):
        extract("7", "regex")


def _write(tmp_path, lines, name="t.jsonl") -> str:
    p = tmp_path / name
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return str(p)


def test_load_reads_items_ids_and_numbers(tmp_path):
    path = _write(
        tmp_path,
        [
            {"id": "a", "prompt": "2+2?", "answer": "#### 4"},
            "",
            {"prompt": "3+3?", "answer": 6},
            {"id": 7, "prompt": "Capital of France?", "answer": "Paris"},
        ],
    )
    items = load(path)
    assert [(i.id, i.answer, i.line) for i in items] == [("a", "#### 4", 1), ("3", "6", 3), ("7", "Paris", 4)]
    scored = score(items[:2], {"a": "#### 4", "3": "It is 5"}, Extractor.GSM8K)
    assert [(s.id, s.extracted, s.expected, s.correct) for s in scored] == [
        ("a", "4", "4", True),
        ("3", "5", "6", False),
    ]


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", ["t.jsonl:2", "not JSON"]),
        ("[1, 2]", ["t.jsonl:2", "must be an object"]),
        ('{"prompt": "q"}', ["t.jsonl:2", 'no "answer"']),
        ('{"question": "q", "answer": "1"}', ["t.jsonl:2", "'question'", 'rename it to "prompt"']),
        ('{"prompt": "q", "answer": "1", "extra": 1}', ["t.jsonl:2", "'extra'", "remove it"]),
        ('{"prompt": "   ", "answer": "1"}', ["t.jsonl:2", "non-empty"]),
        ('{"prompt": 5, "answer": "1"}', ["t.jsonl:2", "non-empty text"]),
        ('{"prompt": "q", "answer": ""}', ["t.jsonl:2", "empty"]),
        ('{"prompt": "q", "answer": true}', ["t.jsonl:2", "must be text"]),
        ('{"prompt": "q", "answer": null}', ["t.jsonl:2", "must be text"]),
        ('{"id": "x", "prompt": "q", "answer": "1"}', ["t.jsonl:2", "repeats line 1"]),
        ('{"prompt": "q", "answer": "seven"}', ["t.jsonl:2", "holds no number", "exact or contains"]),
        ("[" * 100_000 + "]" * 100_000, ["t.jsonl:2", "not JSON"]),
    ],
)
def test_bad_lines_name_the_line_and_the_fix(tmp_path, line, words):
    path = _write(tmp_path, [{"id": "x", "prompt": "q", "answer": "1"}, line])
    with pytest.raises(TaskError) as err:
        load(path, "gsm8k")
    for w in words:
        assert w in str(err.value)


def test_bounds_on_the_file(tmp_path, monkeypatch):
    with pytest.raises(TaskError, match="no such task file"):
        load(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(TaskError, match="no items"):
        load(empty)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"prompt": "caf\xe9", "answer": "1"}\n')
    with pytest.raises(TaskError, match="not UTF-8"):
        load(latin)
    path = _write(tmp_path, [{"prompt": f"q{i}", "answer": "1"} for i in range(5)])
    monkeypatch.setattr(tasks, "MAX_ITEMS", 4)
    with pytest.raises(TaskError, match=r":5: more than 4 items"):
        load(path)
    monkeypatch.setattr(tasks, "MAX_FILE_BYTES", 100)
    with pytest.raises(TaskError, match="more than the 100"):
        load(path)
    monkeypatch.setattr(tasks, "MAX_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(tasks, "MAX_PROMPT_CHARS", 2)
    with pytest.raises(TaskError, match=r':1: "prompt" is 3 characters, more than the 2 read'):
        load(_write(tmp_path, [{"prompt": "qqq", "answer": "1"}], "long.jsonl"))
