"""JSON documents lockgen carries whole without a record of their own: the kernel's stack report and telemetry,
the expectations it is given, signed certificate files and attestation statements before their models read them.

`JsonObject` is a JSON object, checked as JSON where pydantic reads it (`pydantic.JsonValue`: text, numbers,
booleans, null, lists and objects, nothing else); a reader takes a value out through `object_at`, `list_at` and
`text_at`, which give an empty object, an empty list or None where the document holds another kind of value."""

from __future__ import annotations

from pydantic import JsonValue

__all__ = ["JsonObject", "JsonValue", "as_object", "list_at", "object_at", "text_at"]

JsonObject = dict[str, JsonValue]


def object_at(document: JsonObject, key: str) -> JsonObject:
    """`document[key]` when it is an object, else (missing, or another kind) an empty one."""
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def list_at(document: JsonObject, key: str) -> list[JsonValue]:
    """`document[key]` when it is a list, else (missing, or another kind) an empty one."""
    value = document.get(key)
    return value if isinstance(value, list) else []


def text_at(document: JsonObject, key: str) -> str | None:
    """`document[key]` when it is text, else None."""
    value = document.get(key)
    return value if isinstance(value, str) else None


def as_object(value: JsonValue) -> JsonObject:
    """`value` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}
