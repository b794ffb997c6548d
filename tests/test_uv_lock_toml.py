"""The fast uv.lock reader (`adapters.foreign.uv_lock_toml`) against `tomllib`, the oracle: on generated locks in uv's
layout (strings holding `[[package]]`, ` = `, quotes, escapes, `#`, braces), on the shared corpus and the fixtures,
the two read the same document; on any mutation of a lock (a snippet of TOML syntax put in, a piece cut out), the
rewrite either hands the text to `tomllib` or reads what `tomllib` reads: it never admits a text `tomllib`
refuses or reads otherwise."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.foreign import uv_lock_toml
from lockgen.adapters.foreign.uv_lock_toml import read_uv_toml
from tests.conftest import has_shared, shared_dir

_TRICKY = [
    "[[package]]",
    " = ",
    "#",
    "'",
    '"',
    "\\",
    "{",
    "}",
    ", ]",
    "[ ,",
    "\n",
    "\t",
    "é",
    "\u2028",
    "\x7f",
    "null",
    "1e5",
    "'''",
    '"""',
]
_TEXT = st.lists(
    st.one_of(st.sampled_from(_TRICKY), st.text(alphabet="abcXYZ09-_.:/=<>!~ ", max_size=12)), max_size=5
).map("".join)
_SAFE = st.text(alphabet="abcxyz0189-_.:/=<>!~ '", max_size=20).filter(lambda s: " = " not in s)
_KEY = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)


def _string(text: str) -> str:
    """A TOML basic string of `text`, written as uv writes one (JSON's escapes are TOML's, but `\\u007f`)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(strings: st.SearchStrategy[str], depth: int = 2) -> st.SearchStrategy[str]:
    leaves = st.one_of(strings.map(_string), st.integers(-(2**40), 2**40).map(str), st.sampled_from(["true", "false"]))
    if depth == 0:
        return leaves
    inner = _value(strings, depth - 1)
    table = st.dictionaries(_KEY, inner, max_size=3).map(
        lambda d: "{ " + ", ".join(f"{k} = {v}" for k, v in d.items()) + " }" if d else "{}"
    )
    array = st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
    return st.one_of(leaves, table, array)


@st.composite
def _lock(draw: st.DrawFn, strings: st.SearchStrategy[str]) -> str:
    """A uv.lock of uv's layout: the preamble, packages with one-line and multi-line arrays and sub-tables."""
    parts = ['version = 1\nrevision = 2\nrequires-python = ">=3.10"\n\n[manifest]\nmembers = ["app"]\n']
    for number in range(draw(st.integers(1, 4))):
        lines = [
            f'\n[[package]]\nname = "pkg{number}"\nversion = {_string(draw(strings))}\nsource = {{ registry = '
            f"{_string(draw(strings))} }}"
        ]
        for key, value in draw(
            st.dictionaries(_KEY.filter(lambda k: k not in ("name", "version", "source")), _value(strings), max_size=3)
        ).items():
            lines.append(f"{key} = {value}")
        if draw(st.booleans()):
            items = draw(st.lists(_value(strings, 1), max_size=3))
            lines.append("wheels = [\n" + "".join(f"    {item},\n" for item in items) + "]")
        for table in draw(
            st.lists(
                st.sampled_from(["optional-dependencies", "metadata", "dev-dependencies"]), unique=True, max_size=2
            )
        ):
            body = draw(st.dictionaries(_KEY, _value(strings, 1), max_size=2))
            lines.append(f"\n[package.{table}]\n" + "".join(f"{k} = {v}\n" for k, v in body.items()).rstrip("\n"))
            if table == "metadata" and draw(st.booleans()):
                lines.append(f"\n[package.metadata.requires-dev]\ndev = [{_string(draw(strings))}]")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def _outcome(read, text: str) -> tuple[str, object]:
    try:
        return "read", read(text)
    except tomllib.TOMLDecodeError:
        return "refused", None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lock(_TEXT))
def test_any_generated_lock_reads_as_tomllib_reads_it(text: str) -> None:
    assert _outcome(read_uv_toml, text) == _outcome(tomllib.loads, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lock(_SAFE))
def test_a_lock_in_uvs_layout_takes_the_fast_path(text: str) -> None:
    """The rewrite reads these itself (no fallback), so the tests above and below test it, not tomllib twice."""
    assert uv_lock_toml._read_simple(text) == tomllib.loads(text)


_SNIPPETS = [
    "[[package]]",
    "[package.x]",
    "[package.metadata.y]",
    " = ",
    "=",
    "a = 1",
    ",",
    "[",
    "]",
    "{",
    "}",
    '"',
    "'",
    "\\",
    "#",
    "\n",
    " ",
    "\t",
    "\r",
    "1.5",
    "nan",
    "null",
    "true",
    "1_0",
    "01",
    "+1",
    "a.b = 1",
    '"k" = 1',
    '"""',
    "\\u12",
    "\\ud800",
    "\\udc00",
    "\\uDFFF",
    "\\U0001F600",
    "NaN",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _lock(_SAFE),
    st.lists(st.tuples(st.floats(0, 1), st.sampled_from(_SNIPPETS), st.integers(0, 3)), min_size=1, max_size=3),
)
def test_a_mutated_lock_is_read_as_tomllib_reads_it_or_handed_to_it(
    text: str, edits: list[tuple[float, str, int]]
) -> None:
    for where, snippet, cut in edits:
        at = int(where * len(text))
        text = text[:at] + snippet + text[at + cut :]
    try:
        fast = uv_lock_toml._read_simple(text)
    except (uv_lock_toml._NotSimple, ValueError, RecursionError):
        return  # read_uv_toml hands it to tomllib
    assert fast == tomllib.loads(text)  # and tomllib raises nothing where the rewrite admitted the text


FIXTURES = [
    *sorted((Path(__file__).parent / "fixtures").rglob("uv.lock")),
    *(sorted(shared_dir().glob("corpus/*uv.lock")) if has_shared() else []),
]


@pytest.mark.parametrize("source", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}"[-40:])
def test_the_fixture_and_corpus_locks_read_as_tomllib_reads_them(source: Path) -> None:
    text = source.read_text()
    assert uv_lock_toml._read_simple(text) == tomllib.loads(text)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udbff", "\\udc00", "\\uDFFF"])
def test_an_escaped_surrogate_is_refused_as_tomllib_refuses_it(escape: str) -> None:
    """A `\\uXXXX` naming a surrogate (high or low) is no Unicode scalar value: tomllib refuses it, and so does the
    fast reader's rule, handing the text to tomllib (a review found low surrogates read as lone characters)."""
    text = (
        f'version = 1\nrequires-python = ">=3.11"\n\n[[package]]\nname = "a{escape}"\nversion = "1.0"\nsource = {{ '
        'registry = "https://pypi.org/simple" }\n'
    )
    with pytest.raises(uv_lock_toml._NotSimple):
        uv_lock_toml._read_simple(text)
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
