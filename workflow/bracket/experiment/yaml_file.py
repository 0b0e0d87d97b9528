"""The experiment file read as YAML, within bounds a hostile file cannot pass: its size, the values its aliases
expand to, and no key written twice in one mapping. Nothing is built before the nodes are checked.

bracket.experiment.config.read_yaml wraps `read` and says its refusals as an ExperimentError.
"""

from __future__ import annotations

from pathlib import Path

import yaml


class FileRefused(ValueError):
    """An experiment file too large, too deep, or with a key written twice; the message says what to change."""


# An experiment file is a few kilobytes; these bound what a hostile one can cost before validation says no.
MAX_FILE_BYTES = 1_000_000
MAX_NODES = 100_000  # values after aliases are expanded (an alias bomb of 600 bytes expands to billions)
# libyaml's loader where PyYAML has it: composing a 1 MB file takes about a second in C, three in Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


def _children(n) -> list:
    if isinstance(n, yaml.SequenceNode):
        return n.value
    if isinstance(n, yaml.MappingNode):
        return [c for pair in n.value for c in pair]
    return []


def _check_size(node) -> None:
    """The values `node` expands to, aliases included, counted before any is built: more than MAX_NODES is refused."""
    sizes: dict[int, int] = {}

    def size(n) -> int:  # memoised by node: an alias is the same node object, counted once per use
        if id(n) not in sizes:
            sizes[id(n)] = -1  # a recursive alias counts as too large below
            total = 1
            for c in _children(n):
                s = size(c)
                total = MAX_NODES + 1 if s < 0 else min(total + s, MAX_NODES + 1)
            sizes[id(n)] = total
        return sizes[id(n)]

    if size(node) > MAX_NODES:
        raise FileRefused(
            f"it expands to more than {MAX_NODES:,} values (aliases `*name` repeat what "
            f"an anchor `&name` holds); an experiment needs a few hundred: write the "
            f"values out, or use fewer aliases."
        )


def _check_duplicates(node) -> None:
    """A key written twice in one mapping, at any level, refused with both lines: YAML would keep the last one and
    drop the first without a word (`runs_per_block: 3` then `50` ran 50). Keys a merge (`<<: *anchor`) brings in
    may be overridden, as YAML means them to be; only keys written in the mapping itself count."""
    keys = yaml.constructor.SafeConstructor()
    seen: set[int] = set()

    def where(path: tuple) -> str:
        return "under " + ".".join(path) if path else "at the top level"

    def walk(n, path: tuple) -> None:
        if id(n) in seen:  # an alias: its node was checked where its anchor stands
            return
        seen.add(id(n))
        if isinstance(n, yaml.SequenceNode):
            for i, c in enumerate(n.value):
                walk(c, (*path, f"[{i}]"))
            return
        if not isinstance(n, yaml.MappingNode):
            return
        first: dict = {}
        for k, v in n.value:
            if k.tag == _MERGE or not isinstance(k, yaml.ScalarNode):
                walk(v, path)
                continue
            try:
                key = keys.construct_object(k)
                hash(key)
            except (yaml.YAMLError, TypeError):
                key = (k.tag, k.value)
            if key in first:
                a, b = first[key].start_mark, k.start_mark
                at = (
                    f"line {b.line + 1}, columns {a.column + 1} and {b.column + 1}"
                    if a.line == b.line
                    else f"lines {a.line + 1} and {b.line + 1}"
                )
                raise FileRefused(
                    f"key {k.value!r} appears twice {where(path)} ({at}); YAML would keep the second and drop the "
                    f"first without a word. Keep one {k.value!r}: delete the other, or merge what the two hold."
                )
            first[key] = k
            walk(v, (*path, str(k.value)))

    walk(node, ())


def read(path: str | Path):
    """The experiment file's YAML, within MAX_FILE_BYTES and MAX_NODES and without a key written twice in one
    mapping; FileRefused (one line, naming the file) otherwise, yaml.YAMLError where it is not YAML."""
    path = Path(path)
    nbytes = path.stat().st_size
    if nbytes > MAX_FILE_BYTES:
        raise FileRefused(
            f"{path}: {nbytes:,} bytes, more than an experiment file may hold "
            f"({MAX_FILE_BYTES:,}); prompts go in prompt files (workloads.NAME.prompts)."
        )
    loader = _LOADER(path.read_text())
    try:
        node = loader.get_single_node()  # the nodes only: aliases are shared nodes, nothing is expanded yet
        if node is None:
            return None
        _check_size(node)
        _check_duplicates(node)
        return loader.construct_document(node)
    except FileRefused as exc:
        raise FileRefused(f"{path}: {exc}") from None
    except RecursionError:
        raise FileRefused(f"{path}: nested too deeply to read; an experiment is a few levels deep.") from None
    finally:
        loader.dispose()
