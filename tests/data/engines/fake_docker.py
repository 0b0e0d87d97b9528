"""A stand-in `docker` CLI for tests on a host without a docker engine.

It records every call (argv, and for each `-e NAME` whether NAME was set in its environment,
never the value) to $FAKE_DOCKER_STATE/calls.jsonl and emulates the subset bracket uses:

  run -d --name N [-p HOST:HP:CP] [-e NAME] ... --entrypoint E IMAGE ARGS   start a "container"
  inspect --format '{{json .State}}' | '{{json .Image}}' N                  its state / image id
  image inspect --format '{{json .RepoDigests}}' IMAGE                     the image's digest
  logs [-f] N                                                               its output
  stop -t T N, rm -f N                                                      SIGTERM, then removal

A container is a supervisor process (its own session) running a payload chosen by the image:
  bracket/reference:test   bracket/engines/reference_server.py on the published host port (4 tokens per
                           event, vLLM-style spec counters): an engine that serves
  bracket/crash:test       prints a flag error and exits with code 2: an engine that rejects a flag
The engine command after the image is recorded, not run: no engine exists here.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STATE = Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker"))
WITH_VALUE = {
    "--name",
    "--label",
    "--pull",
    "--gpus",
    "--shm-size",
    "--ipc",
    "--network",
    "-p",
    "-v",
    "-e",
    "--entrypoint",
    "--cpuset-cpus",
}
FLAGS = {"-d", "--rm", "-it"}


def die(msg: str, code: int = 1) -> None:
    print(msg, file=sys.stderr)
    sys.exit(code)


def record(argv: list[str], **extra) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.jsonl", "a") as f:
        f.write(json.dumps({"argv": argv, **extra}) + "\n")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def payload(image: str, host_port: str) -> list[str]:
    if image == "bracket/reference:test":
        return [
            sys.executable,
            str(ROOT / "workflow" / "bracket" / "engines" / "reference_server.py"),
            "--host",
            "127.0.0.1",
            "--port",
            host_port,
            "--tokens-per-event",
            "4",
            "--rate",
            "4000",
            "--ttft",
            "0.005",
        ]
    if image == "bracket/crash:test":
        return [
            sys.executable,
            "-c",
            "import sys; print('INFO 12-01 engine starting'); "
            "print('api_server.py: error: unrecognized arguments: --bogus-flag', file=sys.stderr); sys.exit(2)",
        ]
    die(
        f"Unable to find image '{image}' locally\ndocker: Error response from daemon: pull access denied for "
        f"{image.split(':')[0]}",
        125,
    )


def cmd_run(args: list[str]) -> None:
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in FLAGS:
            i += 1
            continue
        if args[i] not in WITH_VALUE:
            die(f"unknown flag: {args[i]}", 125)
        opts.setdefault(args[i], []).append(args[i + 1])
        i += 2
    image, inner = args[i], args[i + 1 :]
    name = opts["--name"][0]
    record(["run", *args], env_present={n: n in os.environ for n in opts.get("-e", [])})
    if (STATE / f"{name}.json").exists():
        die(f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.', 125)
    host_port = opts["-p"][0].split(":")[1] if "-p" in opts else "0"
    argv = payload(image, host_port)
    log = open(STATE / f"{name}.log", "wb")
    sup = subprocess.Popen(
        [sys.executable, __file__, "_supervise", name, *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    (STATE / f"{name}.json").write_text(
        json.dumps({"pid": sup.pid, "image": image, "entrypoint": opts["--entrypoint"], "inner": inner})
    )
    print(digest(name))


def cmd_supervise(name: str, argv: list[str]) -> None:
    child = subprocess.Popen(argv)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    code = child.wait()
    (STATE / f"{name}.exit").write_text(str(code))


def state_of(name: str) -> dict:
    path = STATE / f"{name}.json"
    if not path.exists():
        die(f"Error: No such object: {name}")
    info = json.loads(path.read_text())
    exit_file = STATE / f"{name}.exit"
    if exit_file.exists():
        return {"Status": "exited", "Running": False, "ExitCode": int(exit_file.read_text() or 0), "Pid": 0}
    try:
        os.kill(info["pid"], 0)
        return {"Status": "running", "Running": True, "ExitCode": 0, "Pid": info["pid"]}
    except ProcessLookupError:
        return {"Status": "exited", "Running": False, "ExitCode": 137, "Pid": 0}


def cmd_inspect(args: list[str]) -> None:
    fmt, name = args[args.index("--format") + 1], args[-1]
    record(["inspect", *args])
    st = state_of(name)
    if ".State" in fmt:
        print(json.dumps(st))
    elif ".Image" in fmt:
        image = json.loads((STATE / f"{name}.json").read_text())["image"]
        print(json.dumps("sha256:" + digest("id:" + image)))
    else:
        die(f"fake docker: format {fmt!r} not emulated")


def cmd_image(args: list[str]) -> None:
    record(["image", *args])
    image = args[-1]
    print(json.dumps([f"{image.split(':')[0]}@sha256:{digest(image)}"]))


def cmd_logs(args: list[str]) -> None:
    record(["logs", *args])
    name = args[-1]
    state_of(name)
    log = STATE / f"{name}.log"
    if "-f" not in args:
        sys.stdout.buffer.write(log.read_bytes())
        return
    pos = 0
    while True:
        data = log.read_bytes()
        sys.stdout.buffer.write(data[pos:])
        sys.stdout.flush()
        pos = len(data)
        if state_of(name)["Status"] != "running":
            sys.stdout.buffer.write(log.read_bytes()[pos:])
            return
        time.sleep(0.1)


def _signal_group(name: str, sig: int) -> None:
    info = json.loads((STATE / f"{name}.json").read_text())
    try:
        os.killpg(info["pid"], sig)
    except ProcessLookupError:
        pass


def cmd_stop(args: list[str]) -> None:
    record(["stop", *args])
    name = args[-1]
    state_of(name)
    grace = float(args[args.index("-t") + 1]) if "-t" in args else 10.0
    _signal_group(name, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and state_of(name)["Status"] == "running":
        time.sleep(0.05)
    _signal_group(name, signal.SIGKILL)
    print(name)


def cmd_rm(args: list[str]) -> None:
    record(["rm", *args])
    name = args[-1]
    if not (STATE / f"{name}.json").exists():
        die(f"Error response from daemon: No such container: {name}")
    _signal_group(name, signal.SIGKILL)
    for suffix in (".json", ".exit", ".log"):
        (STATE / f"{name}{suffix}").unlink(missing_ok=True)
    print(name)


def main(argv: list[str]) -> None:
    if not argv:
        die("usage: docker COMMAND")
    cmd, rest = argv[0], argv[1:]
    if cmd == "_supervise":
        return cmd_supervise(rest[0], rest[1:])
    handlers = {
        "run": cmd_run,
        "inspect": cmd_inspect,
        "image": cmd_image,
        "logs": cmd_logs,
        "stop": cmd_stop,
        "rm": cmd_rm,
    }
    if cmd not in handlers:
        die(f"fake docker: command {cmd!r} not emulated")
    handlers[cmd](rest)


if __name__ == "__main__":
    main(sys.argv[1:])
