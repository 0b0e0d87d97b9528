"""Raw records: append-only, a torn last line survives, and the guards flag (never drop) bad runs."""

import json

import pytest
from bracket import records
from bracket.experiment import prompts


def good(**kw):
    rec = records.new_record(
        arm="a",
        block=0,
        position=0,
        round=1,
        run=1,
        warmup=False,
        workload="code",
        started_at=1.0,
        wall_s=0.5,
        completion_tokens=64,
        max_tokens=64,
        cached_tokens=0,
        finish_reason="length",
        decode_tok_s=128.0,
    )
    rec.update(kw)
    return rec


def test_every_contract_field_is_present_and_unknown_is_null():
    rec = records.new_record(arm="a")
    assert set(records.FIELDS) <= set(rec)
    assert rec["acceptance_length"] is None
    with pytest.raises(KeyError):
        records.new_record(tokens_per_event=3)


def test_writer_appends_and_reader_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "block-0.jsonl"
    with records.RecordWriter(path) as w:
        w.append(good(run=1))
        w.append(good(run=2))
    with open(path, "a") as f:
        f.write('{"arm": "a", "run": 3, "wal')  # the process died mid-write
    got = records.read([path])
    assert [r["run"] for r in got] == [1, 2]


def test_a_damaged_middle_line_is_an_error(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(good()) + "\nnot json\n" + json.dumps(good()) + "\n")
    with pytest.raises(ValueError, match="b.jsonl, line 2: not a raw record"):
        records.read([path])


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"cached_tokens": 12}, "cache hit"),
        ({"finish_reason": "stop"}, "early stop (stop)"),
        ({"completion_tokens": 60}, "token count 60 != max_tokens 64"),
        ({"error": "HTTP 500: boom"}, "error"),
        ({"cached_tokens": None}, "cached_tokens unknown"),
    ],
)
def test_guards_flag_runs_and_keep_them(change, reason):
    df = records.tidy([good(run=1), good(run=2, **change)])
    assert len(df) == 2  # flagged, not dropped
    assert df["valid"].tolist() == [True, False]
    assert reason in df.loc[1, "invalid_reason"]


def test_warmups_are_kept_and_marked():
    df = records.tidy([good(run=0, warmup=True), good(run=1)])
    assert df["invalid_reason"].tolist() == ["warmup", ""]
    assert df["valid"].tolist() == [False, True]


def test_a_load_workloads_records_stay_out_of_the_runs_table():
    # a steady load request is no warmup, yet it is no run of the arm: the load statistics read it from the raw records
    steady = good(run=7, workload="busy", kind="load_request", load_phase="steady", level=4.0)
    level = {"kind": "load_level", "arm": "a", "block": 0, "workload": "busy", "level": 4.0, "valid": True}
    control = good(run=None, control="neutrality")
    df = records.tidy([good(run=1), steady, level, control, good(run=2)])
    assert df["run"].tolist() == [1, 2] and df["valid"].tolist() == [True, True]
    assert records.LOAD_KINDS == ("load_request", "load_level")


def test_a_record_holding_unicode_line_separators_reads_back_whole(tmp_path):
    """json.dumps(ensure_ascii=False) leaves U+0085, U+2028 and U+2029 raw: one record is still one line."""
    text = "a\x85b\u2028c\u2029d\ne"
    path = tmp_path / "block-0.jsonl"
    with records.RecordWriter(path) as w:
        w.append(records.new_record(run=0, output_text=text))
        w.append(records.new_record(run=1, output_text="plain"))
    got = records.read([path])
    assert [r["run"] for r in got] == [0, 1] and got[0]["output_text"] == text
    prompts_file = tmp_path / "p.jsonl"
    prompts_file.write_text(json.dumps({"id": "x\u2028y", "prompt": text}, ensure_ascii=False) + "\n")
    assert prompts.load(prompts_file) == [{"id": "x\u2028y", "prompt": text}]
