"""tests/prebuild.py: llama.cpp's build in the background for as long as `make test` lives (a stand-in build
script here: the real one is exercised by the llama.cpp fixtures and test_llamacpp_build.py)."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import prebuild
import pytest
from bracket import embedded

ROOT = Path(__file__).resolve().parents[1]


def test_it_builds_what_the_fixture_asks_for():
    """The version the package pins and the script the llama_server fixture runs."""
    assert prebuild.LLAMACPP_VERSION == embedded.LLAMACPP_VERSION
    assert prebuild.SCRIPT == ROOT / "workflow" / "scripts" / "build_llamacpp.sh"
    fixture = (ROOT / "tests" / "conftest.py").read_text()
    assert '"workflow/scripts/build_llamacpp.sh"), _embedded.LLAMACPP_VERSION, "cpu", "2"' in fixture


def test_its_log_goes_where_the_script_caches(monkeypatch, tmp_path):
    monkeypatch.setenv("BRACKET_CACHE", str(tmp_path / "c"))
    assert prebuild.cache_root() == tmp_path / "c" / "llama.cpp"
    monkeypatch.delenv("BRACKET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert prebuild.cache_root() == tmp_path / "x" / "bracket" / "llama.cpp"
    script = (ROOT / "workflow" / "scripts" / "build_llamacpp.sh").read_text()
    assert 'root="${BRACKET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bracket}/llama.cpp"' in script


def gone(pid: int) -> bool:
    """No such process, or a zombie waiting for a parent that is not this test to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def stand_in(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "build.sh"
    script.write_text(f'#!/usr/bin/env bash\necho "args: $*"\necho $$ > {tmp_path}/pid\n{body}\n')
    return script


def test_a_finished_build_returns_its_status_at_the_lowest_priority(monkeypatch, tmp_path):
    monkeypatch.setenv("BRACKET_CACHE", str(tmp_path))
    monkeypatch.setattr(prebuild, "SCRIPT", stand_in(tmp_path, "echo nice $(nice)\nexit 3"))
    assert prebuild.run(os.getpid(), poll_s=0.05) == 3
    log = (tmp_path / "llama.cpp" / f"prebuild-{embedded.LLAMACPP_VERSION}.log").read_text()
    assert f"args: {embedded.LLAMACPP_VERSION} cpu 2" in log and "nice 19" in log


def _autogroups_on() -> bool:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


@pytest.mark.skipif(not _autogroups_on(), reason="the kernel groups no processes by session")
def test_the_builds_session_ranks_below_the_tests(monkeypatch, tmp_path):
    """A new session is its own scheduling group where the kernel has autogroup: its nice, not the compilers',
    decides its share against the test workers' session."""
    monkeypatch.setenv("BRACKET_CACHE", str(tmp_path))
    monkeypatch.setattr(
        prebuild,
        "SCRIPT",
        stand_in(
            tmp_path,  # the session's nice is set just after it starts: look for up to 5 s
            'for i in $(seq 50); do grep -q "nice 19" /proc/$$/autogroup && break; sleep 0.1; done\ncat /proc/$$/autogroup',
        ),
    )
    assert prebuild.run(os.getpid(), poll_s=0.05) == 0
    log = (tmp_path / "llama.cpp" / f"prebuild-{embedded.LLAMACPP_VERSION}.log").read_text()
    # empty where the tests' own session never called setsid (it shares the root group, as on CI)
    ours = (Path("/proc/self/autogroup").read_text().split() or ["the root group"])[0]
    (line,) = [x for x in log.splitlines() if x.startswith("/autogroup-")]
    assert line.split()[0] != ours and line.endswith("nice 19")


@pytest.mark.integration
@pytest.mark.serial
def test_the_build_stops_with_the_process_it_serves(monkeypatch, tmp_path):
    """The owner ends mid-build: the build's whole process group is stopped within a poll or two, and the log
    says why."""
    monkeypatch.setenv("BRACKET_CACHE", str(tmp_path))
    # a child of the script (as ninja and the compilers are) that would outlive it unless the group is stopped
    monkeypatch.setattr(prebuild, "SCRIPT", stand_in(tmp_path, f"sleep 300 & echo $! > {tmp_path}/child\nwait"))
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    threading.Thread(target=owner.wait, daemon=True).start()  # reaped as it ends, as make's parent would
    t0 = time.monotonic()
    assert prebuild.run(owner.pid, poll_s=0.1) == 143
    assert time.monotonic() - t0 < 10
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:  # the signal is delivered; give the kernel a moment
        time.sleep(0.1)
    assert gone(child)
    log = (tmp_path / "llama.cpp" / f"prebuild-{embedded.LLAMACPP_VERSION}.log").read_text()
    assert f"process {owner.pid} ended; the llama.cpp build stopped" in log


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering a nice value takes privilege")
def test_a_test_that_needs_the_build_hurries_it(monkeypatch, tmp_path):
    """The llama_server fixture's hurry(): the running build's process group (and its session) back at nice 0;
    a second prebuild while one runs starts nothing; with no build running, nothing to hurry."""
    monkeypatch.setenv("BRACKET_CACHE", str(tmp_path))
    monkeypatch.setattr(prebuild, "SCRIPT", stand_in(tmp_path, f"sleep 300 & echo $! > {tmp_path}/child\nwait"))
    assert prebuild.hurry() is False
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    threading.Thread(target=owner.wait, daemon=True).start()
    done = []
    t = threading.Thread(target=lambda: done.append(prebuild.run(owner.pid, poll_s=0.05)), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not (tmp_path / "child").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pgid = prebuild.running_build()
    assert pgid is not None and os.getpriority(os.PRIO_PGRP, pgid) == 19
    assert prebuild.run(os.getpid()) == 0 and prebuild.running_build() == pgid  # the second: nothing started
    assert prebuild.hurry() is True
    assert os.getpriority(os.PRIO_PGRP, pgid) == 0
    if _autogroups_on():  # the build's own session has one (setsid), whatever the tests' session has
        assert Path(f"/proc/{pgid}/autogroup").read_text().split()[-1] == "0"
    owner.kill()
    t.join(10)
    assert done == [143] and not prebuild.pidfile().exists()
