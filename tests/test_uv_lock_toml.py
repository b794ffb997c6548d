"""The fast uv.lock reader (`adapters.foreign.uv_lock_toml`) against `tomllib`, the oracle: on generated locks in uv's
layout (strings holding `[[package]]`, ` = `, quotes, escapes, `#`, braces), on the shared corpus and the fixtures,
the two read the same document; on any mutation of a lock (a snippet of TOML syntax put in, a piece cut out), the
rewrite either hands the text to `tomllib` or reads what `tomllib` reads: it never admits a text `tomllib`
refuses or reads otherwise."""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.foreign import uv_lock_toml
from lockgen.adapters.foreign.uv_records import PACKAGE_KEYS
from lockgen.adapters.foreign.uv_lock import UvChoices, WalkedParts, read_uv_lock
from lockgen.adapters.foreign.uv_lock_toml import read_uv_pieces, read_uv_toml
from lockgen.errors import UserError
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
# a bare key; none holding `null`, which the rewrite hands to tomllib wherever it stands (uv writes no such key)
_KEY = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True).filter(lambda key: "null" not in key)


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
    assert uv_lock_toml._read_simple(text, chunk=1) == tomllib.loads(text)  # each package a piece of its own


def _in_pieces(text: str, cuts: list[float]) -> list[str]:
    """`text` cut at line ends near each of `cuts` (fractions of its length), some before a `[[package]]` line."""
    ends = sorted({text.find("\n", int(cut * len(text))) + 1 for cut in cuts} - {0, len(text)})
    ends += [at + 1 for at in range(len(text)) if text.startswith("\n[[package]]", at)][: len(cuts)]
    bounds = [0, *sorted(set(ends)), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(bounds) if end > start]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lock(_TEXT), st.lists(st.floats(0, 1), max_size=6), st.sampled_from([uv_lock_toml._CHUNK, 1, 40]))
def test_a_lock_read_in_pieces_reads_as_the_whole_text(text: str, cuts: list[float], chunk: int) -> None:
    """The import hands the reader the text in pieces (each let go of as it is read): cut anywhere at a line end,
    or before a `[[package]]` line (a piece then read alone), the packages read as from the whole text; where
    `tomllib` must read it, the text is got again whole."""
    pieces = _in_pieces(text, cuts)
    assert "".join(pieces) == text
    assert _outcome(lambda t: read_uv_pieces(pieces, lambda: t), text) == _outcome(tomllib.loads, text)
    assert not pieces  # every piece let go of
    try:
        whole = uv_lock_toml._read_simple(text, chunk=chunk)
    except (uv_lock_toml._NotSimple, ValueError, RecursionError):
        return
    assert uv_lock_toml._read_simple(_in_pieces(text, cuts), chunk=chunk) == whole


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
    for chunk in (uv_lock_toml._CHUNK, 1):  # the region whole, and each package a piece of its own
        try:
            fast = uv_lock_toml._read_simple(text, chunk=chunk)
        except (uv_lock_toml._NotSimple, ValueError, RecursionError):
            continue  # read_uv_toml hands it to tomllib
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


def test_a_large_lock_is_read_in_pieces_each_package_reduced_as_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 300k-package uv.lock was rewritten into JSON whole (four copies of 200 MiB at once) and held as the whole
    document: the region is read a piece at a time, each package handed to `reduce` as its piece is read, so no
    more than a piece's tables are ever held whole; the packages read alike, in the file's order."""
    text = 'version = 1\nrequires-python = ">=3.10"\n' + "".join(
        f'\n[[package]]\nname = "pkg{n}"\nversion = "1.0"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
        f'wheels = [\n    {{ url = "https://x/pkg{n}-1.0-py3-none-any.whl", hash = "sha256:{n:064x}" }},\n]\n'
        f'\n[package.metadata]\nrequires-dist = [{{ name = "a" }}]\n'
        for n in range(40)
    )
    pieces: list[int] = []
    as_json = uv_lock_toml._as_json
    monkeypatch.setattr(uv_lock_toml, "_as_json", lambda region: pieces.append(len(region)) or as_json(region))
    monkeypatch.setattr(uv_lock_toml, "_CHUNK", 1000)
    held: list[int] = []

    def reduce(package: dict[str, object]) -> str:
        held.append(len(pieces))  # the pieces read when this package was handed over
        return str(package["name"])

    document = read_uv_toml(text, reduce)
    assert document["package"] == [f"pkg{n}" for n in range(40)]
    assert len(pieces) > 5 and max(pieces) < 1400, pieces
    assert held == sorted(held) and held[0] == 1 and held[-1] == len(pieces)
    fallback = read_uv_toml(text.replace('version = "1.0"', "version = '1.0'"), reduce)  # literal strings: tomllib
    assert fallback["package"] == document["package"]


@pytest.mark.parametrize("source", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}"[-40:])
def test_the_walk_reads_the_same_lock_from_the_parts_kept(source: Path) -> None:
    """`WalkedParts` keeps of each package only what the walk reads, equal lists and tables held once: a 300k-package
    lock's document was 2.7 KiB a package, 1.7 so. Every choice's import reads the same from it as from the whole
    document (also where it is given away, each package's wheels let go of once pinned), and the kept lists and
    tables are shared where equal."""
    text = source.read_text()
    whole = tomllib.loads(text)
    kept = read_uv_toml(text, WalkedParts())
    assert {key: value for key, value in kept.items() if key != "package"} == {
        key: value for key, value in whole.items() if key != "package"
    }
    for choices in (UvChoices(), UvChoices(all_extras=True, all_groups=True), UvChoices(python="3.12")):
        try:
            expected = read_uv_lock(whole, choices)
        except UserError as refused:
            with pytest.raises(UserError, match=re.escape(refused.message)):
                read_uv_lock(kept, choices)
            continue
        assert read_uv_lock(kept, choices) == expected
        given = read_uv_toml(text, WalkedParts())  # as the import reads it, giving its document away
        assert read_uv_lock(given, choices, given_away=True) == expected
    edges = [id(edge) for entry in kept["package"] for edge in entry.get("dependencies", [])]
    distinct = {
        json.dumps(edge, sort_keys=True) for entry in whole["package"] for edge in entry.get("dependencies", [])
    }
    assert len(set(edges)) == len(distinct)  # one object per distinct edge
    assert all(set(entry) <= set(PACKAGE_KEYS) for entry in kept["package"])


@pytest.mark.parametrize("stray", ["\n,", "\n  ,\n", "\n,\nname = 1\n"])
def test_a_line_led_by_a_comma_is_read_by_tomllib(stray: str) -> None:
    """A line that starts with a comma (none in uv's layout) once vanished in the rewrite (`{` + blank lines + `,`
    reads as a table's first key): a lock tomllib refuses was read (hypothesis found it in CI)."""
    text = (
        'version = 1\nrevision = 2\nrequires-python = ">=3.10"\n\n[manifest]\nmembers = ["app"]\n\n[[package]]\n'
        'name = "pkg0"\nversion = ""\nsource = { registry = "" }\n\n[package.optional-dependencies]\n' + stray
    )
    with pytest.raises(uv_lock_toml._NotSimple):
        uv_lock_toml._read_simple(text)
    with pytest.raises(tomllib.TOMLDecodeError):
        read_uv_toml(text)
