"""`bracket workflow DIR` and `bracket check EXPERIMENT`: a runnable workflow from an installed
bracket, and what a run would trip over on this host, before any server starts."""

from __future__ import annotations

import json
from pathlib import Path

from bracket import embedded, share
from bracket.experiment import config, preflight
from bracket.physics import modelsource


def _workflow(args) -> int:
    written = share.write_workflow(args.dir, overwrite=args.overwrite)
    result = {"dir": str(Path(args.dir).resolve()), "source": str(share.root()), "written": len(written)}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"wrote {len(written)} files of the workflow into {result['dir']} (from {result['source']}); "
        f"existing files were {'replaced' if args.overwrite else 'kept'}.\n"
        f"next: cd {args.dir} && snakemake --cores 1 smoke"
    )
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
    w.add_argument("--overwrite", action="store_true", help="replace files that already exist")
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
