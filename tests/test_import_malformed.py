"""A malformed uv.lock, pixi.lock or conda-lock.yml is one refusal in lockgen's words, as a pylock.toml is
(`test_import_pylock_malformed`): the key by its place in the file and the type that belongs there, exit 1 with a
hint; never Python's words (`'list' object has no attribute 'lower'`, `unhashable type`, `argument of type 'bool'
is not iterable`, pydantic's `instance of LockedPackage`) nor a traceback, whatever a key holds (hypothesis over
edits of each format's tiny file, any key or item replaced by another value or taken out)."""

from __future__ import annotations

import copy
import datetime
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomlkit
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.foreign.foreign_locks import read_foreign
from lockgen.errors import LockgenError
from lockgen.model.requests import ImportOptions
from tests.conftest import run_cli
from tests.test_import_formats import CONDA_LOCK
from tests.test_import_pylock_malformed import PYTHONS_WORDS

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
WORDS = (*PYTHONS_WORDS, "instance of", "valid tuple", "Input should", "Field required", "StopIteration")
FORMATS = {
    "uv": ("uv.lock", tomllib.loads((FOREIGN / "tiny.uv.lock").read_text()), ImportOptions(python="3.11")),
    "pixi": ("pixi.lock", yaml.safe_load((FOREIGN / "tiny.pixi.lock").read_text()), ImportOptions()),
    "conda-lock": ("conda-lock.yml", yaml.safe_load(CONDA_LOCK), ImportOptions()),
}


def _places(value: object, at: tuple = ()) -> Iterator[tuple]:
    """Every key and item of a document, by its path."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield (*at, key)
        yield from _places(item, (*at, key))


DELETE = object()  # in place of a value: the key or item is taken out
scalars = (
    st.text(max_size=8)
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.datetimes(min_value=datetime.datetime(2000, 1, 1)).map(lambda when: when.replace(microsecond=0))
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["url", "name", "x"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def _written(kind: str, document: dict, folder: Path) -> Path:
    name, _, _ = FORMATS[kind]
    path = folder / name
    path.write_text(tomlkit.dumps(document) if kind == "uv" else yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("kind", sorted(FORMATS))
@given(data=st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_edit_is_read_or_refused_in_lockgens_words(kind: str, tmp_path: Path, data: st.DataObject) -> None:
    _, original, options = FORMATS[kind]
    document = copy.deepcopy(original)
    for _ in range(data.draw(st.integers(1, 2))):
        place = data.draw(st.sampled_from(list(_places(document))))
        holder = document
        for step in place[:-1]:
            holder = holder[step]
        value = data.draw(values | st.just(DELETE) | (st.just(None) if kind != "uv" else st.nothing()))
        if value is DELETE:
            holder.pop(place[-1])
        else:
            holder[place[-1]] = value
    try:
        path = _written(kind, document, tmp_path)
    except (TypeError, ValueError):  # a document the writer cannot write (a TOML array of mixed tables and values)
        return
    try:
        read_foreign(path, options)
    except LockgenError as refused:
        assert refused.exit_code == 1 and refused.hint, (str(refused), refused.hint)
        assert not any(words in f"{refused} {refused.hint}" for words in WORDS), str(refused)


def _uv(edit: str) -> str:
    return (FOREIGN / "tiny.uv.lock").read_text().replace('{ name = "six" }', edit)


UV_FIRST_OUT_OF_SHAPE = """version = 1
requires-python = ">=3.10"

[[package]]
name = "app"
version = "0.1.0"
source = { virtual = "." }
dependencies = [{ name = "a" }, { name = "c" }]

[[package]]
name = "a"
version = "1.0"
source = { registry = "https://pypi.org/simple" }
wheels = [{ url = "https://f/a-1.0-py3-none-any.whl", hash = "sha256:%s" }]

[package.dev-dependencies]
dev = [{ name = "z", marker = 3 }]

[[package]]
name = "c"
version = "1.0"
source = { registry = "https://pypi.org/simple" }
wheels = [5]
""" % ("ab" * 32)


@pytest.mark.parametrize(
    "kind, text, expected",
    [
        ("uv", _uv('{ name = ["six"] }'), "the uv.lock's `package[0].dependencies[0].name` is an array, not text"),
        ("uv", _uv('{ marker = "x" }'), "the uv.lock's `package[0].dependencies[0]` has no `name` (text)"),
        ("uv", _uv('"six"'), "the uv.lock's `package[0].dependencies[0]` is text, not a table"),
        (  # judged after the packages, whose wheels the reader keeps as text (`KeptWheels`): they are in shape
            "uv",
            _uv('{ name = "six" }').replace('requires-python = ">=3.10"', 'requires-python = ">=3.10"\nconflicts = 1'),
            "the uv.lock's `conflicts` is a number, not an array of arrays of tables",
        ),
        (
            "pixi",
            (FOREIGN / "tiny.pixi.lock")
            .read_text()
            .replace("  md5: bbbb", "  md5: [bbbb", 1)
            .replace("bbbb\n", "]\n", 1),
            "the pixi.lock's `packages[0].md5` is a list, not text",
        ),
        (
            "pixi",
            (FOREIGN / "tiny.pixi.lock")
            .read_text()
            .replace("environments:\n  default:", "environments:\n  default: 1\n  x:"),
            "the pixi.lock's `environments.default` is a number, not a mapping",
        ),
        ("uv", _uv('{ name = "six" }').replace("version = 1\n", "version = 2020-01-01\n", 1), "version a date or time"),
        (  # the reader trips on a later package's wheel after converting (and letting go of) the first's edges
            "uv",
            UV_FIRST_OUT_OF_SHAPE,
            "the uv.lock's `package[1].dev-dependencies.dev[0].marker` is a number, not text",
        ),
        ("conda-lock", CONDA_LOCK.replace("package:\n-", "package: 1.5\nx:\n-"), "`package` is a number, not a list"),
        ("conda-lock", CONDA_LOCK.replace("name: zlib", "name: [zlib]"), "`package[0].name` is a list, not text"),
        (  # a record the lock's dataclasses hold (pydantic's `dataclass_type`, its `unexpected_keyword_argument`)
            "conda-lock",
            CONDA_LOCK.replace("channels: [{url: conda-forge, used_env_vars: []}]", "channels: [1]"),
            "`metadata.channels[0]` is a number, not a mapping",
        ),
        (
            "conda-lock",
            CONDA_LOCK.replace("platforms: [linux-64]", "platforms: [linux-64]\n  x: 1"),
            "`metadata.x` is no key",
        ),
        ("conda-lock", CONDA_LOCK.replace("manager: conda", "manager: npm"), "`package[0].manager` is `npm`, not"),
        ("conda-lock", CONDA_LOCK.replace("  version: 1.3.1\n", ""), "`package[0]` has no `version`"),
    ],
    ids=[
        "uv-name",
        "uv-no-name",
        "uv-edge-text",
        "uv-after-kept-wheels",
        "pixi-md5",
        "pixi-env",
        "uv-version-date",
        "uv-first-in-file-after-a-conversion",
        "conda-package",
        "conda-name",
        "conda-channel",
        "conda-metadata-key",
        "conda-manager",
        "conda-no-version",
    ],
)
def test_a_malformed_lock_names_the_key_and_its_type(tmp_path: Path, kind: str, text: str, expected: str) -> None:
    source = tmp_path / FORMATS[kind][0]
    source.write_text(text)
    result = run_cli(
        "import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"), *(["--python", "3.11"] if kind == "uv" else [])
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert lines[1].startswith("hint: ") and not any(words in result.stderr for words in WORDS)
    assert not (tmp_path / "t.yml").exists()
