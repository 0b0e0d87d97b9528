"""The package's floor plan holds: layers import only downwards, no circles, no imports hidden in functions.

Read from the source (ast), nothing imported: every module under workflow/bracket/, every import in it,
at module level or inside a function. A module belongs to the layer of the longest entry of LAYERS that
names it or a package above it; a layer may import its own and lower layers only (ARCHITECTURE.md draws
them). Folders are the layers' parts: an entry names a folder of the package or a module at its root, never a
module inside a folder, so every module of a folder stands in one layer; at folder scale, too, no import
runs up and no folders import each other round a circle. An import inside a function is how a circle hides, so one of a bracket module is refused unless
LOCAL_IMPORTS lists it with its reason; lazy imports of heavy third-party libraries are not this test's
business.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "bracket"

# -- layers (lowest first: a module may import its own layer and those above it in this list) --
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "foundation",
        "what every part shares: redaction, the shipped files, rule logs, raw records, the community's formats, "
        "and typed/: the experiment as the typed value every stage is handed (generated from the schema; pydantic "
        "only)",
        (
            "bracket",
            "bracket.secrets",
            "bracket.share",
            "bracket.rulelog",
            "bracket.rerun",
            "bracket.version",
            "bracket.records",
            "bracket.interop",
            "bracket.typed",
        ),
    ),
    ("cluster", "what a block asks of a scheduler, and the SLURM executor's names and states", ("bracket.cluster",)),
    ("embedded", "the out-of-the-box engine and model, built", ("bracket.embedded",)),
    ("wire", "server processes and one timed request on the wire", ("bracket.wire",)),
    ("engines", "one adapter per engine; launch, docker, attach", ("bracket.engines",)),
    (
        "physics",
        "the byte account from tensor headers, bandwidth, the ceiling, the host's steadiness",
        ("bracket.physics",),
    ),
    (
        "experiment",
        "the experiment file: schema, validation, design, prompts, what is checked before the first block",
        ("bracket.experiment",),
    ),
    ("stats", "statistics on tidy frames: a library, nothing of Snakemake or servers", ("bracket.stats",)),
    ("measure", "one server session and what runs beside it", ("bracket.measure",)),
    (
        "controls",
        "the controls: determinism, agreement, reproductions, corrections, the neutrality control",
        ("bracket.controls",),
    ),
    ("arena", "the Spark Arena / llama-benchy cell, run and read", ("bracket.arena",)),
    (
        "block",
        "a block: its servers, its requests, the arena's cells and the controls inside it",
        ("bracket.block",),
    ),
    ("article", "the article: presents what the analysis decided, and renders it", ("bracket.article",)),
    ("cli", "the bracket command", ("bracket.cli",)),
)
# -- end layers --

# (importing module, imported module): why the import is inside a function. Empty: every one was a circle's.
LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    ("bracket.wire.watchdog", "bracket.secrets"): (
        "the watchdog is a bare script that must start in tens of milliseconds with any Python while it watches; "
        "it loads the redaction only once the server is down"
    ),
}


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module
    path: Path
    line: int
    local: bool  # inside a function


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, for its __init__.py)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` loads: itself, or the package that holds the attribute it names."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges(known: dict[str, Path]) -> list[Edge]:
    out = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        local = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                local.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package that holds this module
                    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name != "bracket" and not name.startswith("bracket."):
                    continue
                target = _resolve(name, known)
                if target and target != module:
                    out.append(Edge(module, target, path, node.lineno, id(node) in local))
    return out


def layer_of(module: str) -> int | None:
    """Index in LAYERS of the longest entry naming `module` or a package above it (the root only by name)."""
    best, best_len = None, -1
    for i, (_, _, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            hit = module == p or (p != "bracket" and module.startswith(p + "."))
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _where(e: Edge) -> str:
    return f"{e.path.relative_to(ROOT)}:{e.line}"


KNOWN = modules()
EDGES = edges(KNOWN)


def test_every_module_has_a_layer():
    missing = [m for m in KNOWN if layer_of(m) is None]
    assert not missing, (
        f"{', '.join(missing)}: in no layer of the floor plan. Put each in the folder of the part it belongs to, "
        f"or add it to LAYERS in tests/test_layers.py (and to ARCHITECTURE.md's floor plan)."
    )


def test_no_import_runs_up_a_layer():
    up = []
    for e in EDGES:
        lo, hi = layer_of(e.source), layer_of(e.target)
        if lo is not None and hi is not None and hi > lo:
            up.append(
                f"{e.source} ({LAYERS[lo][0]}) imports {e.target} ({LAYERS[hi][0]}) at {_where(e)}: a lower layer "
                f"may not know a higher one. Move what it needs down into {LAYERS[lo][0]} or below, or have the "
                f"caller pass it in."
            )
    assert not up, "\n".join(up)


def test_no_circle():
    graph: dict[str, set[str]] = {}
    for e in EDGES:
        graph.setdefault(e.source, set()).add(e.target)
    found = cycles(graph)
    lines = []
    for comp in found:
        inside = sorted({f"{e.source} -> {e.target} ({_where(e)})" for e in EDGES if {e.source, e.target} <= set(comp)})
        lines.append(
            f"a circle of {len(comp)} modules: {', '.join(comp)}; its imports:\n    "
            + "\n    ".join(inside)
            + "\n  Open it by moving what both sides need into a module that imports neither."
        )
    assert not found, "\n".join(lines)


def test_no_bracket_import_hidden_in_a_function():
    hidden = [
        f"{e.source} imports {e.target} inside a function at {_where(e)}: import it at the top of the module; if "
        f"that makes a circle, move what both need to a lower module. A real reason to load it late goes into "
        f"LOCAL_IMPORTS in tests/test_layers.py."
        for e in EDGES
        if e.local and (e.source, e.target) not in LOCAL_IMPORTS
    ]
    assert not hidden, "\n".join(hidden)


def test_every_listed_local_import_still_exists():
    present = {(e.source, e.target) for e in EDGES if e.local}
    stale = [f"{a} -> {b}" for a, b in LOCAL_IMPORTS if (a, b) not in present]
    assert not stale, f"LOCAL_IMPORTS lists imports no module makes any more: {', '.join(stale)}; remove them."


def folder_of(module: str, known: dict[str, Path] = KNOWN) -> str:
    """The folder a module lies in: `bracket.X` for a module under workflow/bracket/X/, `bracket` for one at the root."""
    parts = module.split(".")
    if len(parts) < 2:
        return "bracket"
    top = ".".join(parts[:2])
    return top if known[top].name == "__init__.py" else "bracket"


def test_every_layer_entry_is_a_folder_or_a_module_at_the_root():
    inside = [
        p
        for _, _, prefixes in LAYERS
        for p in prefixes
        if p in KNOWN and p != "bracket" and folder_of(p) != p and folder_of(p) != "bracket"
    ]
    assert not inside, (
        f"LAYERS names modules inside a folder: {', '.join(inside)}. A folder stands in one layer: move the module "
        f"to a folder of its layer (or a new one) and name that folder in LAYERS and ARCHITECTURE.md's floor plan."
    )


def test_every_folder_stands_in_one_layer():
    layers: dict[str, set[str]] = {}
    for m in KNOWN:
        if layer_of(m) is not None:
            layers.setdefault(folder_of(m), set()).add(LAYERS[layer_of(m)][0])
    split = {f: sorted(names) for f, names in layers.items() if len(names) > 1}
    assert not split, f"folders whose modules stand in different layers: {split}; move the odd ones out."


def folder_graph(edges_: list[Edge], known: dict[str, Path] = KNOWN) -> dict[str, set[str]]:
    """Which folders each folder imports (its modules' imports of other folders' modules)."""
    graph: dict[str, set[str]] = {}
    for e in edges_:
        a, b = folder_of(e.source, known), folder_of(e.target, known)
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def test_no_folder_imports_one_above_it_or_round_a_circle():
    graph = folder_graph(EDGES)
    up = []
    for e in EDGES:
        a, b = folder_of(e.source), folder_of(e.target)
        if a == b:
            continue
        lo, hi = layer_of(a if a != "bracket" else e.source), layer_of(b if b != "bracket" else e.target)
        if lo is not None and hi is not None and hi > lo:
            up.append(f"{a}/ ({LAYERS[lo][0]}) imports {e.target} ({LAYERS[hi][0]}) at {_where(e)}")
    assert not up, "arrows up at folder scale:\n" + "\n".join(up)
    loops = [
        " -> ".join(comp)
        + ": "
        + "; ".join(
            sorted(
                {
                    f"{e.source} -> {e.target} ({_where(e)})"
                    for e in EDGES
                    if folder_of(e.source) in comp
                    and folder_of(e.target) in comp
                    and folder_of(e.source) != folder_of(e.target)
                }
            )
        )
        for comp in cycles(graph)
    ]
    assert not loops, "folders that import each other round a circle (move what both need lower):\n" + "\n".join(loops)


def test_every_layer_names_modules_that_exist():
    stale = [p for _, _, prefixes in LAYERS for p in prefixes if p not in KNOWN]
    assert not stale, f"LAYERS names modules that do not exist: {', '.join(stale)}; remove or rename them."


# ---- the checker itself, on a package written here ----------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = tmp_path / "bracket" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return modules(tmp_path / "bracket")


def test_the_checker_sees_relative_local_and_attribute_imports(tmp_path):
    known = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from bracket.b import thing\n",
            "b.py": "def f():\n    from . import a\n    return a\n",
            "sub/__init__.py": "",
            "sub/c.py": "from ..a import thing\nimport bracket.sub\nimport json\n",
        },
    )
    got = {(e.source, e.target, e.local) for e in edges(known)}
    assert got == {
        ("bracket.a", "bracket.b", False),  # the attribute `thing` resolves to its module
        ("bracket.b", "bracket.a", True),  # relative, inside a function
        ("bracket.sub.c", "bracket.a", False),
        ("bracket.sub.c", "bracket.sub", False),
    }
    assert cycles({"bracket.a": {"bracket.b"}, "bracket.b": {"bracket.a"}, "bracket.sub.c": {"bracket.a"}}) == [
        ["bracket.a", "bracket.b"]
    ]
    assert cycles({"x": {"y"}, "y": {"z"}}) == []


@pytest.mark.parametrize(
    ("module", "layer"),
    [("bracket", "foundation"), ("bracket.engines.vllm", "engines"), ("bracket.stats.cells", "stats")],
)
def test_a_module_is_in_the_layer_of_its_longest_entry(module, layer):
    assert LAYERS[layer_of(module)][0] == layer


def test_the_checker_sees_folders_that_import_each_other_without_a_circle_of_modules(tmp_path):
    known = _package(
        tmp_path,
        {
            "__init__.py": "",
            "root.py": "from bracket.x import a\n",
            "x/__init__.py": "",
            "x/a.py": "from bracket.y import b\n",
            "x/c.py": "",
            "y/__init__.py": "",
            "y/b.py": "",
            "y/d.py": "from bracket.x import c\n",
        },
    )
    found = edges(known)
    modules_graph: dict[str, set[str]] = {}
    for e in found:
        modules_graph.setdefault(e.source, set()).add(e.target)
    assert cycles(modules_graph) == []  # no module imports itself round a circle ...
    graph = folder_graph(found, known)
    assert graph == {"bracket": {"bracket.x"}, "bracket.x": {"bracket.y"}, "bracket.y": {"bracket.x"}}
    assert cycles(graph) == [["bracket.x", "bracket.y"]]  # ... but the folders x/ and y/ do
    assert [folder_of(m, known) for m in ("bracket", "bracket.root", "bracket.x", "bracket.x.a")] == [
        "bracket",
        "bracket",
        "bracket.x",
        "bracket.x",
    ]
