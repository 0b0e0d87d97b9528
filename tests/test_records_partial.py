"""Partial truths in the raw records (issue 40): a record a crash cut short at the end of a block's file is left
out, counted and named, from `collect` through stats.json to the article; a damaged line anywhere else stops
`collect` with one message naming the file, the line and the fix; a run whose token count its stream could not
have carried (the client's count_check) is invalid with its reason. The files are written here by hand, or are
the committed report fixture's blocks cut as a crash cuts them; the collect rule's own script runs on them."""

import json
import runpy
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from bracket import article, records
from bracket.article.findings import group
from bracket.experiment import config
from bracket.stats.analyze import analyze
from bracket.wire import client

ROOT = Path(__file__).resolve().parents[1]
COLLECT = ROOT / "workflow" / "scripts" / "collect.py"
FIXTURE = ROOT / "tests" / "data" / "report" / "probe"


def rec(**kw) -> dict:
    r = records.new_record(
        experiment="x",
        arm="a",
        block=0,
        position=0,
        round=1,
        run=0,
        warmup=False,
        workload="code",
        started_at=1.0,
        wall_s=0.5,
        completion_tokens=8,
        max_tokens=8,
        cached_tokens=0,
        finish_reason="length",
        decode_tok_s=16.0,
        stream_events=8,
    )
    r.update(kw)
    return r


def lines(*recs) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in recs)


# --- records.read: a torn last line counted, a damaged one named -------------------------------------------------


def test_a_torn_last_record_is_left_out_and_counted_with_its_line_and_bytes(tmp_path):
    path = tmp_path / "block-0.jsonl"
    cut = b'{"arm": "a", "run": 2, "wal'  # 27 bytes: the write a crash stopped
    path.write_bytes(lines(rec(run=0), rec(run=1)) + cut)
    torn = []
    got = records.read([path], torn=torn)
    assert [r["run"] for r in got] == [0, 1]
    assert torn == [{"file": str(path), "line": 3, "bytes": 27}]
    assert records.read([path]) == got  # without the list: the same records, as before


def test_a_record_cut_inside_a_character_is_torn_too(tmp_path):
    """Records keep the server's text as sent (ensure_ascii=False): a write cut short may end between the bytes of
    one UTF-8 character, which must not make the whole file unreadable."""
    whole = lines(rec(run=0, output_text="café"))
    last = json.dumps(rec(run=1, output_text="naïve ☃")).replace("\\u00ef", "ï").replace("\\u2603", "☃").encode()
    cut = last[: last.index("☃".encode()) + 1]  # one byte of the snowman's three
    path = tmp_path / "block-0.jsonl"
    path.write_bytes(whole + cut)
    torn = []
    got = records.read([path], torn=torn)
    assert [r["output_text"] for r in got] == ["café"]
    assert torn == [{"file": str(path), "line": 2, "bytes": len(cut)}]


def test_a_whole_last_record_without_its_newline_is_read(tmp_path):
    path = tmp_path / "block-0.jsonl"
    path.write_bytes(lines(rec(run=0)) + json.dumps(rec(run=1)).encode())
    torn = []
    assert [r["run"] for r in records.read([path], torn=torn)] == [0, 1] and torn == []


@pytest.mark.parametrize(
    "bad, shown",
    [
        (b"not json", "'not json'"),
        (b'{"arm": "a", "run": 1, "wal', '\'{"arm": "a", "run": 1, "wal\''),  # cut, but a newline follows
        (b"[1, 2]", "'[1, 2]'"),  # JSON, not a record
        (b"\xff\xfe garbage", "'\ufffd\ufffd garbage'"),  # not UTF-8
    ],
)
def test_a_damaged_line_before_the_last_names_the_file_the_line_and_the_fix(tmp_path, bad, shown):
    path = tmp_path / "block-4.jsonl"
    path.write_bytes(lines(rec(run=0)) + bad + b"\n" + lines(rec(run=1)))
    with pytest.raises(records.DamagedRecords) as err:
        records.read([path], torn=[])
    assert str(err.value) == (
        f"{path}, line 2: not a raw record ({shown}), and not the last line, where a crash would leave a record "
        f"cut short: the file was changed after it was written. Its records cannot be guessed: restore it from a "
        f"copy; or, to measure its block again, move it and its .meta.json out of {tmp_path} (keep them to look "
        f"into) and run the workflow again."
    )


# --- the collect rule's script on a block's files -----------------------------------------------------------------


def _collect(results: Path, blocks: list[Path]) -> SimpleNamespace:
    """Run workflow/scripts/collect.py as Snakemake runs it (its `snakemake` object: inputs, outputs, log)."""
    out = SimpleNamespace(
        runs=str(results / "runs.csv"),
        attempts=str(results / "failed_attempts.json"),
        neutrality=str(results / "neutrality.csv"),
        torn=str(results / "torn_records.json"),
    )
    smk = SimpleNamespace(
        input=SimpleNamespace(blocks=[str(b) for b in blocks], schedule=str(results / "schedule.csv")),
        output=out,
        log=[str(results / "collect.log")],
    )
    runpy.run_path(str(COLLECT), init_globals={"snakemake": smk}, run_name="__main__")
    return out


def test_collect_stops_at_a_damaged_line_with_one_message_and_no_traceback(tmp_path, capsys):
    raw = tmp_path / "results" / "x" / "raw"
    raw.mkdir(parents=True)
    (raw / "block-0.jsonl").write_bytes(lines(rec(run=0), rec(run=1)))
    (raw / "block-1.jsonl").write_bytes(lines(rec(block=1, run=0)) + b"garbage\n" + lines(rec(block=1, run=1)))
    with pytest.raises(SystemExit) as stop:
        _collect(raw.parent, sorted(raw.glob("block-*.jsonl")))
    assert stop.value.code == 1
    err = capsys.readouterr().err
    log = (raw.parent / "collect.log").read_text()
    said = f"{raw / 'block-1.jsonl'}, line 2: not a raw record ('garbage'), and not the last line"
    assert said in err and said in log
    assert "Traceback" not in err and "Traceback" not in log
    assert not (raw.parent / "runs.csv").exists()  # nothing half-collected


def test_a_torn_record_reaches_stats_json_and_the_article_names_it(tmp_path):
    """The report fixture's three blocks, the last one's final record cut where a crash would cut it: collect
    leaves it out and names it, the analysis counts it and raises its finding, and the article says so."""
    results = tmp_path / "results" / "probe"
    shutil.copytree(FIXTURE / "raw", results / "raw")
    last = results / "raw" / "block-2.jsonl"
    whole = last.read_bytes()
    keep = whole.rstrip(b"\n").rfind(b"\n") + 1  # the start of the last record (line 12)
    last.write_bytes(whole[: keep + 100])  # its first 100 bytes, no newline
    out = _collect(results, [results / "raw" / f"block-{k}.jsonl" for k in range(3)])

    assert json.loads(Path(out.torn).read_text()) == [{"file": "raw/block-2.jsonl", "line": 12, "bytes": 100}]
    runs = pd.read_csv(out.runs)
    assert len(runs) == 35  # 3 blocks x 12 records, less the one cut short
    assert (
        "raw/block-2.jsonl, line 12: a record cut short (100 bytes) is left out"
        in (results / "collect.log").read_text()
    )

    stats = analyze(
        runs,
        config.load(FIXTURE / "probe.yaml", measured=True),
        json.loads((FIXTURE / "ceiling.json").read_text()),
        weights=json.loads((FIXTURE / "weights.json").read_text()),
        schedule=pd.read_csv(FIXTURE / "schedule.csv"),
        metas=[json.loads(p.read_text()) for p in sorted((FIXTURE / "raw").glob("block-*.meta.json"))],
        failed_attempts=json.loads(Path(out.attempts).read_text()),
        torn_records=json.loads(Path(out.torn).read_text()),
        name="probe",
    ).data()
    assert stats["counts"]["torn"] == 1 and stats["counts"]["total"] == 35
    torn = [f for f in stats["findings"] if f["kind"] == "torn record"]
    assert torn == [
        {
            "kind": "torn record",
            "arm": None,
            "vs": None,
            "workload": None,
            "host": None,
            "payload": {"file": "raw/block-2.jsonl", "line": 12, "bytes": 100},
        }
    ]

    # the article, from stats.json and runs.csv alone (as tests/test_article_from_stats.py renders it)
    src = tmp_path / "in"
    src.mkdir()
    (src / "stats.json").write_text(json.dumps(stats))
    shutil.copy(out.runs, src / "runs.csv")
    d = article.load(src / "runs.csv", src / "stats.json", src / "raw", None, tmp_path / "out")
    section = article.section_warnings(d)
    words = "\n".join(
        [i.text for i in section.items if isinstance(i, article.Para)]
        + [t for i in section.items if isinstance(i, article.Bullets) for t in i.items]
    )
    assert " 1 more was cut short in the raw files and could not be read (below)." in words
    sentence = (
        "the last line of raw/block-2.jsonl (line 12, 100 bytes) is a record cut short, as a crash while it was "
        "written leaves one: it cannot be read, so the request it held (a timed run, a warmup or a control's) is "
        "in no count, table or statistic here."
    )
    assert sentence in words and sentence in group(stats["findings"])


def test_without_a_torn_record_the_article_says_nothing_of_one(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("stats.json", "runs.csv"):
        shutil.copy(FIXTURE / name, src / name)
    d = article.load(src / "runs.csv", src / "stats.json", src / "raw", None, tmp_path / "out")
    section = article.section_warnings(d)
    words = " ".join(getattr(i, "text", "") for i in section.items) + " ".join(
        t for i in section.items if isinstance(i, article.Bullets) for t in i.items
    )
    assert "cut short" not in words  # a stats.json without counts.torn (written before it) reads as none


# --- a count the stream could not have carried ---------------------------------------------------------------------


def test_a_failed_count_check_makes_the_run_invalid_with_its_reason():
    # 8 tokens claimed in 2 text events, where one event carries at most 2 (no speculation): the client's flag
    flag = client.count_check(8, 2, client.tokens_per_event_bound(False, None))
    assert flag is not None and flag.startswith("8 tokens claimed in 2 stream events with text (4.00 per event")
    ok, bad = rec(run=0), rec(run=1, stream_events=2, count_check=flag)
    assert records.reasons(ok) == []
    assert records.reasons(bad) == [("count check", f"count check: {flag}")]
    runs = records.tidy([ok, bad])
    assert list(runs["valid"]) == [True, False]
    assert list(runs["invalid_kind"]) == ["", "count check"]
    assert runs.loc[1, "invalid_reason"] == f"count check: {flag}"
    assert runs.loc[1, "count_check"] == flag
    assert "count check" in records.INVALID_KINDS and records.REASON_HINTS["count check"]
    # runs.csv written before the kind column: the kind from the reason's text
    assert list(records.first_kind(runs.drop(columns="invalid_kind"))) == ["", "count check"]


def test_a_count_check_is_said_where_the_workflow_stops_and_in_the_analysis():
    flag = client.count_check(3, 9, None)  # more text events than tokens claimed
    runs = records.tidy(
        [rec(run=i, stream_events=9, completion_tokens=3, max_tokens=3, count_check=flag) for i in range(2)]
    )
    why = records.nothing_valid(runs)
    assert why.startswith("no valid measurement: all 2 timed requests in runs.csv are invalid.")
    assert f"  2 x count check; the first: count check: {flag}" in why
    assert records.REASON_HINTS["count check"] in why
