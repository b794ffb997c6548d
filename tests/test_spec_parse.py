"""The stack parser: valid specs, every kind of bad input with file and line, and a property test."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import re
from unittest import mock
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.stack.spec_parse import parse_stack_text
from lockgen.errors import LockgenError, SpecError
from lockgen.model.records import record_document
from lockgen.model.spec import LockBase

GOOD = """\
[stack]
name = "llm-train"
channels = ["conda-forge"]
platforms = ["linux-64"]
exclude-newer = "2026-06-01"

[dependencies]
python = "3.11.*"
pytorch = { version = "2.6.*", build = "cuda*" }
numpy = "*"

[targets.a100]
arch = "sm80"
driver = "550.54.15"

[targets.gh200]
arch = "SM_90"
driver = "570.86.10"
platforms = ["linux-aarch64"]
cuda-compat = "minor"

[targets.cpu]
arch = "cpu"
"""


def test_parses_the_documented_example() -> None:
    spec = parse_stack_text(GOOD)
    assert spec.name == "llm-train"
    assert spec.exclude_newer == dt.date(2026, 6, 1)
    assert [d.match_spec() for d in spec.dependencies] == ["python 3.11.*", "pytorch 2.6.* cuda*", "numpy"]
    gh200 = spec.target("gh200")
    assert gh200.arch == "sm90" and gh200.cuda_compat == "minor" and gh200.glibc == "2.28"
    assert spec.platforms_of(gh200) == ("linux-aarch64",)
    assert spec.platforms_of(spec.target("a100")) == ("linux-64",)
    assert not spec.target("cpu").is_gpu


def _error(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_stack_text(text, "stack.toml")
    return caught.value


@pytest.mark.parametrize(
    ("mutation", "line", "fragment"),
    [
        (lambda t: t.replace('name = "llm-train"', 'name = "llm-train'), 2, "malformed TOML"),
        (lambda t: t.replace('driver = "550.54.15"', 'driver = "550.54.15"\ndrivr = "1"'), 15, "unknown key `drivr`"),
        (lambda t: t.replace('arch = "sm80"', 'arch = "volta"'), 13, "arch"),
        (lambda t: t.replace('driver = "550.54.15"', 'driver = "latest"'), 14, "driver"),
        (lambda t: t.replace('cuda-compat = "minor"', 'cuda-compat = "loose"'), 20, "cuda-compat"),
        (lambda t: t.replace('platforms = ["linux-aarch64"]', 'platforms = ["osx-arm64"]'), 19, "osx-arm64"),
        (lambda t: t.replace("[stack]", "[stack]\nchanel = 1"), 2, "unknown key `chanel`"),
        (lambda t: t + "\n[extras]\nx = 1\n", 25, "unknown table `extras`"),
        (lambda t: t.replace('build = "cuda*"', 'bild = "cuda*"'), 9, "unknown key `bild`"),
        (lambda t: t.replace('exclude-newer = "2026-06-01"', 'exclude-newer = "soon"'), 5, "exclude-newer"),
        (lambda t: t.replace('arch = "cpu"', 'arch = "cpu"\ndriver = "550.1"'), 24, "cpu"),
    ],
)
def test_bad_input_names_file_and_line(mutation, line: int, fragment: str) -> None:
    error = _error(mutation(GOOD))
    assert error.path == "stack.toml"
    assert error.line == line, error.message
    assert fragment in error.message
    assert error.hint


@pytest.mark.parametrize(
    "field",
    [
        'name = "llm-train"',
        'driver = "550.54.15"',
        'arch = "sm80"',
        'python = "3.11.*"',
        'version = "2.6.*"',
        '[pypi-options]\nindex-url = "https://pypi.org/simple"',
        '[pypi-options]\ntorch-indexes = { cu124 = "https://download.pytorch.org/whl/cu124" }',
        '[pypi-dependencies]\nrequests = "==2.32.3"',
    ],
)
def test_a_value_with_a_newline_is_refused(field: str) -> None:
    """Patterns written `^...$` were matched with `re.match`, whose `$` also matches before a final newline: an
    index URL or a name ending in one passed, and a newline in a URL becomes a line of uv's input; the index URLs
    had no check at all, and a conda match spec with a line break was read by rattler as two words. (Version
    texts are stripped, so theirs is put inside.)"""
    text = GOOD if not field.startswith("[") else GOOD + "\n" + field + "\n"
    key, _, value = field.rpartition("\n")[2].partition(" = ")
    inside = key in ("python", "version", "requests")
    if value.startswith("{"):
        broken = value.replace('" }', '\\n" }')
    else:
        broken = value[:-1] + ('\\nnumpy"' if inside else '\\n"')
    assert field.rpartition("\n")[2] in text
    error = _error(text.replace(field.rpartition("\n")[2], f"{key} = {broken}", 1))
    assert error.line is not None, error.message


def test_gpu_target_without_driver_is_an_error() -> None:
    error = _error(GOOD.replace('driver = "550.54.15"\n', ""))
    assert "needs `driver`" in error.message and error.line == 12


def test_missing_tables_are_errors() -> None:
    assert "missing [dependencies]" in _error('[stack]\nname="x"\nchannels=["c"]\n[targets.cpu]\narch="cpu"\n').message
    assert "no targets" in _error('[stack]\nname="x"\nchannels=["c"]\n[dependencies]\n[targets]\n').message


_key = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz-_0123456789"), min_size=1, max_size=12)
_value = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.lists(st.text(max_size=8), max_size=3))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(["stack", "targets.a100", "targets.cpu", "dependencies"]), key=_key, value=_value)
def test_any_added_key_parses_or_fails_cleanly(section: str, key: str, value: object) -> None:
    """Adding any key with any value never crashes the parser: it parses or raises a located SpecError."""
    import tomlkit

    document = tomlkit.parse(GOOD)
    table = document
    for part in section.split("."):
        table = table[part]
    table[key] = value
    try:
        parse_stack_text(tomlkit.dumps(document), "stack.toml")
    except SpecError as error:
        assert error.message and error.hint
        assert error.path == "stack.toml"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text: str) -> None:
    try:
        parse_stack_text(text, "stack.toml")
    except SpecError as error:
        assert error.message


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_repeated_line_is_a_located_error(data: st.DataObject) -> None:
    """A key set twice (any assignment line of the example, repeated right after itself) is an error naming
    the key and the second line, never tomlkit's KeyAlreadyPresent as a crash."""
    lines = GOOD.splitlines()
    assignments = [i for i, line in enumerate(lines) if "=" in line and not line.lstrip().startswith(("#", "["))]
    index = data.draw(st.sampled_from(assignments))
    text = "\n".join(lines[: index + 1] + [lines[index]] + lines[index + 1 :]) + "\n"
    try:
        parse_stack_text(text, "stack.toml")
    except SpecError as error:
        assert error.hint and error.path == "stack.toml"
        if "set twice" in error.message:
            assert error.line == index + 2
        return
    raise AssertionError(f"line {index + 1} repeated was accepted")


ON_LOCK = LockBase(target="node", platforms=("linux-64",), python="3.12")
TEAM_ON_LOCK = (
    '[stack]\nname = "team"\nextends = "../vendor/locks/node.conda-lock.yml"\n[pypi-dependencies]\ndatasets = '
    '"*"\n[targets.node]\narch = "sm90"\ndriver = "580.95.05"\n'
)


def test_a_team_stack_on_a_lock_takes_its_target_platforms_and_python() -> None:
    spec = parse_stack_text(TEAM_ON_LOCK, "stack.toml", ON_LOCK)
    assert spec.python == "3.12" and spec.platforms == ("linux-64",) and [t.name for t in spec.targets] == ["node"]
    assert spec.targets[0].arch == "sm90" and spec.extends == "../vendor/locks/node.conda-lock.yml"
    recorded = parse_stack_text(
        TEAM_ON_LOCK.split("[targets.node]")[0], "stack.toml", dataclasses.replace(ON_LOCK, facts={"arch": "cpu"})
    )
    assert recorded.targets[0].arch == "cpu"  # a lock that records its hardware needs no [targets]


@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(["stack", "targets.node", "pypi-dependencies", "pypi-options"]), key=_key, value=_value)
def test_any_key_added_to_a_team_stack_on_a_lock_parses_or_fails_cleanly(section: str, key: str, value: object) -> None:
    import tomlkit

    document = tomlkit.parse(TEAM_ON_LOCK + "[pypi-options]\n")
    table = document
    for part in section.split("."):
        table = table[part]
    table[key] = value
    try:
        parse_stack_text(tomlkit.dumps(document), "stack.toml", ON_LOCK)
    except SpecError as error:
        assert error.message and error.hint and error.path == "stack.toml"


_KEY = st.text('abcxyz-_.1 "é', min_size=1, max_size=6)
_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=3),
    st.dates(),
)
_DOC = st.dictionaries(_KEY, st.one_of(_VALUE, st.dictionaries(_KEY, _VALUE, max_size=4)), max_size=5)


@settings(max_examples=150, deadline=None)
@given(document=_DOC)
def test_the_fast_reader_reads_what_tomlkit_reads(document: dict) -> None:
    """The stack is read by the standard library's TOML reader, tomlkit only for a text it refuses: both give
    the same tables, values and order for any document (here, any tomlkit writes)."""
    import tomlkit

    from lockgen.core.stack.spec_parse import _document

    text = tomlkit.dumps(document)
    read = _document(text, "stack.toml")
    assert read == tomlkit.parse(text).unwrap() and list(read) == list(tomlkit.parse(text).unwrap())


_LOCAL = '[stack]\nname = "l"\npython = "3.11"\n[pypi-dependencies]\nmypkg = {entry}\n[targets.cpu]\narch = "cpu"\n'


@pytest.mark.parametrize(
    ("entry", "path", "editable"),
    [
        ('{ path = "src/mypkg", editable = true }', "src/mypkg", True),
        ('{ path = "./src//mypkg/" }', "src/mypkg", False),  # normalized: the lock records one spelling
        ('{ path = "src/./mypkg", extras = ["cli"] }', "src/mypkg", False),
        ('{ path = ".", editable = true }', ".", True),
    ],
)
def test_a_local_package_is_a_folder_below_the_stack(entry: str, path: str, editable: bool) -> None:
    (dependency,) = parse_stack_text(_LOCAL.replace("{entry}", entry)).pypi_dependencies
    assert (dependency.path, dependency.editable, dependency.is_local, dependency.requirement().split("[")[0]) == (
        path,
        editable,
        True,
        "mypkg",
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ path = "../elsewhere" }', "leaves the stack's folder"),
        ('{ path = "src/../../x", editable = true }', "leaves the stack's folder"),
        ('{ path = "/abs/mypkg" }', "is absolute"),
        ('{ path = "C:/pkg" }', "is absolute"),
        ('{ path = "src\\\\pkg" }', "written with `/`"),
        ('{ path = "my pkg" }', "without whitespace"),
        ('{ path = "" }', "must be a folder"),
        ('{ editable = true, version = ">=1" }', "`editable` needs a `path`"),
        ('{ path = "src/mypkg", version = ">=1" }', "takes no `version` or `index`"),
        ('{ path = "." }', "is installed `editable = true`"),
        ('{ path = "src", edit = true }', "unknown key `edit`"),
    ],
)
def test_a_local_package_outside_the_stack_or_half_stated_is_refused(entry: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_stack_text(_LOCAL.replace("{entry}", entry))
    assert message in caught.value.message and caught.value.line == 5, caught.value.message
    assert "path" in caught.value.hint or "PyPI" in caught.value.hint


@given(st.text(max_size=30))
@settings(max_examples=300, deadline=None)
def test_any_accepted_path_stays_below_the_stack(path: str) -> None:
    """Whatever a path is, one accepted is relative, normalized and climbs nowhere."""
    from lockgen.model.spec import local_path

    try:
        kept = local_path(path)
    except ValueError:
        return
    assert (
        not kept.startswith("/")
        and ".." not in kept.split("/")
        and "" not in kept.split("/")
        and kept == local_path(kept)
    )


@pytest.mark.parametrize("channels", ["5", '"conda-forge"', "{ name = 1 }"])
def test_a_team_stack_s_channels_that_are_no_list_are_one_located_error(channels: str) -> None:
    base = parse_stack_text(GOOD)
    team = (
        f'[stack]\nname = "team"\nextends = "../base/stack.toml"\nchannels = {channels}\n[dependencies]\ntool = "*"\n'
    )
    with pytest.raises(SpecError, match="`channels` must be a list") as raised:
        parse_stack_text(team, "team.toml", base=base)
    assert raised.value.line == 4


def test_a_team_stack_adds_its_channels_after_the_base_s() -> None:
    base = parse_stack_text(GOOD)
    team = '[stack]\nname = "team"\nextends = "../base/stack.toml"\nchannels = ["extra", "conda-forge"]\n'
    spec = parse_stack_text(team + '[dependencies]\ntool = "*"\n', "team.toml", base=base)
    assert spec.channels == ("conda-forge", "extra")


REPO = Path(__file__).resolve().parent.parent
RICH = (
    GOOD
    + '\n[pypi-dependencies]\nrequests = { version = "==2.32.3", extras = ["socks"] }\n[pypi-options]\n'
    + 'torch-indexes = { cu124 = "https://download.pytorch.org/whl/cu124", cpu = "https://x.example/cpu" }\n'
    + '[image]\nentrypoint = ["python"]\nenv = { B = "2", A = "1" }\nlabels = { z = "1", a = "2" }\n'
)


@settings(max_examples=60, deadline=None)
@given(
    text=st.sampled_from([GOOD, RICH] + [p.read_text() for p in sorted(REPO.glob("envs/examples/*/stack.toml"))]),
    cutoff=st.one_of(
        st.none(),
        st.dates(dt.date(2000, 1, 1), dt.date(2100, 1, 1)),
        st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1), timezones=st.sampled_from([None, dt.UTC])),
    ),
)
def test_a_kept_spec_is_the_spec_the_models_accepted(
    text: str, cutoff: dt.date | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What `kept_inputs.keep_spec` keeps of a stack's spec is read back (`kept_spec`, rebuilt without validation)
    as that very spec: equal field for field and dumped alike, tables in the same order, for any of the example
    stacks with any cutoff (a date, a naive or an aware datetime); a spec whose dump would not rebuild is not kept."""
    from lockgen.adapters.lock import kept_inputs
    from lockgen.adapters.lock.stack_file import read_stack

    if cutoff is not None and "extends" not in text:
        stamp = cutoff.isoformat() if isinstance(cutoff, dt.datetime) else f'"{cutoff.isoformat()}"'
        text = re.sub(r"(?m)^exclude-newer = .*\n", "", text).replace(
            "[stack]\n", f"[stack]\nexclude-newer = {stamp}\n"
        )
    folder = tmp_path_factory.mktemp("stack")
    (folder / "stack.toml").write_text(text)
    with mock.patch.dict(os.environ, {"LOCKGEN_HOME": str(folder / "home")}):
        try:
            spec = read_stack(folder / "stack.toml").spec
        except LockgenError:
            assert "extends" in text  # a team stack whose base is not here: nothing kept
            return
        assert spec.exclude_newer == cutoff or cutoff is None or spec.extends
        kept = kept_inputs.kept_spec(hashlib.sha256(text.encode()).hexdigest())
        assert kept is not None or spec.extends
        if kept is not None:
            assert kept == spec and record_document(kept) == record_document(spec)
            assert record_document(read_stack(folder / "stack.toml").spec) == record_document(spec)


def test_a_stack_text_is_validated_once_per_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec of a stack that extends nothing is kept by its text's bytes and taken back the next time those bytes
    are read, without the parser (so without validating anything); a text changed by a byte is parsed again, and
    `LOCKGEN_REPARSE=1` parses every text. Failed before: every read of a stack parsed and validated it."""
    from lockgen.adapters.lock.stack_file import read_stack
    from lockgen.core.stack import spec_parse

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    stack = tmp_path / "stack.toml"
    stack.write_text(RICH)
    first = read_stack(stack).spec
    parsed: list[object] = []
    parse = spec_parse.parse_stack_text
    monkeypatch.setattr(spec_parse, "parse_stack_text", lambda *args: parsed.append(args) or parse(*args))
    assert read_stack(stack).spec == first and parsed == []
    stack.write_text(RICH + "\n")
    assert read_stack(stack).spec == first and len(parsed) == 1
    monkeypatch.setenv("LOCKGEN_REPARSE", "1")
    assert read_stack(stack).spec == first and len(parsed) == 2


def test_keeping_a_spec_reads_its_record_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`keep_spec` looks for a kept record once before writing one (twice before: `_keep_record`'s look, then
    `keep`'s), and a record kept already is not written again."""
    from lockgen.adapters.lock import kept_inputs
    from tests.open_audit import opened

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    spec = parse_stack_text(RICH)
    sha256 = hashlib.sha256(RICH.encode()).hexdigest()
    record = kept_inputs._path("spec", sha256)
    with opened(record) as counts:
        kept_inputs.keep_spec(sha256, spec)
    assert counts[str(record)] == 1 and kept_inputs.kept_spec(sha256) == spec
    written = record.stat().st_mtime_ns, record.stat().st_ino
    with opened(record) as counts:
        kept_inputs.keep_spec(sha256, spec)
    assert counts[str(record)] == 1 and (record.stat().st_mtime_ns, record.stat().st_ino) == written
