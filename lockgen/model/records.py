"""Plain frozen records (the dataclasses of `model/spec.py` and `model/facts.py`) as JSON documents and back, for a
value kept by its input's bytes (`kept_inputs`): `record_document` writes a record's fields by name, and
`record_from_document` builds the record of such a document from its fields' types without a validator, refusing
(`NotRebuilt`) any value not of its field's type. It imports nothing but the standard library.

What it trusts: that a document was written by `record_document` of a value the boundary's validator accepted; the
keeper checks, before it keeps one, that the document rebuilds that very value (`kept_inputs._keep_record`). The
type checks here catch a kept file of another shape, not a forged one."""

from __future__ import annotations

import datetime as dt
import typing
from dataclasses import fields, is_dataclass
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

R = TypeVar("R")


class NotRebuilt(Exception):
    """A document not of its record's shape, or a field's type this module does not rebuild."""


def record_document(value: object) -> Any:
    """A record (dataclasses within, tuples, mappings, dates and JSON's scalars) as plain JSON values."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: record_document(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, tuple | list):
        return [record_document(item) for item in value]
    if isinstance(value, dict):
        return {key: record_document(item) for key, item in value.items()}
    if isinstance(value, dt.date):  # a datetime is a date: both write their ISO text
        return value.isoformat()
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise TypeError(f"a record's field of type {type(value).__name__} has no JSON document")


def record_from_document(kind: type[R], document: object) -> R:
    """The record of type `kind` whose `record_document` is `document`; `NotRebuilt` where it is not one."""
    try:
        return _rebuilt(kind, document)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:  # a record's own refusal, a date's text that is none
        raise NotRebuilt(str(exc)) from None


_HINTS: dict[type, dict[str, Any]] = {}  # each record's fields' types, resolved once per process
_SCALARS = (str, int, float, bool)


def _field_types(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


def _rebuilt(kind: Any, value: Any) -> Any:
    origin, arguments = get_origin(kind), get_args(kind)
    if isinstance(kind, type) and is_dataclass(kind):
        types = _field_types(kind)
        names = {item.name for item in fields(kind)}
        if type(value) is not dict or value.keys() != names:  # every field, as `record_document` writes: a kept
            raise NotRebuilt(f"a {kind.__name__} document of another shape")  # value is never completed by defaults
        return kind(**{name: _rebuilt(types[name], item) for name, item in value.items()})
    if origin in (Union, UnionType):
        if value is None and type(None) in arguments:
            return None
        members = [member for member in arguments if member is not type(None)]
        if len(members) == 1:
            return _rebuilt(members[0], value)
        if set(members) == {dt.date, dt.datetime} and type(value) is str:
            return dt.datetime.fromisoformat(value) if "T" in value else dt.date.fromisoformat(value)
        if type(value) in members and all(member in _SCALARS for member in members):
            return value
        raise NotRebuilt(f"no member of {kind} holds {type(value).__name__}")
    if origin is tuple and type(value) is list:
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_rebuilt(arguments[0], item) for item in value)
        raise NotRebuilt(f"a tuple of fixed length, {kind}, is not rebuilt")
    if origin is dict and type(value) is dict:
        return {_rebuilt(arguments[0], key): _rebuilt(arguments[1], item) for key, item in value.items()}
    if origin is Literal and value in arguments:
        return value
    if kind in _SCALARS and type(value) is kind:
        return value
    raise NotRebuilt(f"{type(value).__name__} where {kind} was kept")
