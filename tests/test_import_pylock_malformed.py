"""A malformed pylock.toml is one refusal in lockgen's words: the key, by its place in the file, and the TOML type
that belongs there, exit 1 with a hint; never Python's words (`'str' object has no attribute`, `unhashable type`,
a KeyError) nor a traceback, whatever a key read from the file holds (hypothesis over edited documents)."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.foreign.foreign_locks import read_foreign
from lockgen.errors import LockgenError
from lockgen.model.requests import ImportOptions
from tests.conftest import run_cli

TINY = Path(__file__).parent / "fixtures" / "foreign" / "pylock.tiny.toml"
PYTHONS_WORDS = (
    "object has no attribute",
    "unhashable",
    "not subscriptable",
    "not iterable",
    "KeyError",
    "TypeError",
    "NoneType",
    "expected string",
    "'str'",
    "'int'",
    "'dict'",
    "'list'",
    "Traceback",
)
SIX = "https://files.example.org/six-1.17.0-py2.py3-none-any.whl"


def _package(body: str) -> str:
    return f'lock-version = "1.0"\nrequires-python = ">=3.10"\n\n[[packages]]\n{body}\n'


@pytest.mark.parametrize(
    "text, place, expected",
    [
        (_package('name = "tool"\nvcs = "git"'), "packages[0].vcs", "is text, not a table"),
        (_package(f'name = "six"\nwheels = [{{ url = "{SIX}", hashes = "abc" }}]'), "hashes", "not a table of text"),
        (_package(f'name = "six"\nwheels = ["{SIX}"]'), "packages[0].wheels[0]", "is text, not a table"),
        (_package('version = "1.0"'), "packages[0]", "has no `name`"),
        (_package('name = "six"\nmarker = 5'), "packages[0].marker", "is a number, not text"),
        ('lock-version = "1.0"\nextras = [{ a = 1 }]\npackages = []\n', "extras[0]", "is a table, not text"),
        ('lock-version = "1.0"\npackages = "six"\n', "packages", "is text, not an array of tables"),
        (
            _package(f'name = "six"\nwheels = [{{ url = "{SIX}", hashes = {{ sha256 = "12" }} }}]'),
            "packages[0].wheels[0].hashes.sha256",
            "not a sha256",
        ),
    ],
    ids=["vcs-text", "hashes-text", "wheel-text", "no-name", "marker-number", "extras-table", "packages-text", "sha"],
)
def test_a_malformed_pylock_names_the_key_and_its_type(tmp_path: Path, text: str, place: str, expected: str) -> None:
    source = tmp_path / "pylock.toml"
    source.write_text(text)
    result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"), "--python", "3.11")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and place in lines[0] and expected in lines[0], lines[0]
    assert lines[1].startswith("hint: ") and not any(words in result.stderr for words in PYTHONS_WORDS)
    assert not (tmp_path / "t.yml").exists()


DELETE = object()  # in place of a value: the key is taken out
PLACES = [
    *[(key,) for key in ("lock-version", "requires-python", "extras", "dependency-groups", "default-groups")],
    ("environments",),
    ("packages",),
    *[("packages", index) for index in range(5)],
    *[
        ("packages", index, key)
        for index in range(5)
        for key in ("name", "version", "marker", "requires-python", "index", "wheels", "sdist", "vcs")
    ],
    *[("packages", index, "wheels", 0) for index in (0, 1, 3)],
    *[("packages", index, "wheels", 0, key) for index in (0, 1, 3) for key in ("url", "hashes")],
    *[("packages", index, "wheels", 0, "hashes", "sha256") for index in (0, 1, 3)],
    ("packages", 2, "sdist", "url"),
    ("packages", 4, "vcs", "type"),
    ("packages", 4, "vcs", "url"),
]
scalars = (
    # a text holding Python's words would be echoed, quoted, by a refusal in lockgen's words
    st.text(max_size=12).filter(lambda text: not any(words in text for words in PYTHONS_WORDS))
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.datetimes(min_value=datetime.datetime(1, 1, 1)).map(lambda when: when.replace(microsecond=0))
)
keys = st.sampled_from(["url", "name", "x"])
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=6
)


def _edited(document: dict, place: tuple, value: object) -> None:
    """`document` with the value at `place` replaced by `value` (or taken out); a place the edits before removed
    is left as it is."""
    holder: object = document
    for step in place[:-1]:
        holder = _child(holder, step)
        if holder is None:
            return
    last = place[-1]
    if isinstance(holder, dict) and isinstance(last, str):
        holder.pop(last, None) if value is DELETE else holder.__setitem__(last, value)
    elif isinstance(holder, list) and isinstance(last, int) and last < len(holder):
        holder.pop(last) if value is DELETE else holder.__setitem__(last, value)


def _child(holder: object, step: str | int) -> object:
    if isinstance(holder, dict) and isinstance(step, str):
        return holder.get(step)
    if isinstance(holder, list) and isinstance(step, int) and step < len(holder):
        return holder[step]
    return None


@given(st.lists(st.tuples(st.sampled_from(PLACES), values | st.just(DELETE)), min_size=1, max_size=3))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_edit_of_a_pylock_is_read_or_refused_in_lockgens_words(tmp_path: Path, edits: list) -> None:
    document = tomllib.loads(TINY.read_text())
    for place, value in edits:
        _edited(document, place, value)
    source = tmp_path / "pylock.toml"
    source.write_text(tomlkit.dumps(document))
    try:
        read_foreign(source, ImportOptions(python="3.11"))
    except LockgenError as refused:
        assert refused.exit_code == 1 and refused.hint, (str(refused), refused.hint)
        assert not any(words in f"{refused} {refused.hint}" for words in PYTHONS_WORDS), str(refused)
