"""`bracket launch EXPERIMENT ARM --print`: the exact server command a block of that arm runs (it runs nothing)."""

from __future__ import annotations

import shlex
from pathlib import Path

from bracket import engines
from bracket.embedded import engine_python, model_dir
from bracket.engines import launch
from bracket.experiment import config
from bracket.measure import session
from bracket.typed.experiment import Experiment


def launch_command(exp: Experiment, arm: str, experiment: str = "experiment") -> str:
    """The command a block of `arm` runs, ready to paste: environment first, then the argv.

    Under docker the environment reaches the container by name (`-e NAME`), so it is set for the
    docker client; secrets stay `NAME=$NAME`, never their values.
    """
    if arm not in exp.arms:
        raise ValueError(f"no arm {arm!r} in this experiment; arms: {', '.join(exp.arms)}")
    eng = exp.engine
    adapter = engines.get(eng.kind)
    if eng.launch == "attach":
        return (
            f"# engine.launch is attach: bracket launches nothing and attaches to {launch.base_url(exp)}; "
            f"start the server there yourself, with the same flags for every arm."
        )
    if eng.api_key_env and not adapter.api_key_env:  # as a block would refuse it
        raise ValueError(f"engine.kind {eng.kind!r} takes no API key by environment; leave engine.api_key_env empty.")
    argv = launch.server_argv(
        exp,
        adapter,
        exp.arms[arm],
        model_dir(exp),
        engine_python(exp),
        name=launch.container_name(experiment, arm),
        env_names=session.secret_names(exp, adapter),
    )
    env = launch.launch_env(exp, adapter, exp.arms[arm])
    secret = " ".join(f"{name}=${name}" for name in eng.secret_env)
    if eng.api_key_env and adapter.api_key_env:
        secret = " ".join(x for x in (secret, f"{adapter.api_key_env}=${eng.api_key_env}") if x)
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return " ".join(x for x in (prefix, secret, shlex.join(argv)) if x)


def _launch(args) -> int:
    path = Path(args.experiment)
    if not path.suffix:
        path = Path("experiments") / f"{args.experiment}.yaml"
    print(launch_command(config.load(path), args.arm, path.stem))
    return 0


def register(sub) -> None:
    p = sub.add_parser("launch", help="print the exact server command a block of ARM runs")
    p.add_argument("experiment", help="experiment name (experiments/NAME.yaml) or path")
    p.add_argument("arm")
    p.add_argument(
        "--print",
        action="store_true",
        default=True,
        help="print the command (the only mode: blocks are launched by the workflow)",
    )
    p.set_defaults(func=_launch)
