"""JSON documents lockgen carries whole without a record of their own: the kernel's stack report and telemetry,
the expectations it is given, signed certificate files and attestation statements before their models read them.

`JsonObject` is a JSON object, checked as JSON where pydantic reads it (`pydantic.JsonValue`: text, numbers,
booleans, null, lists and objects, nothing else); a reader takes a value out through `object_at`, `list_at` and
`text_at`, which give an empty object, an empty list or None where the document holds another kind of value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["JsonObject", "JsonValue", "as_object", "list_at", "object_at", "text_at"]

if TYPE_CHECKING:
    from pydantic import JsonValue

    JsonObject = dict[str, JsonValue]


def __getattr__(name: str) -> Any:
    """`JsonValue` and `JsonObject`, made when first asked for (pydantic's, for the models that read them): a reader
    that takes values out (`fleet status` on kept verdicts, the signatures) imports no pydantic."""
    if name not in ("JsonValue", "JsonObject"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pydantic import JsonValue

    globals().update(JsonValue=JsonValue, JsonObject=dict[str, JsonValue])
    return globals()[name]


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
