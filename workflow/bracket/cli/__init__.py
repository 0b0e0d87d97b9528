"""The `bracket` command: works on files, with or without Snakemake.

Each subcommand has a module in this package named for what it does; each exposes
`register(subparsers)`, which adds its parser and sets `func` to a callable taking the parsed args
and returning an exit code. With --json, a command prints one shape whatever its input (compare:
a list of comparisons, one per workload, even when there is one).

`bracket --version` answers before any subcommand's module is imported (they bring jsonschema, pydantic,
httpx, pandas): this module imports the standard library and bracket.version alone, and the rest by name.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bracket import version

COMMAND_MODULES = [
    "bracket.cli.launch",  # bracket launch: print the server command a block runs
    "bracket.cli.stats",  # bracket summarize / compare: statistics on raw values from anywhere
    "bracket.cli.physics",  # bracket weights / ceiling: byte account and decode ceilings
    "bracket.cli.setup",  # bracket workflow / check: a runnable workflow, an experiment checked
    "bracket.cli.export",  # bracket export: cells as llama-benchy or vllm bench serve JSON
]
#: The errors a command reports as one line (the problem and its fix) rather than a traceback.
USER_ERRORS = ("bracket.experiment.config", "ExperimentError")


class _Version(argparse.Action):
    """--version: which bracket this is (bracket.version), its commit and whether its files differed from it."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version.describe(version.info()))
        parser.exit()


def _top_parser(add_help: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bracket", description=__doc__.splitlines()[0], add_help=add_help)
    parser.add_argument(
        "--version",
        action=_Version,
        help="which bracket this is: version, commit, and whether its files differ from that commit",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _top_parser(add_help=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _top_parser(add_help=False).parse_known_args(argv)  # --version ends here, before any subcommand is imported
    parser = build_parser()
    args = parser.parse_args(argv)
    user_error = getattr(importlib.import_module(USER_ERRORS[0]), USER_ERRORS[1])
    try:
        return int(args.func(args) or 0)
    except (user_error, FileNotFoundError, ValueError) as exc:
        print(f"bracket {args.command}: {exc}", file=sys.stderr)
        return 2
