"""The strict, frozen base model every lockgen model derives from, and a model's value rebuilt from its JSON dump
without validation (`rebuilt`: for a value the models accepted once, kept by its input's bytes)."""

from __future__ import annotations

import datetime as dt
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict about unknown fields; transformations return new values."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)


def rebuilt(model: type[M], dumped: object) -> M | None:
    """The value of `model` whose `model_dump(mode="json")` is `dumped`, built field by field from the fields' types
    without validating anything (`model_construct`, no validator built); None where a field's type is one this
    does not rebuild (a union of two models, a type JSON does not hold as itself). It trusts `dumped` to be such a
    dump: a caller keeps a dump to rebuild only after finding `rebuilt(model, dump) == value` for the value the
    models accepted (`kept_inputs.keep_spec`), so what is rebuilt later is that value, field for field."""
    try:
        return _rebuilt(model, dumped)  # type: ignore[no-any-return]
    except _NotRebuilt:
        return None


M = TypeVar("M", bound=BaseModel)


_SCALARS = (str, int, float, bool)
_FIELD_TYPES: dict[type[BaseModel], dict[str, Any]] = {}
_SHAPES: dict[Any, tuple[Any, tuple[Any, ...]]] = {}  # each type's origin and arguments, asked once


def _field_types(model: type[BaseModel]) -> dict[str, Any]:
    """Each field's type, by name, once per model (pydantic's `model_fields` is slow to ask: 40 µs a time)."""
    if model not in _FIELD_TYPES:
        _FIELD_TYPES[model] = {name: field.annotation for name, field in model.__pydantic_fields__.items()}
    return _FIELD_TYPES[model]


class _NotRebuilt(Exception):
    """A value of a type `rebuilt` does not rebuild, or a dump not of its type's shape."""


def _rebuilt(kind: Any, value: Any) -> Any:
    shape = _SHAPES.get(kind)
    if shape is None:
        shape = _SHAPES[kind] = (get_origin(kind), get_args(kind))
    origin, arguments = shape
    if origin is Annotated:
        return _rebuilt(arguments[0], value)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        fields = _field_types(kind)
        if not isinstance(value, dict) or not value.keys() <= fields.keys():
            raise _NotRebuilt
        return kind.model_construct(**{name: _rebuilt(fields[name], item) for name, item in value.items()})
    if origin in (Union, UnionType):
        if value is None and type(None) in arguments:
            return None
        members = [member for member in arguments if member is not type(None)]
        if len(members) == 1:
            return _rebuilt(members[0], value)
        if all(member in (dt.date, dt.datetime) for member in members) and isinstance(value, str):
            return dt.datetime.fromisoformat(value) if "T" in value else dt.date.fromisoformat(value)
        if type(value) in members and all(member in _SCALARS for member in members):
            return value  # a scalar of one of the union's scalar types: JSON holds it as itself
        raise _NotRebuilt
    if origin is tuple and isinstance(value, list):
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_rebuilt(arguments[0], item) for item in value)
        if len(arguments) != len(value):
            raise _NotRebuilt
        return tuple(_rebuilt(member, item) for member, item in zip(arguments, value))
    if origin is list and isinstance(value, list):
        return [_rebuilt(arguments[0], item) for item in value]
    if origin is dict and isinstance(value, dict):
        return {_rebuilt(arguments[0], key): _rebuilt(arguments[1], item) for key, item in value.items()}
    if origin is Literal or kind in _SCALARS:
        return value  # JSON holds these as themselves (a float dumped whole is read back a float: `1.0`)
    raise _NotRebuilt
