"""Server processes, for real: a bad flag fails at once with the engine's message, a slow start times
out with the log tail, a taken port is named before launch, and teardown leaves no process behind."""

import os
import socket
import sys
import textwrap
import time

import psutil
import pytest
from bracket.wire.server import Server, ServerError, port_owner

from tests.support import free_port

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast


def script(tmp_path, body):
    path = tmp_path / "fake_engine.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_a_rejected_flag_fails_within_seconds_with_the_engines_message(tmp_path):
    argv = script(
        tmp_path,
        """
        import sys, time
        time.sleep(0.5)
        print("usage: serve [-h] [--port PORT]", file=sys.stderr)
        print("serve: error: unrecognized arguments: --fp4-gemm-runner-backend flashinfer_cutedsl", file=sys.stderr)
        sys.exit(2)
    """,
    )
    log = tmp_path / "server.log"
    srv = Server(argv=argv, env={}, log_path=log, base_url=f"http://127.0.0.1:{free_port()}")
    srv.start()
    t0 = time.monotonic()
    with pytest.raises(ServerError) as err:
        srv.wait_ready(timeout_s=300)
    assert time.monotonic() - t0 < 10
    msg = str(err.value)
    assert "exited with code 2 during start-up" in msg
    assert "unrecognized arguments: --fp4-gemm-runner-backend" in msg
    assert str(log) in msg
    srv.stop()


def test_a_server_that_never_gets_ready_times_out_with_its_log_tail(tmp_path):
    argv = script(
        tmp_path,
        """
        import time
        print("loading weights 1/2", flush=True)
        time.sleep(60)
    """,
    )
    srv = Server(argv=argv, env={}, log_path=tmp_path / "s.log", base_url=f"http://127.0.0.1:{free_port()}")
    srv.start()
    try:
        with pytest.raises(ServerError) as err:
            srv.wait_ready(timeout_s=2)
        msg = str(err.value)
        assert "did not become ready within 2 s" in msg and "loading weights 1/2" in msg
        assert "startup_timeout_s" in msg
    finally:
        srv.stop()


def test_ready_means_alive_and_healthy(tmp_path):
    port = free_port()
    argv = script(
        tmp_path,
        f"""
        import http.server, time
        time.sleep(0.5)
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/health" else 404); self.end_headers()
            def log_message(self, *a): pass
        http.server.HTTPServer(("127.0.0.1", {port}), H).serve_forever()
    """,
    )
    with Server(argv=argv, env={}, log_path=tmp_path / "s.log", base_url=f"http://127.0.0.1:{port}") as srv:
        waited = srv.wait_ready(timeout_s=30)
        assert 0.3 < waited < 30 and srv.alive()
    assert not srv.alive()


def test_teardown_stops_the_whole_process_group(tmp_path):
    argv = script(
        tmp_path,
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print("child", child.pid, flush=True)
        time.sleep(120)
    """,
    )
    log = tmp_path / "s.log"
    srv = Server(argv=argv, env={}, log_path=log, base_url="http://127.0.0.1:1")
    srv.start()
    for _ in range(100):
        if "child" in log.read_text():
            break
        time.sleep(0.05)
    child = int(log.read_text().split()[1])
    leader = srv.proc.pid
    assert psutil.pid_exists(child)
    srv.stop(grace_s=5)
    time.sleep(0.2)
    for pid in (leader, child):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_taken_port_is_named_before_launch():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        owner = port_owner("127.0.0.1", port)
        assert owner is not None and f"pid {os.getpid()}" in owner
    assert port_owner("127.0.0.1", port) is None
