"""bench/harness_live.py: tools beside a live server's own per-request timings.

The parsing of llama-server's timing lines is checked on a captured log; the pairing on the real
llama-server CPU build (cached under ~/.cache/bracket/llama.cpp, see test_engines_llamacpp_live.py)
with bracket and llama-benchy, the lightest peer. A peer whose virtual environment is absent
(bench/README.md installs them; BRACKET_PEERS_DIR points at another checkout's) is skipped, saying so.
"""

from __future__ import annotations

import math
import threading

import harness_live
import live_tools
import pytest
from conftest import ROOT

# Captured from llama-server (llama-cpp-python 0.3.36's llama.cpp) serving with ngram-simple.
LOG = """\
0.02.089.642 I slot print_timing: id  0 | task 1 | prompt eval time =     215.71 ms /    60 tokens (    3.60 ms per token,   278.16 tokens per second)
0.02.089.689 I slot print_timing: id  0 | task 1 |        eval time =     747.78 ms /    16 tokens (   49.85 ms per token,    20.06 tokens per second)
0.02.089.703 I slot print_timing: id  0 | task 1 |       total time =     963.49 ms /    76 tokens
0.02.089.743 I slot print_timing: id  0 | task 1 | draft acceptance = 0.50000 (    2 accepted /     4 generated), mean len =  3.00
0.02.657.769 I slot print_timing: id  0 | task 18 | prompt eval time =      34.09 ms /    60 tokens (    0.57 ms per token,  1759.84 tokens per second)
0.02.657.812 I slot print_timing: id  0 | task 18 |        eval time =     440.05 ms /   128 tokens (    3.46 ms per token,   288.60 tokens per second)
"""


def test_llama_log_pairs_prompt_and_eval_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOG)
    got = live_tools.LlamaLog(log).entries()
    assert got == [
        {"e2e_s": pytest.approx(0.96349), "first_last_s": pytest.approx(0.74778), "n": 16},
        {"e2e_s": pytest.approx(0.47414), "first_last_s": pytest.approx(0.44005), "n": 128},
    ]
    assert live_tools.LlamaLog(log).start() == 2


def test_ratios_and_format():
    rows = [
        {"tool_tg": 99.0, "server_tg": 100.0, "tool_decode": None, "server_decode": 90.0},
        {"tool_tg": 120.0, "server_tg": 100.0, "tool_decode": 88.0, "server_decode": 88.0},
    ]
    assert harness_live.ratios(rows, "tg") == pytest.approx([0.99, 1.2])
    assert harness_live.ratios(rows, "decode") == [1.0]
    assert harness_live.fmt([0.99, 1.2, 1.0]) == "1.0000 (0.990-1.200, 3)"
    assert harness_live.fmt([]) == "–"


def test_the_server_tg_of_a_tool_is_compared_with_the_plainest_tools_with_a_welch_interval():
    # a = 2, 8 tok/s: mean ln 4, variance of the logs 2 ln(2)^2; b = 4, 4: no spread. ratio 4/4 = 1;
    # se = sqrt(2 ln(2)^2 / 2) = ln 2 on Welch's df = 1, t(0.975, 1) = 12.7062: CI 2^-12.7062 .. 2^12.7062
    r = harness_live.vs_plain([2.0, 8.0], [4.0, 4.0])
    assert r[0] == pytest.approx(1.0)
    assert r[1] == pytest.approx(2**-12.7062, rel=1e-4) and r[2] == pytest.approx(2**12.7062, rel=1e-4)
    assert harness_live.vs_plain([2.0], [4.0, 4.0]) is None
    rows = [
        {"server": "s", "tool": t, "server_tg": v, "note": None}
        for t, vals in (("bracket", (146.0, 146.0)), ("llama-benchy", (184.0, 184.0)), ("bare client", (180.0, 180.0)))
        for v in vals
    ]
    assert harness_live.plain_tool(rows, "s") == "llama-benchy"  # preferred to the bare client
    assert harness_live.plain_cell(rows, "s", "bracket") == f"{146 / 184:.3f} ({146 / 184:.3f}-{146 / 184:.3f})"
    assert harness_live.plain_cell(rows, "s", "llama-benchy") == "1 (the plain tool)"
    no_benchy = [r for r in rows if r["tool"] != "llama-benchy"]
    assert harness_live.plain_tool(no_benchy, "s") == "bare client"
    assert harness_live.plain_cell([r for r in rows if r["tool"] == "bracket"], "s", "bracket") == "no plain tool ran"


def test_rounds_pair_the_tools_so_drift_between_rounds_cancels():
    # The server halves its speed in round 1 and the tool's requests cost 10 % more in both rounds:
    # round differences ln(0.9 * 100 / 100) and ln(0.9 * 50 / 50) are both ln 0.9, so the ratio is 0.9 with
    # a zero-width interval; Welch's on the pooled requests cannot see through the drift.
    rows = [
        {"server": "s", "tool": t, "round": r, "server_tg": v * f, "note": None}
        for r, v in ((0, 100.0), (1, 50.0))
        for t, f in (("bracket", 0.9), ("llama-benchy", 1.0))
    ]
    p = harness_live.vs_plain_paired(
        harness_live.by_round(rows, "s", "bracket"), harness_live.by_round(rows, "s", "llama-benchy")
    )
    assert p == (pytest.approx(0.9), pytest.approx(0.9), pytest.approx(0.9), 2)
    assert harness_live.plain_cell(rows, "s", "bracket") == "0.900 (0.900-0.900, 2 rounds)"
    w = harness_live.vs_plain([90.0, 45.0], [100.0, 50.0])
    # the same requests unpaired (Welch, df 2, se ln(2) / sqrt 2): 0.9 * exp(-/+ 4.302653 * 0.4901) = 0.109 .. 7.42
    assert w[1] == pytest.approx(0.9 * math.exp(-4.302653 * math.log(2) / math.sqrt(2)), rel=1e-4) and w[2] > 7
    # three rounds, differences ln 0.8, ln 1.0, ln 1.25 (a = 80, 100, 125 against b = 100): mean 0, sd ln 1.25,
    # se ln(1.25) / sqrt 3, t(0.975, 2) = 4.302653
    a = {0: [80.0], 1: [100.0], 2: [125.0]}
    b = {0: [100.0], 1: [100.0], 2: [100.0]}
    r, lo, hi, n = harness_live.vs_plain_paired(a, b)
    half = 4.302653 * math.log(1.25) / math.sqrt(3)
    assert (r, lo, hi, n) == (pytest.approx(1.0), pytest.approx(math.exp(-half)), pytest.approx(math.exp(half)), 3)
    assert harness_live.vs_plain_paired({0: [1.0]}, {0: [1.0], 1: [2.0]}) is None  # one common round
    # every tool once per round, a new order each round, reproducibly
    orders = harness_live.round_orders(["a", "b", "c"], 4, seed=1)
    assert len(orders) == 4 and all(sorted(o) == ["a", "b", "c"] for o in orders)
    assert orders == harness_live.round_orders(["a", "b", "c"], 4, seed=1) and len({tuple(o) for o in orders}) > 1
    assert harness_live.round_orders(["a", "b"], 1, seed=1) == [["a", "b"]]


def test_the_h200_table_shows_what_its_own_csv_holds_against_llama_benchy():
    rows, argvs = harness_live.read_csv(ROOT / "studies/h200/llamacpp/second_run/harness_live_h200.csv")
    b = harness_live.server_rates(rows, "llamacpp_plain", "bracket")
    p = harness_live.server_rates(rows, "llamacpp_plain", "llama-benchy")
    assert len(b) == len(p) == 5 and set(argvs) == {"llamacpp_plain", "llamacpp_draft"}
    cell = harness_live.plain_cell(rows, "llamacpp_plain", "bracket")
    assert cell in (ROOT / "studies/h200/llamacpp/second_run/harness_live_h200.md").read_text()
    assert float(cell.split()[0]) < 0.85  # 146 against 184 tok/s: the 23 % that top_k 0 cost llama.cpp


@pytest.mark.engine
@pytest.mark.serial  # bracket's and a peer's rates against the server's own timings
def test_bracket_and_llama_benchy_on_llama_server_against_its_timings(tmp_path, monkeypatch):
    if not (harness_live.LLAMACPP / "bin/llama-server").exists():
        pytest.skip(
            f"no llama.cpp CPU build at {harness_live.LLAMACPP} (tests/test_engines_llamacpp_live.py builds it)"
        )
    if not (harness_live.ENGINE / "bin/python").exists() or not (harness_live.MODEL / "tokenizer.json").exists():
        pytest.skip("no embedded engine and model (BRACKET_TEST_ENGINE / BRACKET_TEST_MODEL) to convert to GGUF")
    tools = ["bracket", "llama-benchy"]
    if not (harness_live.PEERS_DIR / "llama-benchy/bin/python").exists():
        pytest.skip(f"llama-benchy is not installed in {harness_live.PEERS_DIR / 'llama-benchy'} (bench/README.md)")
    monkeypatch.chdir(ROOT)
    rows, argv = harness_live.measure_server("llamacpp_ngram", tools, 64, 4, tmp_path, 8072)
    assert "--spec-type ngram-simple" in argv
    for tool in tools:
        rs = [r for r in rows if r["tool"] == tool]
        assert len(rs) == 4 and not any(r.get("note") for r in rs), rs
        assert all(r["server_n"] == 64 for r in rs)  # each request paired with its own timing line
    b = [r for r in rows if r["tool"] == "bracket"]
    assert all(r["tool_n"] == 64 for r in b)
    # decode: bracket's wall time holds the server's prompt + eval time and a little more (HTTP, tokenizing).
    dec = harness_live.ratios(b, "decode")
    assert all(0.5 < x <= 1.001 for x in dec), dec
    # tg: the same quantity on both sides. A busy machine delivers some streams in bursts (a request then
    # reads fast, or slow when its last event is late), so the best-paired request is judged: a request
    # paired with another's timing line would be off by the requests' different speeds on every try.
    for tool in tools:
        tg = harness_live.ratios([r for r in rows if r["tool"] == tool], "tg")
        assert min(abs(x - 1) for x in tg) < 0.05, (tool, tg)


def test_vllm_histogram_deltas_pair_one_finish_per_poll(monkeypatch):
    """Each poll that sees one more finished request yields that request's own sums; a poll that sees two
    yields two unpaired entries (not attributable)."""
    c, s = "vllm:e2e_request_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum"
    d, g = "vllm:request_decode_time_seconds_sum", "vllm:request_generation_tokens_sum"
    assert live_tools.VllmMetrics.NAMES == {c, s, d, g}
    snaps = iter(
        [
            {c: 5, s: 10.0, d: 8.0, g: 500},  # before
            {c: 5, s: 10.0, d: 8.0, g: 500},  # nothing finished
            {c: 6, s: 11.5, d: 8.0, g: 500},  # one, caught between its histograms' updates
            {c: 6, s: 11.5, d: 9.2, g: 628},  # settled: e2e 1.5 s, first->last 1.2 s, 128 tokens
            {c: 8, s: 13.0, d: 10.4, g: 884},  # two at once
            {c: 8, s: 13.0, d: 10.4, g: 884},
        ]
    )
    last, drained = {}, threading.Event()

    def read(self):
        nxt = next(snaps, None)
        if nxt is None:
            drained.set()  # every snapshot seen: since() may stop the poller now, however slow the machine
        last.update(nxt or last)
        return dict(last)

    monkeypatch.setattr(live_tools.VllmMetrics, "_read", read)
    monkeypatch.setattr(live_tools, "POLL_S", 0.01)
    m = live_tools.VllmMetrics("http://unused")
    mark = m.start()
    assert drained.wait(30)
    got = m.since(mark)
    assert got[0] == {"e2e_s": pytest.approx(1.5), "first_last_s": pytest.approx(1.2), "n": 128}
    assert got[1:] == [None, None]
