"""What every part of the results shares: a frozen model that names every key, and mappings that cannot change.

JSON has lists and objects; the results hold tuples and read-only mappings (`types.MappingProxyType`), so that
nothing handed on by `analyze` can be changed by whoever reads it. A value whose shape the results do not fix
(`Json`: a look's record, a block's provenance) is frozen the same way all the way down.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    WithJsonSchema,
    WrapSerializer,
)

K = TypeVar("K")
V = TypeVar("V")


class Result(BaseModel):
    """A part of stats.json: frozen, and no key it does not name."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _freeze_map(value: Mapping) -> Mapping:
    return MappingProxyType(dict(value))


def _thaw_map(value: Mapping, serialize) -> Any:
    return serialize(dict(value))  # the values serialised by their own type


#: A mapping that cannot be changed, written to JSON as an object (its keys in their order).
FrozenMap = Annotated[Mapping[K, V], AfterValidator(_freeze_map), WrapSerializer(_thaw_map)]


def freeze(value: Any) -> Any:
    """`value` with every list a tuple and every dict a read-only mapping, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON data of a `freeze`d value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


#: Any JSON value, frozen all the way down (`freeze`): for records whose shape another part of bracket owns.
Json = Annotated[
    JsonValue, AfterValidator(freeze), PlainSerializer(thaw), WithJsonSchema({"description": "any JSON value"})
]


def field(description: str, **kw: Any) -> Any:
    """A field with its description (every field of the results has one)."""
    return Field(description=" ".join(description.split()), **kw)
