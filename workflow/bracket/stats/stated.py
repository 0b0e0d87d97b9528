"""What stats.json states of the experiment and of its physics, so that the article reads nothing else.

The analysis echoes, from the validated experiment, the facts the article names (its title and question,
the arms in their order with their labels and settings, the reference, the workloads in their order, the
engine, the design as planned with its schedule, the request) and, from weights.json and ceiling.json,
the byte account and the ceiling as the article prints them. stats.json version 3 (issue 28).
"""

from __future__ import annotations

import pandas as pd

#: An arm's settings the article names: its label, speculation, extra launch args and server state.
ARM_KEYS = ("label", "speculative", "args", "server")
#: The engine as the article names it (what served, how it was reached, the model as the experiment names it).
ENGINE_KEYS = ("kind", "launch", "embedded", "base_url", "model")
#: The design as planned (what ran is stats.json's design_ran).
DESIGN_KEYS = ("kind", "rounds", "runs_per_block", "warmup_runs", "cooldown_s", "seed", "min_rounds", "max_rounds")
#: The request settings the method section states.
REQUEST_KEYS = ("max_tokens", "temperature", "seed", "unique_prefix")
#: The byte account's fields the ceiling section prints (weights.json, bracket.physics.weights).
WEIGHTS_KEYS = (
    "status",
    "reason",
    "key",
    "model",
    "components",
    "tied_embeddings",
    "stored_bytes",
    "bytes_per_token",
    "notes",
)
#: The ceiling's fields the ceiling section prints (ceiling.json, bracket.physics.ceiling).
CEILING_KEYS = (
    "status",
    "reason",
    "key",
    "bandwidth_gbps",
    "bandwidth_source",
    "bytes_per_token",
    "ceiling_tok_s",
    "machine_steadiness",
)
SCHEDULE_COLUMNS = ("position", "arm", "round", "seed")


def _pick(d: dict | None, keys: tuple[str, ...]) -> dict:
    d = d or {}
    return {k: d[k] for k in keys if k in d}


def _fields(node, keys: tuple[str, ...]) -> dict:
    """The named fields of a part of the experiment (bracket.typed.experiment) that the file or the schema's
    defaults set, as JSON data."""
    data = node.model_dump(mode="json", include=set(keys), exclude_unset=True)
    return {k: data[k] for k in keys if k in data}


def schedule_rows(schedule: pd.DataFrame | None) -> list[dict]:
    """The planned blocks in order (schedule.csv): position, arm, round, seed."""
    if schedule is None or schedule.empty:
        return []
    missing = [c for c in SCHEDULE_COLUMNS if c not in schedule]
    if missing:
        raise ValueError(
            f"the schedule lacks column(s) {', '.join(missing)}: it is results/NAME/schedule.csv as rule plan "
            "writes it (position, arm, round, seed); run the plan again with --forcerun plan."
        )
    return [
        {"position": int(r.position), "arm": str(r.arm), "round": int(r.round), "seed": int(r.seed)}
        for r in schedule.sort_values("position").itertuples(index=False)
    ]


def experiment(exp, name: str, schedule: pd.DataFrame | None = None) -> dict:
    """stats.json's `experiment`: the validated experiment (a bracket.typed.experiment.Experiment, defaults
    filled) as the article names it, and its schedule.

    Keys: name, title, question, reference, arms (a list in the experiment's order: {arm, label, speculative,
    args, server}), workloads (names in the experiment's order), engine {kind, launch, embedded, base_url, model},
    design {kind, rounds, runs_per_block, warmup_runs, cooldown_s, seed, min_rounds, max_rounds}, request
    {max_tokens, temperature, seed, unique_prefix}, schedule [{position, arm, round, seed}].
    """
    return {
        "name": str(name),
        "title": exp.title,
        "question": exp.question,
        "reference": exp.reference,
        "arms": [{"arm": str(a), **_fields(arm, ARM_KEYS)} for a, arm in exp.arms.items()],
        "workloads": [str(w) for w in exp.workloads],
        "engine": _fields(exp.engine, ENGINE_KEYS),
        "design": _fields(exp.design, DESIGN_KEYS),
        "request": _fields(exp.request, REQUEST_KEYS),
        "schedule": schedule_rows(schedule),
    }


def physics_inputs(weights: dict | None, ceiling: dict | None) -> dict:
    """stats.json's `physics.weights` and `physics.ceiling`: the byte account and the ceiling as the article
    prints them (None where the file was not given)."""
    return {
        "weights": _pick(weights, WEIGHTS_KEYS) if weights is not None else None,
        "ceiling": _pick(ceiling, CEILING_KEYS) if ceiling is not None else None,
    }
