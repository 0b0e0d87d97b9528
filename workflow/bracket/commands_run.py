"""`bracket launch EXPERIMENT ARM --print`: the exact server command a block of that arm runs."""

from __future__ import annotations

import shlex
from pathlib import Path

from bracket import config, engines
from bracket.embedded import engine_python, model_dir

def launch_command(cfg: dict, arm: str) -> str:
    if arm not in cfg["arms"]:
        raise ValueError(f"no arm {arm!r} in this experiment; arms: {', '.join(cfg['arms'])}")
    adapter = engines.get(cfg["engine"]["kind"])
    argv = adapter.launch_argv(cfg, cfg["arms"][arm], model_dir(cfg), engine_python(cfg))
    env = adapter.launch_env(cfg, cfg["arms"][arm])
    secret = " ".join(f"{name}=${name}" for name in cfg["engine"]["secret_env"])
    if cfg["engine"].get("api_key_env") and adapter.api_key_env:
        secret = " ".join(x for x in (secret, f"{adapter.api_key_env}=${cfg['engine']['api_key_env']}") if x)
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return " ".join(x for x in (prefix, secret, shlex.join(argv)) if x)


def _launch(args) -> int:
    path = Path(args.experiment)
    if not path.suffix:
        path = Path("experiments") / f"{args.experiment}.yaml"
    cfg = config.load(path)
    print(launch_command(cfg, args.arm))
    return 0


def register(sub) -> None:
    p = sub.add_parser("launch", help="print the exact server command a block of ARM runs")
    p.add_argument("experiment", help="experiment name (experiments/NAME.yaml) or path")
    p.add_argument("arm")
    p.add_argument("--print", action="store_true", default=True,
                   help="print the command (the only mode: blocks are launched by the workflow)")
    p.set_defaults(func=_launch)
