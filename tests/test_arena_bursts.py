"""The window rate under bursty delivery: tokens of a first read are not timed, half a stream in one read is no rate.

Two users at 200 tok/s each (truth: 400 tok/s together), 32 tokens each, sent at one instant; the server makes
every token on time and holds them back in writes as the bench's burst modes do (bench/harness_bursts.py).
"""

from __future__ import annotations

import pytest
from bracket.arena import readings
from bracket.article import controls as article_controls
from bracket.article import findings as article_findings
from bracket.stats import findings as F

RATE, N, TTFT = 200.0, 32, 0.05


def stream(writes: list[int], start: float = 100.0) -> dict:
    """One user's record: token i made at TTFT + i / RATE, delivered in writes of the given sizes (each write at
    its last token's time, one read per write, one event per token)."""
    made = [TTFT + i / RATE for i in range(N)]
    chunks, i = [], 0
    for size in writes:
        i += size
        chunks += [[made[i - 1], 1]] * size
    assert i == N
    first, last = chunks[0][0], chunks[-1][0]
    return {
        "started_at": start,
        "ttft_s": first,
        "completion_tokens": N,
        "tg_tok_s": (N - 1) / (last - first) if last > first else None,
        "first_event_tokens": 1,
        "text_chunks": chunks,
        "error": None,
    }


def run(writes):
    return [stream(writes), stream(writes)]


def test_one_token_per_read_reads_the_truth():
    w = readings.window_rate(run([1] * N))
    assert w["window_tok_s"] == pytest.approx(2 * RATE)  # (31 + 31) / (31 / 200)
    assert readings.burst_problem(run([1] * N)) is None


def test_eight_per_write_reads_the_truth_not_29_percent_more():
    recs = run([8] * 4)
    w = readings.window_rate(recs)
    # first read at token 7 (0.085 s) brings 8, last at token 31 (0.205 s): 24 + 24 tokens in 0.12 s = 400
    assert w["decode_tokens"] == 48 and w["window_s"] == pytest.approx(0.12)
    assert w["window_tok_s"] == pytest.approx(2 * RATE)
    assert 62 / 0.12 == pytest.approx(2 * RATE * 1.2917, rel=1e-3)  # what counting every token after the first read
    assert readings.burst_problem(recs) is None  # a quarter of a stream per read: timed, and a finding says so


@pytest.mark.parametrize(
    "writes, share",
    [([N], 1.0), ([30, 1, 1], 30 / 32), ([16, 16], 0.5)],
    ids=["each stream in one write", "first 30 of 32 late", "half a stream per write"],
)
def test_half_a_stream_or_more_in_one_read_is_no_rate(writes, share):
    recs = run(writes)
    problem = readings.burst_problem(recs)
    assert problem == {"code": "bursts", "user": 0, "share": round(share, 4), "limit": 0.5}
    # one write per stream: no window at all; otherwise the rate rests on the few tokens after the big read
    assert (readings.window_rate(recs)["window_tok_s"] is None) == (writes == [N])


def test_the_cell_counts_unresolved_runs_and_says_it_has_no_rate():
    runs = [run([N]), run([N]), run([8] * 4)]
    b = readings._bursts(runs)
    assert b == {"runs": 3, "bursty_runs": 3, "share": 0.25, "unresolved_runs": 2}
    text = article_findings.message(F.Finding(F.FindingKind.BURSTY, F.Bursty(3, 3, 0.25, 2)))
    assert "in 2 of them one read brought half a stream or more" in text and "none is left" not in text
    text = article_findings.message(F.Finding(F.FindingKind.BURSTY, F.Bursty(2, 2, 0.25, 2)))
    assert "none is left: the rate of this cell is not known" in text
    cell = {"runs": [{"invalid_reason": readings.burst_problem(r)} for r in runs[:2]]}
    assert article_controls._unresolved(cell) == "not known: in all 2 runs one read brought half a stream or more"
