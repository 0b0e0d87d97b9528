"""An arena grid: llama-benchy's depth, pp, tg and concurrency lists in one workload, expanded into cells.

llama-benchy takes lists (--depth 0 4096 ..., --pp, --tg, --concurrency) and runs every combination;
the Spark Arena's profile (spark-arena/recipe-registry benchmarking/spark-arena-v2.yaml) is 7 depths
x 4 concurrencies = 28 cells. A workload of kind arena with `grid` becomes one ordinary arena
workload per combination, named `NAME-dDEPTH-ppPP-tgTG-cUSERS`, when the experiment is validated
(bracket.experiment.config), so the runner, the analysis and the article see cells they already know.

Order, and why it is heat-aware. A machine that has just run a heavy cell is hotter (clocks, fans,
memory temperature) than one that has just run a light one, so a cell's number depends on what ran
before it. llama-benchy runs its loops in ascending order (depth outermost, concurrency innermost),
so the heavy cells all come last, on a machine heated by everything before them. sparkrun's Arena
profile instead fixes a `schedule` that mixes loads (cells bucketed by heat load and visited in a
seeded pattern); `grid.order` takes such a list and runs the cells in exactly that order. Without
it bracket alternates the ends of the load ranking (load = users x (depth + pp + tg) tokens):
lightest, heaviest, second lightest, second heaviest, ..., so no two heavy cells run back to back
and the heat stays near its mean instead of climbing through the grid. In a block the runner then
takes one run of every cell in this order, and again for the next run (runs outermost): every cell
is preceded by the same cell in every run and block, which keeps the machine's state at a cell
comparable from run to run, and drift is spread over all cells instead of landing on the last.
"""

from __future__ import annotations

import itertools

from bracket.typed.experiment import Experiment, Workload

AXES = ("depth", "prompt_tokens", "tokens", "users")  # llama-benchy --depth, --pp, --tg, --concurrency
DEFAULTS = {
    "depth": 16384,
    "prompt_tokens": 2048,
    "tokens": 128,
    "users": 2,
}  # bracket.experiment.arena_workload.DEFAULTS


def cell_name(workload: str, cell: dict) -> str:
    return f"{workload}-d{cell['depth']}-pp{cell['prompt_tokens']}-tg{cell['tokens']}-c{cell['users']}"


def load(cell: dict) -> int:
    """A cell's heat load: the tokens its users put through the server in one run, users x (depth + pp + tg)."""
    return cell["users"] * (cell["depth"] + cell["prompt_tokens"] + cell["tokens"])


def alternating(cells: list[dict]) -> list[dict]:
    """Lightest, heaviest, second lightest, second heaviest, ... (ties broken by the grid's own order)."""
    ranked = sorted(cells, key=load)
    out, lo, hi = [], 0, len(ranked) - 1
    while lo <= hi:
        out.append(ranked[lo])
        if hi != lo:
            out.append(ranked[hi])
        lo, hi = lo + 1, hi - 1
    return out


def cells(name: str, wl: Workload, source: str = "experiment") -> list[dict]:
    """The grid's cells (depth, prompt_tokens, tokens, users) in run order; ValueError naming the key and the fix."""
    grid = wl.grid
    axes = {}
    for axis in AXES:
        values = getattr(grid, axis)
        own = getattr(wl, axis)
        if values is None:  # the workload's own scalar, else the arena default
            values = [own if own is not None else DEFAULTS[axis]]
        elif own is not None:
            raise ValueError(
                f"{source}: workloads.{name} sets {axis} both alone and in grid.{axis}; keep one "
                f"(grid.{axis}: [{own}] for a single value)."
            )
        values = list(values)
        if len(set(values)) != len(values):
            raise ValueError(f"{source}: workloads.{name}.grid.{axis} lists a value twice ({values}); list each once.")
        axes[axis] = [int(v) for v in values]
    grid_cells = [dict(zip(AXES, combo)) for combo in itertools.product(*(axes[a] for a in AXES))]
    if not grid.order:
        return alternating(grid_cells)
    out, seen = [], set()
    for i, named in enumerate(grid.order):
        entry = named.model_dump(exclude_none=True)  # the axes this entry names
        match = [c for c in grid_cells if all(c[k] == int(v) for k, v in entry.items())]
        if len(match) != 1:
            raise ValueError(
                f"{source}: workloads.{name}.grid.order[{i}] = {entry} matches {len(match)} cells of "
                f"the grid; each entry must name exactly one (give every axis with several values)."
            )
        key = tuple(match[0][a] for a in AXES)
        if key in seen:
            raise ValueError(f"{source}: workloads.{name}.grid.order[{i}] = {entry} repeats a cell; name each once.")
        seen.add(key)
        out.append(match[0])
    missing = [c for c in grid_cells if tuple(c[a] for a in AXES) not in seen]
    if missing:
        raise ValueError(
            f"{source}: workloads.{name}.grid.order leaves out {len(missing)} cell(s) of the grid, "
            f"e.g. {missing[0]}; list every cell, or remove grid.order for bracket's heat-aware order."
        )
    return out


def has_grid(wl: Workload) -> bool:
    """Whether the workload names a grid (`grid: {}` names none)."""
    return wl.grid is not None and bool(wl.grid.model_fields_set)


def expand(exp: Experiment, source: str = "experiment") -> Experiment:
    """The experiment with each arena workload's grid replaced by its cells, in place of the workload, in run order."""
    out = {}
    for name, wl in exp.workloads.items():
        if not has_grid(wl):
            out[name] = wl
            continue
        if (wl.kind or "single") != "arena":
            raise ValueError(
                f"{source}: workloads.{name}.grid is set, but the workload is not of kind arena; "
                f"set workloads.{name}.kind: arena, or remove grid."
            )
        base = wl.model_dump(exclude_unset=True, exclude={"grid", *AXES})
        for cell in cells(name, wl, source):
            cname = cell_name(name, cell)
            if cname in exp.workloads:
                raise ValueError(
                    f"{source}: workloads.{name}.grid makes a cell named {cname!r}, which is also a "
                    f"workload of its own; rename one."
                )
            out[cname] = Workload.model_validate({**base, **cell})
    if out.keys() == exp.workloads.keys():
        return exp
    return exp.model_copy(update={"workloads": out})


def context_problems(exp: Experiment, context_of) -> list[str]:
    """Arena cells whose depth + prompt_tokens + tokens exceed an arm's served context, where it is known.

    context_of(arm_name) gives (tokens, where that number comes from) or None (unknown here)."""
    out = []
    for arm_name in exp.arms:
        ctx = context_of(arm_name)
        if ctx is None:
            continue
        limit, where = ctx
        over = []
        for name, wl in exp.workloads.items():
            if (wl.kind or "single") != "arena":
                continue
            c = {a: getattr(wl, a) if getattr(wl, a) is not None else DEFAULTS[a] for a in AXES}
            need = c["depth"] + c["prompt_tokens"] + c["tokens"]
            if need > limit:
                over.append((name, c, need))
        if over:
            names = ", ".join(
                f"{n} ({c['depth']} + {c['prompt_tokens']} + {c['tokens']} = {need:,})" for n, c, need in over[:4]
            ) + (f" and {len(over) - 4} more" if len(over) > 4 else "")
            fit = limit - max(c["prompt_tokens"] + c["tokens"] for _, c, _ in over)
            out.append(
                f"arena cell(s) {names} need more tokens than the {limit:,}-token context of arm "
                f"{arm_name!r} ({where}): depth + prompt_tokens + tokens must fit. Leave out depths above "
                f"{max(fit, 0):,} (the grid's depth list, or depth), or serve a longer context "
                f"(arms.{arm_name}.server.context_length)."
            )
    return out
