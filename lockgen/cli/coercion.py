"""Each command-line value converted without pydantic where typer's conversion is plain. Typer (0.2x) converts every
parameter through a pydantic `TypeAdapter` it builds on first use, which imports pydantic (about 0.1 s of CPU) in
every command, those that use no model included (a repeated materialize, `check --lock` on a kept verdict). The
parameters lockgen declares are plain: `str`, `Path`, `bool`, `int`, `float`, lists of them, with no parser and no
checks
beyond typer's defaults. For those this gives typer the result its adapter gives a `str` (a `Path` through typer's
own path checks; an `int` or `float` only from plain digits), and hands every other value, annotation or typer
to typer's own conversion. These are typer's private parts (`typer._coercion`, `typer._param_types`), so
pyproject.toml bounds typer to the minor they are tested with; a typer without them (before 0.2x: click converts,
with no pydantic) is left as it is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # an older typer: click converts, nothing to do
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
_NO = object()  # a value this conversion leaves to typer's


def _leaf(kind: type, value: Any, param: Any, ctx: Any) -> Any:
    """`value` converted as typer's adapter converts it for `kind`, or `_NO`."""
    if kind is str:
        return value if isinstance(value, str) else _NO
    if kind is Path:
        if not isinstance(value, (str, Path)) or "\x00" in str(value):  # typer's refusal of a NUL is its own
            return _NO
        return coerce_cli_path(Path(value), param.type_descriptor.parameter_info, path_type=Path, param=param, ctx=ctx)
    if kind is bool or isinstance(value, bool):
        return value if isinstance(value, bool) and kind is bool else _NO
    if isinstance(value, kind):
        return value
    pattern = _INT if kind is int else _FLOAT
    return kind(value) if isinstance(value, str) and pattern.fullmatch(value) else _NO


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        """A plain parameter's conversion: one kind, or a list of it."""

        kind: type
        many: bool

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                items = [_leaf(self.kind, v, param, ctx) for v in value] if isinstance(value, (list, tuple)) else [_NO]
                if _NO not in items:
                    return items
            else:
                converted = _leaf(self.kind, value, param, ctx)
                if converted is not _NO:
                    return converted
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)


def _plain_kind(descriptor: Any) -> tuple[type, bool] | None:
    """(kind, is a list) of a parameter typer would convert plainly, or None."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    many = get_origin(annotation) is list
    kind = get_args(annotation)[0] if many else annotation
    plain = kind in (str, Path, bool, int, float) and descriptor.file_annotation is None and info.parser is None
    bounded = info.min is not None or info.max is not None or info.clamp or info.path_type is not None
    return (kind, many) if plain and not bounded else None


def install(command: object) -> None:
    """Gives every plain parameter of `command` and its sub-commands the conversion above (the help option too,
    which typer makes when a command is parsed)."""
    if RuntimeParam is None:
        return
    for param in getattr(command, "params", []):
        _give(param)
    made = getattr(command, "get_help_option", None)
    if made is not None:

        def get_help_option(ctx: Any, made: Any = made) -> Any:
            option = made(ctx)
            if option is not None:
                _give(option)
            return option

        command.get_help_option = get_help_option  # type: ignore[attr-defined]
    for sub in getattr(command, "commands", {}).values():
        install(sub)


def _give(param: Any) -> None:
    chosen = _plain_kind(param.type_descriptor) if hasattr(param, "type_descriptor") else None
    if chosen is not None and getattr(param, "_runtime_param", "absent") is None:
        param._runtime_param = Plain(param.type_descriptor.parameter_info, param.type_descriptor.annotation, *chosen)
