"""The experiment schema (workflow/schemas/experiment.schema.yaml): found, parsed once, and read by path.

The one description of every key, with its type, default and description; bracket.experiment.config validates an
experiment against it and bracket.stats.defaults reads the analysis' defaults from it, without loading the
validator.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from bracket.share import schema_path

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "experiment.schema.yaml"


def load_schema() -> dict:
    """The experiment schema, parsed once per process (a copy: callers may change it)."""
    path = _schema_file()
    stat = path.stat()
    return copy.deepcopy(_parsed_schema(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _parsed_schema(path: str, mtime_ns: int, size: int) -> dict:
    # Parsing the 40 kB schema with PyYAML's pure-Python loader takes about 0.2 s, and every validation and
    # every default (bracket.stats.defaults) reads it: libyaml's loader where PyYAML has it, and once per
    # version of the file (its mtime and size are the key, so an edited schema is read again).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path) as f:
        return yaml.load(f, Loader=loader)  # noqa: S506 - a safe loader, C or Python


def _schema_file() -> Path:
    """The schema beside the package in a clone; after `pip install .`, the installed copy (bracket.share)."""
    if SCHEMA_PATH.is_file():
        return SCHEMA_PATH
    return schema_path()


def schema_at(schema: dict, path: list) -> dict:
    """The schema node that describes the value at `path` (keys and indices, as jsonschema reports them); {} if none."""
    node = schema
    for part in path:
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node


def schema_of(*path: str) -> dict:
    """The schema node at `path` (property names; "*" for additionalProperties)."""
    node = load_schema()
    for part in path:
        node = node["additionalProperties"] if part == "*" else node["properties"][part]
    return node
