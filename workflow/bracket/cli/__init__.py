"""The `bracket` command: works on files, with or without Snakemake.

Each subcommand has a module in this package named for what it does; each exposes
`register(subparsers)`, which adds its parser and sets `func` to a callable taking the parsed args
and returning an exit code. With --json, a command prints one shape whatever its input (compare:
a list of comparisons, one per workload, even when there is one).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bracket import __version__
from bracket.experiment.config import ExperimentError

COMMAND_MODULES = [
    "bracket.cli.launch",  # bracket launch: print the server command a block runs
    "bracket.cli.stats",  # bracket summarize / compare: statistics on raw values from anywhere
    "bracket.cli.physics",  # bracket weights / ceiling: byte account and decode ceilings
    "bracket.cli.setup",  # bracket workflow / check: a runnable workflow, an experiment checked
    "bracket.cli.export",  # bracket export: cells as llama-benchy or vllm bench serve JSON
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bracket", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"bracket {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ExperimentError, FileNotFoundError, ValueError) as exc:
        print(f"bracket {args.command}: {exc}", file=sys.stderr)
        return 2
