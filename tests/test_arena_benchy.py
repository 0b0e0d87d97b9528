"""llama-benchy 0.4.0's numbers from bracket's records: by hand, and against llama-benchy's own code on the
same streams (a bursty reference server), where its virtual environment exists (bench/README.md)."""

import concurrent.futures
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from bracket import engines
from bracket.arena import benchy as arena_benchy
from bracket.arena import readings as arena_stats
from bracket.arena import text as arena_text
from bracket.experiment import config

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("BRACKET_PEERS_DIR", ROOT / "bench" / ".venv-peers"))
BENCHY_PY = PEERS / "llama-benchy" / "bin" / "python"


def rec(start, ttft, chunks, n=None, ttfr=None, prompt=1000, latency=0.0):
    """A record whose text events came at `chunks` = [(seconds after start, token ids carried)]."""
    n = sum(k for _, k in chunks) if n is None else n
    return {
        "started_at": start,
        "ttft_s": ttft,
        "ttfr_s": ttfr if ttfr is not None else ttft,
        "completion_tokens": n,
        "prompt_tokens": prompt,
        "text_chunks": [list(c) for c in chunks],
        "wall_s": chunks[-1][0] + 0.001,
        "latency_s": latency,
        "error": None,
    }


def test_a_burst_counts_only_the_tokens_after_the_first_read():
    # 1 token at 0.5 s, then one read at 0.6 s brings 3 events of 1 token and one of 2: six tokens.
    # llama-benchy: the 2-token chunk spreads over (0.6, 0.6] -> both at 0.6; decode tokens = 5 later than
    # 0.5, window 0.1 s -> 50 t/s. A first read of 4 tokens then 1 token 0.2 s later: 1 / 0.2 = 5 t/s.
    r = arena_benchy.request_of(rec(100.0, 0.5, [(0.5, 1), (0.6, 1), (0.6, 1), (0.6, 1), (0.6, 2)]))
    assert r.total_tokens == 6 and len(r.token_times) == 6
    b = arena_benchy.batch([r], 1000, 0.0)
    assert b.tg_req == pytest.approx([50.0])
    b2 = arena_benchy.batch([arena_benchy.request_of(rec(100.0, 0.5, [(0.5, 4), (0.7, 1)]))], 1000, 0.0)
    assert b2.tg_req == pytest.approx([5.0])  # bracket's window rate would read (5 - 1) / 0.2 = 20


def test_a_multi_token_chunk_spreads_from_the_previous_token():
    # tokens at 0.5 (one), then a chunk of 4 at 0.9: spread over (0.5, 0.9] -> 0.6, 0.7, 0.8, 0.9
    r = arena_benchy.request_of(rec(0.0, 0.5, [(0.5, 1), (0.9, 4)]))
    assert r.token_times == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9])


def test_a_stream_in_one_read_is_dropped_and_counted():
    one = rec(0.0, 0.5, [(0.5, 1)] * 8)  # eight events, one read: window 0
    ok = rec(10.0, 0.5, [(0.5, 1), (1.5, 1)])  # 1 token over 1 s
    batches = [arena_benchy.batch([arena_benchy.request_of(r)], 1000, 0.0) for r in (one, ok)]
    cell = arena_benchy.cell(batches, 1)
    assert cell["tg_throughput"]["values"] == pytest.approx([1.0])  # llama-benchy's mean is over the rest
    assert arena_benchy.dropped(batches, 1) == {
        "tg": 1,
        "of": 2,
        "unit": "requests",
        "reason": "the stream's tokens arrived in one network read (window 0)",
    }


def test_peak_by_hand():
    # 3 tokens in 0.5 s (span under 1 s): 3 / 0.5 = 6 t/s
    assert arena_benchy.peak([0.0, 0.25, 0.5]) == pytest.approx(6.0)
    # span over 1 s: most tokens in a window (t - 1, t]: 0.0 drops out at t = 1.0, so {0.2, 0.4, 1.0}, 3 / 1
    assert arena_benchy.peak([0.0, 0.2, 0.4, 1.0, 3.0]) == pytest.approx(3.0)
    # all at one instant (span 0): llama-benchy counts them over the full window: 5 / 1 s
    assert arena_benchy.peak([2.0] * 5) == pytest.approx(5.0)


def test_pp_uses_the_expected_count_unless_the_server_is_within_20_percent_and_subtracts_latency():
    # ttfr 0.5 s, latency 0.1 s -> est_ppt 0.4 s; server counted 1100 of 1000 expected (within 20 %): 1100 / 0.4
    b = arena_benchy.batch([arena_benchy.request_of(rec(0.0, 0.5, [(0.5, 1), (1.0, 1)], prompt=1100))], 1000, 0.1)
    assert b.pp_req == pytest.approx([1100 / 0.4])
    # the prefix cell's inference phase expects pp = 128, the server counts 640: llama-benchy uses 128
    b = arena_benchy.batch([arena_benchy.request_of(rec(0.0, 0.5, [(0.5, 1), (1.0, 1)], prompt=640))], 128, 0.0)
    assert b.pp_req == pytest.approx([128 / 0.5])


def test_two_users_batch_values_by_hand():
    # user 1 starts 100.0, first token 100.5 (1 token), 3 tokens one each at 100.6, 100.7, 100.8
    # user 2 starts 100.1, first token 100.9 carrying 2 tokens, then 1 at 101.0
    u1 = rec(100.0, 0.5, [(0.5, 1), (0.6, 1), (0.7, 1), (0.8, 1)], prompt=1000)
    u2 = rec(100.1, 0.8, [(0.8, 2), (0.9, 1)], prompt=1002)
    b = arena_benchy.batch([arena_benchy.request_of(u1), arena_benchy.request_of(u2)], 1000, 0.0)
    assert b.pp == pytest.approx(2002 / 0.9)  # last first token 100.9 - first start 100.0
    assert b.tg == pytest.approx((3 + 1) / 0.5)  # tokens after each first: 3 + 1, over 101.0 - 100.5
    assert b.tg_req == pytest.approx([3 / 0.3, 1 / 0.1])
    assert b.peak == pytest.approx(7 / 0.5)  # 7 tokens within 0.5 s
    assert b.ttfr_s == pytest.approx([0.5, 0.8])


def test_records_without_chunks_read_as_llama_benchy_without_token_ids():
    # older records: first token at 0.5, 9 tokens, tg 10 t/s -> last at 1.3; spread evenly, 8 after the first
    r = {
        "started_at": 0.0,
        "ttft_s": 0.5,
        "completion_tokens": 9,
        "tg_tok_s": 10.0,
        "prompt_tokens": 10,
        "wall_s": 1.3,
        "error": None,
    }
    b = arena_benchy.batch([arena_benchy.request_of(r)], 10, 0.0)
    assert b.tg_req == pytest.approx([10.0])


def test_burst_share_marks_bursty_runs():
    assert arena_stats.burst_share(rec(0, 0.5, [(0.5, 1), (0.6, 1), (0.7, 1), (0.8, 1)])) == 0.25
    assert arena_stats.burst_share(rec(0, 0.5, [(0.5, 1)] + [(0.6, 1)] * 7)) == pytest.approx(7 / 8)
    assert arena_stats.burst_share({"text_chunks": None, "completion_tokens": 8}) is None


# ---- against llama-benchy's own code -------------------------------------------------------------------

BENCHY_SCRIPT = r"""
import json, sys
from llama_benchy.client import LLMClient, RequestResult
from llama_benchy.results import BenchmarkResults
data = json.load(sys.stdin)
client = LLMClient("http://x/v1", "k", "m")
batches = []
for run in data["runs"]:
    out = []
    for r in run:
        res = RequestResult(start_ts=r["started_at"], end_ts=r["started_at"] + r["wall_s"],
                            first_response_ts=r["started_at"] + r["ttfr_s"],
                            first_token_ts=r["started_at"] + r["text_chunks"][0][0], prompt_tokens=r["prompt_tokens"])
        chunks = [{"text": "x", "timestamp": r["started_at"] + t, "token_ids": [0] * k} for t, k in r["text_chunks"]]
        client._finalize_stream_tokens(res, chunks, r["completion_tokens"])
        out.append(res)
    batches.append(out)
results = BenchmarkResults()
results.add("m", data["pp"], data["tg"], data["depth"], data["concurrency"], batches, data["latency"], data["expected"])
print(json.dumps(results.runs[0].model_dump()))
"""


def _llama_benchy_reads(runs, concurrency, expected, latency=0.0):
    doc = {
        "runs": runs,
        "pp": 8,
        "tg": 24,
        "depth": 0,
        "concurrency": concurrency,
        "latency": latency,
        "expected": expected,
    }
    out = subprocess.run(
        [str(BENCHY_PY), "-c", BENCHY_SCRIPT],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(not BENCHY_PY.exists(), reason="llama-benchy's environment is not installed (bench/README.md)")
@pytest.mark.parametrize("users", [1, 2])
def test_bursty_streams_read_as_llama_benchy_reads_them(users):
    """Streams from a reference server that releases 4 events at a time (2 tokens each): bracket's
    llama-benchy metrics equal llama-benchy's own results code fed the same streams."""
    from bracket.engines.reference_server import ReferenceServer

    adapter = engines.get("vllm")
    # the typed request and arm a block hands the arena (bracket.typed.experiment), not plain dicts
    cfg = config.validate(
        {"arms": {"a": {}}, "request": {"max_tokens": 24, "temperature": 0.0, "seed": 1, "timeout_s": 10.0}}
    )
    req, arm = cfg.request, cfg.arms["a"]
    with ReferenceServer(rate=400, ttft=0.02, tokens_per_event=2, burst=4) as srv, httpx.Client() as http:
        runs = []
        for _ in range(3):
            sent = []
            with concurrent.futures.ThreadPoolExecutor(users) as pool:
                futs = [
                    pool.submit(arena_text.send, adapter, http, srv.url, "m", "", "p", req, 1, arm, "chat", False)
                    for _ in range(users)
                ]
                for f in futs:
                    m, extra = f.result()
                    assert m.error is None
                    sent.append({**m.fields(), **extra, "latency_s": 0.001})
            runs.append(sent)
    theirs = _llama_benchy_reads(runs, users, 8, latency=0.001)
    wl = {"users": users, "depth": 0, "prompt_tokens": 8, "tokens": 24}
    ours, dropped = arena_stats.benchy(runs, wl)
    for key in (
        "tg_throughput",
        "tg_req_throughput",
        "pp_throughput",
        "peak_throughput",
        "peak_req_throughput",
        "ttfr",
        "est_ppt",
        "e2e_ttft",
    ):
        if theirs[key] is None:
            assert ours[key] is None, key
            continue
        assert ours[key]["values"] == pytest.approx(theirs[key]["values"], rel=1e-9), key
        assert ours[key]["mean"] == pytest.approx(theirs[key]["mean"], rel=1e-9), key
    # the client stamps each event with its read's time: the bursts are in the records (on a loaded machine
    # the kernel may deliver a whole stream in one read, and then llama-benchy drops the run, as above)
    assert min(arena_stats.burst_share(r) for run in runs for r in run) >= 6 / 24
    # bracket's window rate counts the same tokens (those after each stream's first read) over the same window
    rates = [arena_stats.window_rate(run)["window_tok_s"] for run in runs]
    if ours["tg_throughput"] is not None and users > 1 and None not in rates:
        assert ours["tg_throughput"]["values"] == pytest.approx(rates, rel=1e-6)
