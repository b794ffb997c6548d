"""The command line's values converted without pydantic (`lockgen.cli.coercion`) are exactly what typer's own
conversion gives, its errors included, for every kind of parameter lockgen declares and any text a user types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.cli.app import command

import typer._coercion as coercion_api  # the pinned typer has it (no skip)
from typer._click import Context
from typer._click.exceptions import BadParameter

BUILT: Any = command()
PARAMS = {
    (name, param.name): param
    for name in ("export", "verify", "gc", "check", "materialize")
    for param in BUILT.commands[name].params
}
KINDS = [
    ("materialize", "platform"),
    ("materialize", "prefix"),
    ("materialize", "as_json"),
    ("check", "allow_foreign"),
    ("gc", "roots"),
    ("export", "layers"),
    ("verify", "timeout"),
]
TEXT = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"[+-]?[0-9]{1,4}(\.[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["", "a\x00b", " 1", "1_0", "0x1", "1e3", "nan", "-0", "007", ".5", "/", "a//b/"]),
)


def _outcome(runtime: Any, value: Any, param: Any) -> tuple[str, Any]:
    try:
        converted = runtime.coerce(value, param=param, ctx=Context(BUILT))
        return "value", (type(converted), repr(converted))  # repr: `nan` is the same value, yet not ==
    except BadParameter as error:
        return "error", error.format_message()
    except ValueError as error:  # a NUL in a path: os.stat's own refusal, in both
        return "refused", str(error)


@pytest.mark.parametrize("where", KINDS)
def test_every_plain_parameter_has_the_conversion_without_pydantic(where: tuple[str, str]) -> None:
    assert type(PARAMS[where].get_runtime_param()).__name__ == "Plain"


@settings(max_examples=150, deadline=None)
@given(where=st.sampled_from(KINDS), text=TEXT, as_list=st.booleans(), as_path=st.booleans())
def test_values_convert_as_typer_converts_them(where: tuple[str, str], text: str, as_list: bool, as_path: bool) -> None:
    param = PARAMS[where]
    many = param.multiple or param.nargs == -1
    value: Any = Path(text) if as_path else text
    value = (value, value) if many and as_list else value
    own = coercion_api.build_runtime_param(param.type_descriptor)
    assert _outcome(param.get_runtime_param(), value, param) == _outcome(own, value, param)


@pytest.mark.parametrize("value", [None, True, False, 3, 2.5, (), ["a"]])
def test_values_that_are_not_text_convert_as_typer_converts_them(value: Any) -> None:
    for param in PARAMS.values():
        own = coercion_api.build_runtime_param(param.type_descriptor)
        assert _outcome(param.get_runtime_param(), value, param) == _outcome(own, value, param), param.name


def test_typer_is_pinned_to_the_minor_whose_private_parts_lockgen_uses() -> None:
    """lockgen/cli uses typer's private conversion and help parts, which typer 0.x moves between minors: the
    dependency is bounded to one minor, the installed typer is in it, and the parts are there."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    from lockgen.cli import coercion
    from tests.conftest import REPO

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    typer_dep = next(Requirement(d) for d in pyproject["project"]["dependencies"] if Requirement(d).name == "typer")
    bounds = {clause.operator: Version(clause.version) for clause in typer_dep.specifier}
    assert set(bounds) == {">=", "<"} and bounds["<"].release[:2] == (bounds[">="].major, bounds[">="].minor + 1), (
        typer_dep
    )
    assert Version(importlib.metadata.version("typer")) in typer_dep.specifier
    assert coercion.RuntimeParam is not None and "_usage_display_name" in dir(BUILT.commands["resolve"].params[0])
