"""End to end, a load workload through the real Snakemake rules to the article: `snakemake --cores 1 loadsmoke` on
bracket's reference engine in batching mode, whose step time is a + b B for B streams (a = 10 ms, b = 5 ms), so the
article's load numbers have a known truth (bracket.engines.reference_batching.batch_truth): with N users in a closed
loop each stream's TPOT is a + b N and its decode rate 1 / (a + b N), 66.7 tok/s at 1 user and 33.3 at 4.

A second load workload holds its client to a send-lag tolerance of one microsecond, which no client meets on any
machine: each of its levels is a level whose client fell behind, and the article must name it invalid with its
reason. The run happens in a copy of the workflow (tests.support.repo_copy); no engine is built and no model read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from bracket.engines.reference_batching import batch_truth
from bracket.stats.contract import upgrade

from tests.support import free_port, repo_copy, snakemake

# Timed against a known truth: run alone, after the parallel pass (`serial`).
pytestmark = [pytest.mark.integration, pytest.mark.serial]
EXP = "loadsmoke"
A, B, TOKENS = 0.01, 0.005, 8
EXPERIMENT = """\
title: "Load smoke test on the reference engine"
question: "Does a load workload run from the experiment file to the article, and report the batching law?"
engine: {{kind: reference, port: {port}, args: ["--ttft", "0", "--step-base", "{a}", "--step-per-stream", "{b}"]}}
arms:
  baseline: {{}}
  ngram_1: {{speculative: {{method: ngram, draft_tokens: 1}}}}
reference: baseline
workloads:
  one: {{prompts: experiments/prompts/code.jsonl}}
  users:
    prompts: experiments/prompts/code.jsonl
    kind: load
    load: {{users: [1, 4], warmup_s: 0.5, steady_s: 3, drain_s: 3, lag_tolerance_s: 0.1, slo: {{tpot_s: 0.04}}}}
  strict:
    prompts: experiments/prompts/code.jsonl
    kind: load
    load: {{users: [2], warmup_s: 0.3, steady_s: 1, drain_s: 3, lag_tolerance_s: 0.000001}}
design: {{kind: abab, rounds: 2, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0, seed: 1}}
request: {{max_tokens: {tokens}}}
analysis: {{bootstrap_resamples: 200}}
hardware: {{probe_bandwidth: false, bandwidth_gbps: 20}}
controls: {{neutrality: false, neutrality_off: "the load section is what this test reads"}}
"""
# The median TPOT of a request of 8 tokens is its 7 steps after the first over 7 tokens: the law's step, a + b N, where
# every step ran all N streams. A step that starts while a user is between two requests runs without it (shorter), and
# the server's and client's own latency on a loaded machine come on top: held within 15 % of the law.
TOLERANCE = 0.15


def _centre(cell: str) -> float:
    """The centre of an article cell "66.5 (65.1–67.9)"."""
    m = re.match(r"\s*([0-9.]+)", str(cell))
    assert m, cell
    return float(m.group(1))


@pytest.fixture(scope="module")
def load_run(tmp_path_factory) -> Path:
    root = repo_copy(tmp_path_factory.mktemp("loadsmoke"))
    exp = EXPERIMENT.format(port=free_port(), a=A, b=B, tokens=TOKENS)
    (root / "experiments" / f"{EXP}.yaml").write_text(exp)
    proc = snakemake(root, EXP, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return root


def tpot(users: int, per_step: int) -> float:
    """The law's TPOT of an 8-token request: its 7 tokens after the first come `per_step` a step (ngram_1: the first
    token alone, the prefill's, then 2 a step, so 4 steps for 7 tokens)."""
    steps = -(-(TOKENS - 1) // per_step)
    return batch_truth(A, B, users).tpot_s * steps / (TOKENS - 1)


def test_the_law_the_article_is_read_against():
    assert batch_truth(A, B, 1).tpot_s == pytest.approx(0.015)
    assert tpot(4, 1) == pytest.approx(0.030)
    assert tpot(4, 2) == pytest.approx(0.030 * 4 / 7)


def test_the_load_section_reports_the_batching_law(load_run):
    tables = load_run / "report" / EXP / "tables"
    levels = pd.read_csv(tables / "load_users_levels.csv")
    tails = pd.read_csv(tables / "load_users_tails.csv")
    for arm, k in (("baseline", 1), ("ngram_1", 2)):
        for n in (1, 4):
            truth = tpot(n, k)
            word = "1 user" if n == 1 else f"{n} users"
            row = levels[(levels["arm"] == arm) & (levels["level"] == word)].iloc[0]
            tail = tails[(tails["arm"] == arm) & (tails["level"] == word)].iloc[0]
            tpot_ms = _centre(tail["TPOT p50 ms"])
            assert tpot_ms == pytest.approx(1e3 * truth, rel=TOLERANCE), (arm, n, tpot_ms)
            rate = _centre(row["per-user tok/s (p50)"])
            assert rate == pytest.approx(1 / truth, rel=TOLERANCE), (arm, n, rate)
    stats = upgrade(__import__("json").loads((load_run / "results" / EXP / "stats.json").read_text()))
    (users,) = [ld for ld in stats.load if ld.workload == "users"]
    # the speculation gain in per-user decode rate: 7 tokens in 7 steps against 7 in 4, at either level
    gains = [g for g in users.gains if g.metric == "decode_rate_p50"]
    # a gain at every level where both arms have two valid blocks (a level whose client fell behind in a block of a
    # loaded machine is left out, and named: the other test)
    valid = {(b.arm, b.level) for b in users.blocks if b.valid}
    two = [lv for lv in (1.0, 4.0) if all(sum(1 for b in users.blocks if b.valid and (b.arm, b.level) == (a, lv)) >= 2
                                          for a in ("baseline", "ngram_1"))]  # fmt: skip
    assert valid and two and [g.level for g in gains] == two
    for g in gains:
        assert g.ratio == pytest.approx(7 / 4, rel=TOLERANCE)
    md = (load_run / "report" / EXP / "article.md").read_text()
    gains_table = pd.read_csv(tables / "load_users_gains.csv")
    assert len(gains_table) == 2 * len(two)  # two metrics per level
    # a capacity sentence for each arm (3 s windows hold too few requests for a p99: it is undetermined, and says so)
    for arm in ("baseline", "ngram\\_1"):
        assert f"- {arm}: " in md


def test_a_level_whose_client_fell_behind_is_named_invalid_in_the_article(load_run):
    md = (load_run / "report" / EXP / "article.md").read_text()
    section = md[md.index("Many users at once: strict") :].replace("\\_", "_")  # Markdown escapes "_"
    for arm in ("baseline", "ngram_1"):
        for block in (0, 1, 2, 3):
            if f"{arm}, block {block}, 2 users: invalid, the client fell behind its schedule (client_behind" in section:
                break
        else:
            raise AssertionError(f"no invalid level of {arm} named in: {section[:3000]}")
    # left out of every statistic: no interval at the strict workload's level
    tables = load_run / "report" / EXP / "tables"
    levels = pd.read_csv(tables / "load_strict_levels.csv", keep_default_na=False)
    assert (levels["throughput tok/s"] == "n/a").all()
