"""The issue's partial truths through Snakemake (issue 40): an experiment with the neutrality control runs against
bracket's reference server, then its last block's final record (a neutrality request) is cut as a crash cuts it,
and the analysis runs again: stats.json counts the torn record and names it, and the neutrality control reads the
pairs that are whole (7 of 8). A garbage line put in the middle of a block's file then stops `collect` with one
message naming the file and the line, without a traceback."""

import json
import subprocess
import sys

import pytest
from test_hostile_workflow import tiny_model

from tests.support import faultkit as fk
from tests.support import snakemake as run_snakemake

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast

REFERENCE = fk.ROOT / "workflow" / "bracket" / "engines" / "reference_server.py"


def test_a_torn_last_record_is_counted_and_a_garbage_line_stops_collect_with_its_place(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    model = tiny_model(tmp_path / "model")
    port = fk.free_port()
    server = subprocess.Popen(
        [sys.executable, str(REFERENCE), "--port", str(port), "--rate", "4000", "--ttft", "0.002"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    (repo / "experiments" / "torn.yaml").write_text(
        f"engine: {{kind: vllm, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
        f"served_model: reference-model, model: {model}}}\n"
        "arms: {first: {}, again: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {rounds: 2, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0}\n"
        "request: {max_tokens: 16}\nanalysis: {bootstrap_resamples: 200}\n"
        "controls: {neutrality_pairs: 2}\n"
    )
    res = repo / "results" / "torn"

    def snakemake(*args):
        return run_snakemake(repo, "results/torn/stats.json", *args, timeout=600)

    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the reference server")
        first = snakemake()
        assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
        before = json.loads((res / "stats.json").read_text())
        assert before["counts"]["torn"] == 0 and before["neutrality"]["pairs"] == 8  # 4 blocks x 2 pairs
        assert json.loads((res / "torn_records.json").read_text()) == []

        # a crash while the last block wrote its last record (the second pair's second request): 2 + 4 records
        # before it, so it is line 6; 40 of its bytes reached the disk
        block = res / "raw" / "block-3.jsonl"
        whole = block.read_bytes().split(b"\n")
        assert len(whole) == 7 and whole[-1] == b"" and json.loads(whole[5])["control"] == "neutrality"
        block.write_bytes(b"\n".join(whole[:5]) + b"\n" + whole[5][:40])
        again = snakemake("--forcerun", "collect")
        assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
        stats = json.loads((res / "stats.json").read_text())
        assert stats["counts"]["torn"] == 1 and stats["counts"]["total"] == 8  # the arms' runs are all there
        assert [f["payload"] for f in stats["findings"] if f["kind"] == "torn record"] == [
            {"file": "raw/block-3.jsonl", "line": 6, "bytes": 40}
        ]
        assert stats["neutrality"]["pairs"] == 7  # the torn request's pair is not whole

        # garbage in the middle of the first block's file: collect stops, naming it
        block0 = res / "raw" / "block-0.jsonl"
        lines = block0.read_bytes().split(b"\n")
        block0.write_bytes(b"\n".join([lines[0], b"#garbage", *lines[1:]]))
        stopped = snakemake("--forcerun", "collect")
    finally:
        server.kill()
        server.wait()
    assert stopped.returncode != 0
    said = "raw/block-0.jsonl, line 2: not a raw record ('#garbage'), and not the last line"
    assert said in stopped.stderr
    log = (repo / "logs" / "torn" / "collect.log").read_text()
    assert said in log and "Traceback" not in log and "exited with status 1" in log
