"""The block-level fault tests' pieces: an experiment aimed at the stand-in engine (tests/data/faults/fake_engine.py),
a block run in this process or in a driver process of its own (drive_block.py), the files it leaves. It carries
the shared helpers the fault tests reach as fk.NAME (ports, processes, the workflow copy and its runner)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil

from tests.support.net import free_port, listener
from tests.support.paths import ROOT, python_env
from tests.support.processes import alive, as_from_a_terminal, engine_processes, group_members, kill_group, wait_for
from tests.support.workflow import EMBEDDED_ENGINE, EMBEDDED_MODEL, repo_copy, snakemake_argv, snakemake_env

__all__ = [
    "EMBEDDED_ENGINE",
    "EMBEDDED_MODEL",
    "ROOT",
    "alive",
    "as_from_a_terminal",
    "engine_processes",
    "free_port",
    "group_members",
    "kill_group",
    "listener",
    "psutil",
    "python_env",
    "repo_copy",
    "snakemake_argv",
    "snakemake_env",
    "wait_for",
]

HERE = Path(__file__).resolve().parent  # drive_block.py and drive_engine_block.py: run them with env=python_env()
FAULTS = ROOT / "tests" / "data" / "faults"  # the stand-in engine and the fault experiments' files
FAKE_ENGINE = FAULTS / "fake_engine.py"
SECRET = "sk-bracket-test-7f3a9c1e5b"  # a value that appears nowhere unless it leaks


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
    from bracket.block import runner
    from bracket.experiment import design

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


def count_lines(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


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


def sentinel_engine(root: Path) -> Path:
    """root/sentinel-engine: an engine program that touches root/LAUNCHED and exits 2, for a test that shows a run
    stopped before any launch (LAUNCHED absent)."""
    sentinel = root / "sentinel-engine"
    sentinel.write_text(f"#!/bin/sh\ntouch {root}/LAUNCHED\nexit 2\n")
    sentinel.chmod(0o755)
    return sentinel
