"""The determinism control: the same request alone (batch 1) and beside a second one (batch 2).

Seed 000: with speculative decoding on, greedy output differed from the output with it off. Each
config repeated byte for byte, so it was not jitter; the control that found the cause had no
speculation in it at all: the same request, on the same server, once alone and once alongside a
second concurrent request::

    batch=1          39e462cb7494b66f...
    batch=2, req A   b660d8f884b9d35c...
    batch=2, req B   b660d8f884b9d35c...

Batching changes the reduction order inside the matmuls; floating-point addition is not
associative, so a near-tied token flips. `classify` reads such a table of output hashes:

- "unstable": some config disagrees with itself (a repeat, or request A vs B of one batch);
- "two stable paths" (or "N stable paths"): every config repeats exactly, the configs disagree;
- "stable": every output is the same.

The control runs in its own fresh server with the prefix cache off, so a repeat cannot be served
from cached prefill (that is a different computation path too), at temperature 0.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
from pathlib import Path

import httpx

from bracket import engines
from bracket.engines import launch
from bracket.experiment import prompts
from bracket.measure import session
from bracket.secrets import redact_obj
from bracket.typed.experiment import Experiment
from bracket.wire.client import stream_completion

UNSTABLE, STABLE = "unstable", "stable"


def paths_word(n: int) -> str:
    return "two stable paths" if n == 2 else f"{n} stable paths"


def classify(hashes: dict[str, list[str]]) -> dict:
    """Classify a determinism table: config name -> the output hashes of its repeats (and batch members).

    Returns {verdict, unstable (configs that disagree with themselves), paths (distinct outputs
    of the stable configs, in config order), distinct (per config)}.

    Examples
    --------
    >>> classify({"batch 1": ["39e4"] * 3, "batch 2": ["b660"] * 6})["verdict"]
    'two stable paths'
    """
    if not hashes or any(not v for v in hashes.values()):
        raise ValueError(f"every config needs at least one output hash; got {hashes!r}")
    distinct = {name: sorted(set(v)) for name, v in hashes.items()}
    unstable = [name for name, d in distinct.items() if len(d) > 1]
    paths: list[str] = []
    for name, v in hashes.items():
        if name not in unstable and v[0] not in paths:
            paths.append(v[0])
    if unstable:
        verdict = UNSTABLE
    elif len(paths) == 1:
        verdict = STABLE
    else:
        verdict = paths_word(len(paths))
    return {
        "verdict": verdict,
        "unstable": unstable,
        "paths": paths,
        "distinct": {k: len(d) for k, d in distinct.items()},
    }


def reading(result: dict) -> str:
    """What the verdict means for the reader, in seed 000's words."""
    v = result["verdict"]
    if v == UNSTABLE:
        return (
            f"{', '.join(result['unstable'])} disagreed with itself at temperature 0: the output is not "
            f"reproducible even in one batch shape, so an arm's disagreement with the reference says nothing "
            f"about the arm."
        )
    if v == STABLE:
        return (
            "Every repeat of both batch shapes gave the same output: batch shape does not change greedy output "
            "here, so an arm that should be lossless and diverges is not explained by batching."
        )
    return (
        "Each batch shape repeats byte for byte, but the shapes disagree: batching changes the reduction order "
        "inside the matmuls, so a near-tied token flips. Anything that changes the batch shape, speculative "
        "decoding included, can change greedy output without being wrong."
    )


@contextlib.contextmanager
def serve(
    exp: Experiment,
    arm_name: str,
    *,
    model: str,
    python: str,
    log_path: Path,
    lock_dir: Path,
    extra_args: list[str] = (),
):
    """A fresh server for one arm (bracket.measure.session, as the block runner's); yields (http, base url, argv).

    Under attach there is no command, so `extra_args` (such as turning the prefix cache off) cannot apply.
    """
    p = session.plan(
        exp,
        arm_name,
        model=model,
        python=python,
        extra_args=extra_args,
        name=launch.container_name("determinism", arm_name, 0),
    )
    with session.serve(exp, p, log_path=log_path, lock_dir=lock_dir) as s:
        yield s.http, s.base, p.argv


def send_together(http: httpx.Client, url: str, bodies: list[dict], timeout_s: float) -> list:
    """Send `bodies` at the same instant (a barrier), each on its own thread; Measurements in order."""
    barrier = threading.Barrier(len(bodies))

    def one(body):
        barrier.wait()
        return stream_completion(http, url, body, timeout_s)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


# vLLM's switch for the prefix cache; other engines get none (their cache state is recorded instead).
NO_PREFIX_CACHE = {"vllm": ["--no-enable-prefix-caching"]}


def run_control(
    exp: Experiment,
    experiment: str,
    *,
    model: str,
    python: str,
    root: str | Path,
    log_path: str | Path,
    lock_dir: str | Path = "results/.locks",
) -> dict:
    """Run the control on each arm of controls.determinism_arms (default: the reference); return the result."""
    root, log_path = Path(root), Path(log_path)
    ctl = exp.controls
    arms = list(ctl.determinism_arms) or [exp.reference]
    for a in arms:
        if a not in exp.arms:
            raise ValueError(f"controls.determinism_arms names {a!r}, which is not an arm; arms: {', '.join(exp.arms)}")
    wl_name = next(iter(exp.workloads))
    prompt = prompts.load(root / exp.workloads[wl_name].prompts)[0]
    adapter = engines.get(exp.engine.kind)
    req = exp.request.model_copy(update={"temperature": 0})
    repeats = ctl.determinism_repeats
    out = {
        "experiment": experiment,
        "workload": wl_name,
        "prompt_id": prompt["id"],
        "max_tokens": req.max_tokens,
        "temperature": 0,
        "repeats": repeats,
        "prefix_cache": "off" if exp.engine.kind in NO_PREFIX_CACHE else "as configured",
        "arms": [],
    }
    url = None
    for arm in arms:
        rows = []
        with serve(
            exp,
            arm,
            model=model,
            python=python,
            log_path=log_path,
            lock_dir=Path(lock_dir),
            extra_args=NO_PREFIX_CACHE.get(exp.engine.kind, []),
        ) as (http, base, argv):
            url = base + getattr(adapter, "request_path", "/v1/completions")
            body = adapter.request_body(
                session.served_name(adapter, exp, http, base), prompt["prompt"], req, seed=req.seed
            )
            for i in range(repeats):
                m = stream_completion(http, url, body, req.timeout_s)
                rows.append(_row("batch 1", i, "alone", m))
            for i in range(repeats):
                for who, m in zip("AB", send_together(http, url, [body, body], req.timeout_s)):
                    rows.append(_row("batch 2", i, who, m))
        errors = [r for r in rows if r["error"]]
        table = {}
        for r in rows:
            if not r["error"]:
                table.setdefault(r["config"], []).append(r["output_sha256"])
        result = (
            classify(table)
            if len(table) == 2
            else {"verdict": "not measured", "unstable": [], "paths": [], "distinct": {}}
        )
        out["arms"].append(
            {
                "arm": arm,
                "argv": argv,
                "rows": rows,
                **result,
                "reading": reading(result) if len(table) == 2 else f"{len(errors)} requests failed; see {log_path}.",
            }
        )
    return out


def _row(config: str, repeat: int, member: str, m) -> dict:
    return {
        "config": config,
        "repeat": repeat,
        "request": member,
        "output_sha256": m.output_sha256,
        "completion_tokens": m.completion_tokens,
        "cached_tokens": m.cached_tokens,
        "finish_reason": m.finish_reason,
        "output_text": m.output_text,
        "error": m.error,
        "started_at": m.started_at,
    }


def write_json(result: dict, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(redact_obj(result), indent=1, ensure_ascii=False))
