"""`bracket workflow DIR` and `bracket check EXPERIMENT`: a runnable workflow from an installed
bracket, and what a run would trip over on this host, before any server starts."""

from __future__ import annotations

import json
from pathlib import Path

from bracket import embedded, share
from bracket.experiment import config, preflight
from bracket.physics import modelsource


def _workflow(args) -> int:
    done = share.write_workflow(args.dir, overwrite=args.overwrite)
    dest = Path(args.dir).resolve()
    result = {
        "dir": str(dest),
        "source": str(share.root()),
        "written": len(done.written),
        "kept": [str(p) for p in done.kept],
        "shipped_beside": {str(k): str(v) for k, v in done.beside.items()},
        "ledgers_kept": [str(p) for p in done.ledgers],
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"wrote {len(done.written)} files of the workflow into {dest} (from {result['source']})")
    if done.kept and args.overwrite:
        print(
            f"kept {len(done.kept)} file(s) changed since bracket wrote them (or written before bracket kept a record "
            f"of what it wrote, {share.MANIFEST}); the shipped version of each is beside it:"
        )
        for p in done.kept:
            print(f"  {p}  (shipped: {done.beside[p]})")
    elif done.kept:
        print(
            f"kept {len(done.kept)} file(s) that differ from the shipped ones; --overwrite replaces those bracket "
            "wrote and nobody changed, and writes the shipped version beside the others:"
        )
        for p in done.kept:
            print(f"  {p}")
    if done.ledgers:
        print(
            f"left {len(done.ledgers)} corrections ledger(s) as they are (append-only: bracket workflow never writes "
            "over one): " + ", ".join(str(p) for p in done.ledgers)
        )
    print(f"next: cd {args.dir} && snakemake --cores 1 smoke")
    return 0


def _experiment_path(name: str) -> Path:
    path = Path(name)
    return path if path.suffix else Path("experiments") / f"{name}.yaml"


def _check(args) -> int:
    path = _experiment_path(args.experiment)
    exp = config.load(path)
    root = Path(args.root)
    problems = preflight.problems(exp, root)
    model = embedded.model_dir(exp) if exp.engine.embedded else None
    src = modelsource.resolve(exp, root, model=model, remote=False if args.offline else None)
    result = {"experiment": str(path), "problems": problems, "model_source": src.to_dict()}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for p in problems:
            print(f"problem: {p}")
        where = src.detail if src.found else f"unknown: {src.detail}; set {src.key}"
        if exp.engine.embedded and not src.found:
            where = f"the embedded model, which the workflow builds on its first run ({model})"
        print(f"byte account: {where}")
        print("ready to run" if not problems else f"{len(problems)} problem(s): fix them before running")
    return 1 if problems else 0


def register(sub) -> None:
    w = sub.add_parser(
        "workflow", help="write a runnable copy of the workflow (Snakefile, rules, notebook, experiments) into DIR"
    )
    w.add_argument("dir", metavar="DIR")
    w.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files bracket wrote there before and nobody changed since; a changed file is kept and the "
        "shipped version written beside it (NAME.shipped); a corrections ledger is never touched",
    )
    w.add_argument("--json", action="store_true", help="machine-readable output")
    w.set_defaults(func=_workflow)
    c = sub.add_parser(
        "check",
        help="before running: the model, mounts and engine program on this host, and "
        "where the byte account will come from",
    )
    c.add_argument("experiment", help="experiment name (experiments/NAME.yaml) or path")
    c.add_argument("--root", default=".", help="the workflow's root, for relative paths (default .)")
    c.add_argument("--offline", action="store_true", help="do not ask the hub")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=_check)
