"""The attach probe waits for a slow server that is still streaming, and refuses only a silent one.

A plain llama-server attached on a loaded machine was refused by the probe ("timed out after 8 s, still
streaming") while it was healthy. Here the reference server streams 16 tokens at 1.5 tokens/s (about 11 s,
past the probe's first 8 s) and must pass, with the console told why the probe waited; one that sends
nothing for 30 s must still be refused, within the first limit.
"""

import time

import pytest
from bracket.engines.reference_server import ReferenceServer
from bracket.experiment import probe
from test_attach import attach_cfg

pytestmark = pytest.mark.integration


def test_a_slow_server_still_streaming_passes_and_the_console_says_why_it_waited(tmp_path, capsys):
    assert probe.PROBE_TIMEOUT_S == 8.0 and probe.PROBE_TOKENS == 16  # 16 tokens at 1.5/s: about 11 s
    with ReferenceServer(rate=1.5, ttft=0.05) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url, request={"timeout_s": 60}), tmp_path)
    assert rep.problems == [], rep.problems
    said = capsys.readouterr().err
    assert rep.slow and rep.slow in said
    assert "is slow:" in said and "still streaming" in said and "request.timeout_s (60 s)" in said
    assert rep.record()["slow"] == rep.slow


def test_a_slow_server_past_request_timeout_s_is_still_refused_by_its_limit(tmp_path):
    # the block's own limit (request.timeout_s 10 s) is what the probe waits at most: 16 tokens at 1/s exceed it
    with ReferenceServer(rate=1.0, ttft=0.05) as srv:
        rep = probe.run(attach_cfg(tmp_path, srv.url, request={"timeout_s": 10}), tmp_path)
    assert len(rep.problems) == 1 and "timed out after 10 s, still streaming" in rep.problems[0], rep.problems


@pytest.mark.serial  # a bound on the time it took
def test_a_silent_server_is_refused_at_the_first_limit(tmp_path, capsys):
    with ReferenceServer(rate=500, ttft=30) as srv:
        t0 = time.monotonic()
        rep = probe.run(attach_cfg(tmp_path, srv.url, request={"timeout_s": 60}), tmp_path)
        took = time.monotonic() - t0
    assert len(rep.problems) == 1 and "without data from the server" in rep.problems[0], rep.problems
    assert rep.slow is None and "is slow" not in capsys.readouterr().err
    assert took < 30  # refused at the probe's 8 s, not after request.timeout_s
