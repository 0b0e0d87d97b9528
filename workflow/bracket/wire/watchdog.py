"""Take a server's process group down when the client that launched it dies.

    python watchdog.py CLIENT_PID SERVER_PGID [GRACE_S] [--log PATH]
    python watchdog.py CLIENT_PID --docker DOCKER CONTAINER [GRACE_S] [--log PATH]

A server runs in its own process group (so teardown reaches every worker it forks), which also
detaches it from its client: a client killed with SIGKILL runs no teardown, and the server would
keep the port and the accelerator. The client starts this script beside each server, in a session
of its own (a signal to the client's group does not reach it). It waits on the client's pidfd and:
- exits when the server's group is gone (normal teardown, which also kills it outright);
- when the client dies first, sends SIGTERM to the server's group, then SIGKILL after GRACE_S
  (default 5) to whatever is left.
A container is no process of ours (the docker daemon runs it): in the second form the watchdog
stops it with `DOCKER stop -t GRACE_S CONTAINER`, then removes it with `DOCKER rm -f`, when the
client dies; a normal teardown stops the watchdog first.
With --log, the secrets the client knows arrive on stdin, one per line (never on the command line),
and once the server is down they are replaced by *** in its log: the client that would have
redacted it at teardown is gone.
It imports nothing from bracket while it watches, so it starts in tens of milliseconds with any Python; the
package's redaction (every form, escaped or mixed) is imported only to redact, once the server is down.
"""

import os
import select
import signal
import subprocess
import sys
import time


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _client_gone(client: int, pidfd: int | None, wait_s: float) -> bool:
    if pidfd is not None:
        ready, _, _ = select.select([pidfd], [], [], wait_s)
        return bool(ready)
    time.sleep(wait_s)
    return os.getppid() != client  # reparented: the client is gone


def _open(client: int) -> int | None:
    try:
        return os.pidfd_open(client)
    except (AttributeError, OSError):  # no pidfd (old kernel): poll the parent instead
        return None


def redact_log(path: str | None, secrets: list[bytes]) -> None:
    if not path or not secrets:
        return
    try:
        data = open(path, "rb").read()
    except OSError:
        return
    new = data
    for s in sorted(secrets, key=len, reverse=True):
        new = new.replace(s, b"***")
    if new != data:
        with open(path, "wb") as f:
            f.write(new)
    _redact_every_form(path, secrets)


def _redact_every_form(path: str, secrets: list[bytes]) -> None:
    """The package's whole redaction (a secret with any of its characters escaped, mixed), where it imports:
    only now, once the server is down, so the watchdog still starts in tens of milliseconds."""
    try:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        from bracket import secrets as redaction

        for s in secrets:
            try:
                redaction.register(s.decode())
            except (ValueError, UnicodeDecodeError):
                continue  # a form too short to be told from the data, or not text: the literal pass had it
        redaction.redact_file(path)
    except Exception:  # noqa: BLE001 - the literal pass above stands; a watchdog never fails for this
        pass


def container(client: int, docker: str, name: str, grace: float) -> int:
    """Stop and remove container `name` once the client is gone."""
    pidfd = _open(client)
    while not _client_gone(client, pidfd, 5.0):
        pass
    for argv, timeout in (
        ([docker, "stop", "-t", str(int(grace)), name], grace + 60),
        ([docker, "rm", "-f", name], 120),
    ):
        try:
            subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired):
            pass
    return 0


def main(argv: list[str]) -> int:
    log = None
    if "--log" in argv:
        i = argv.index("--log")
        log, argv = argv[i + 1], argv[:i] + argv[i + 2 :]
        secrets = [line for line in sys.stdin.buffer.read().split(b"\n") if line]
    if len(argv) > 2 and argv[2] == "--docker":
        code = container(int(argv[1]), argv[3], argv[4], float(argv[5]) if len(argv) > 5 else 5.0)
    else:
        code = process_group(int(argv[1]), int(argv[2]), float(argv[3]) if len(argv) > 3 else 5.0)
    if log:
        redact_log(log, secrets)
    return code


def process_group(client: int, pgid: int, grace: float) -> int:
    """Signal group `pgid` once the client is gone; 0 when it is gone, 1 if something outlived SIGKILL."""
    pidfd = _open(client)
    while True:
        if not _group_alive(pgid):
            return 0
        if _client_gone(client, pidfd, 0.5):
            break
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return 0
        end = time.monotonic() + wait
        while time.monotonic() < end and _group_alive(pgid):
            time.sleep(0.1)
        if not _group_alive(pgid):
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
