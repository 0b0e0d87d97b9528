"""What a user sees while waiting: a heartbeat while a server loads, and the time left per block and
per experiment."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from bracket.measure import eta
from bracket.wire.server import Server, last_line


def test_time_left_in_a_block_is_the_rate_so_far():
    assert eta.left_in_block(0, 10, 5.0) is None
    assert eta.left_in_block(4, 10, 8.0) == 12.0  # 2 s per request, 6 to go
    assert eta.left_in_block(10, 10, 20.0) == 0.0


def test_time_left_in_the_experiment_from_finished_blocks(tmp_path):
    assert eta.left_in_experiment(tmp_path, 3) is None
    for k, (start, end, status) in enumerate([(100, 160, "complete"), (200, 280, "complete"), (300, 301, "failed")]):
        (tmp_path / f"block-{k}.meta.json").write_text(
            json.dumps({"started_at": start, "ended_at": end, "status": status})
        )
    secs, n = eta.left_in_experiment(tmp_path, 3, cooldown_s=5)
    assert n == 2 and secs == 3 * (70 + 5)  # mean of 60 s and 80 s, failed attempt left out
    assert [eta.duration(x) for x in (None, 42, 600, 7200)] == ["unknown", "42 s", "10 min", "2.0 h"]


@pytest.mark.integration
def test_a_loading_server_beats_with_elapsed_time_and_its_last_log_line(tmp_path, capfd):
    """A real process that logs, then never answers: the heartbeat shows its last line, masked and clean."""
    script = (
        "import sys, time\n"
        "print('loading weights with key sk-secret-123 \\x1b[31mshard 1/4\\x1b[0m', flush=True)\n"
        "time.sleep(30)\n"
    )
    server = Server(
        argv=[sys.executable, "-c", script],
        env={"KEY": "sk-secret-123"},
        log_path=tmp_path / "server.log",
        base_url="http://127.0.0.1:9",
        secret_names=["KEY"],
        heartbeat_s=0.5,
    )
    server.start()
    try:
        t0 = time.monotonic()
        try:
            server.wait_ready(timeout_s=2.2)
        except Exception as exc:  # noqa: BLE001 - the timeout is expected
            assert "did not become ready" in str(exc)
        assert time.monotonic() - t0 < 10
    finally:
        server.stop(grace_s=2)
    err = capfd.readouterr().err
    beats = [line for line in err.splitlines() if line.strip().startswith("loading:")]
    assert len(beats) >= 3, err
    assert "of at most 2 s" in beats[0] and "shard 1/4" in beats[-1]
    assert "sk-secret-123" not in err and "***" in beats[-1] and "\x1b" not in err


def test_last_line_when_nothing_is_logged(tmp_path):
    assert last_line(tmp_path / "missing.log") == "(nothing logged yet)"
    p = Path(tmp_path / "long.log")
    p.write_text("x" * 500 + "\n\n")
    assert len(last_line(p)) == 160


def test_the_heartbeat_line_masks_a_registered_secret_in_its_escaped_forms(tmp_path):
    from bracket import secrets

    key = "sk-heartbeat-0123456789"
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)  # as a JSON log line may write it
    p = tmp_path / "server.log"
    p.write_text(f'loading {{"api_key": "{escaped}"}} and {key.encode().hex()}\n')
    secrets.register(key)
    try:
        line = last_line(p)
    finally:
        secrets.forget()
    assert line == 'loading {"api_key": "***"} and ***'
