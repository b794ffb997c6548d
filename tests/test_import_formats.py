"""The foreign formats of `lockgen import` behind one interface: a new format is one module (a fake one, registered
here, imports end to end), each format is recognised in turn, an option a format does not take is a usage error
naming the format, and the guide's table of formats is the registry's."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.foreign import foreign_format, foreign_locks, pylock
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.import_lock import import_lock, import_notes
from lockgen.errors import FlagError, LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash, pip_wheel
from lockgen.model.requests import ImportOptions
from tests.conftest import run_cli

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
REPO = Path(__file__).parent.parent
WHEEL = "https://files.example.org/six-1.17.0-py2.py3-none-any.whl"
CONDA_LOCK = """version: 1
metadata:
  content_hash: {linux-64: x}
  channels: [{url: conda-forge, used_env_vars: []}]
  platforms: [linux-64]
  sources: [environment.yml]
package:
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {}
  url: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda
  hash: {md5: 0123456789abcdef0123456789abcdef}
  category: main
  optional: false
"""


class FakeLock:
    """A format of one line per wheel (`NAME VERSION URL SHA256`) under a `fakelock 1` line, read for linux-64."""

    name = "fakelock"
    described = "fakelock (v1)"
    producer = "fake lock"
    takes = frozenset({"python"})
    refuses: tuple[str, ...] = ("a line without a sha256",)

    def recognises(self, file: ForeignFile) -> bool:
        return file.text.startswith("fakelock 1\n")

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        packages, skipped = [], []
        for line in file.text.splitlines()[1:]:
            name, version, url, *sha256 = line.split()
            if not sha256:
                skipped.append(f"linux-64: `{name}` {version} has no sha256")
                continue
            hashes = PackageHash(sha256=sha256[0])
            packages.append(
                LockedPackage(name=name, version=version, manager="pip", platform="linux-64", url=url, hash=hashes)
            )
        python = options.python or "3.12"
        return Imported(
            f"fakelock v1 (CPython {python})", (), tuple(packages), file.sha256, tuple(skipped), python=python
        )


@pytest.fixture
def fake_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake format listed after the built-in ones, as a new format's one line in `FORMATS` lists it."""
    monkeypatch.setattr(foreign_locks, "FORMATS", (*foreign_locks.FORMATS, FakeLock()))


def test_a_new_format_is_one_module_imported_end_to_end(fake_format: None, tmp_path: Path) -> None:
    source = tmp_path / "deps.fake"
    source.write_text(f"fakelock 1\nsix 1.17.0 {WHEEL} {'a' * 64}\nleft 0.1 {WHEEL}\n")
    out = tmp_path / "t.conda-lock.yml"
    path, lock = import_lock(source, "t", out, ImportOptions(python="3.11"))
    assert path == out and load_lock(out) == lock
    assert [(p.name, p.version, p.hash.sha256) for p in lock.package] == [("six", "1.17.0", "a" * 64)]
    notes = import_notes(lock)
    assert notes.format == "fakelock v1 (CPython 3.11)" and notes.skipped == ("linux-64: `left` 0.1 has no sha256",)
    with pytest.raises(FlagError, match=r"--extra does not apply to the fakelock") as refused:
        import_lock(source, "t", tmp_path / "u.yml", ImportOptions(extras=("gpu",)))
    assert refused.value.exit_code == 2 and "--python" in refused.value.hint and not (tmp_path / "u.yml").exists()


def test_a_file_no_format_recognises_lists_the_registered_ones(fake_format: None, tmp_path: Path) -> None:
    source = tmp_path / "notes.txt"
    source.write_text("just: words\n")
    with pytest.raises(LockFormatError, match="not a lock format") as refused:
        import_lock(source, "t", tmp_path / "t.yml")
    assert refused.value.hint.endswith(" or fakelock (v1)")


def _conda_lock(tmp_path: Path) -> Path:
    path = tmp_path / "conda-lock.yml"
    path.write_text(CONDA_LOCK)
    return path


@pytest.mark.parametrize(
    "source, expected",
    [
        (lambda _: FOREIGN / "tiny.explicit.txt", "@EXPLICIT file"),
        (lambda _: FOREIGN / "pylock.tiny.toml", "pylock.toml"),
        (lambda tmp: _renamed(FOREIGN / "pylock.tiny.toml", tmp / "locked.toml"), "pylock.toml"),
        (lambda _: FOREIGN / "tiny.uv.lock", "uv.lock"),
        (lambda _: FOREIGN / "tiny.pixi.lock", "pixi.lock"),
        (_conda_lock, "conda-lock.yml"),
    ],
    ids=["explicit", "pylock", "pylock-by-content", "uv", "pixi", "conda-lock"],
)
def test_each_file_is_recognised_by_its_own_format(
    source: Callable[[Path], Path], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each format recognises its own file whole, and read in pieces as the import reads it (a piece of a few
    lines: a format judging lines judges each piece's, no line being cut between two)."""
    path = source(tmp_path)
    file = ForeignFile(path, path.read_text(), "0" * 64)
    assert [form.name for form in foreign_locks.FORMATS if form.recognises(file)] == [expected]
    monkeypatch.setattr(foreign_format, "_BLOCK", 16)
    monkeypatch.setattr(foreign_format, "_PIECE", 32)
    pieces, _ = foreign_format.read_in_pieces(path)
    assert len(pieces) > 3 and "".join(pieces) == path.read_text()
    file = ForeignFile(path, pieces, "0" * 64)
    assert [form.name for form in foreign_locks.FORMATS if form.recognises(file)] == [expected]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200), st.integers(1, 9), st.integers(1, 40))
def test_a_file_is_read_in_pieces_as_its_bytes_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, block: int, piece: int
) -> None:
    """The pieces of a file's text are its bytes decoded as `bytes.decode` decodes them (a character or a bad byte
    split between two blocks), each but the last ending at a line end, and the sha256 is its bytes'."""
    data = data.replace(b"a", "é\n".encode()).replace(b"b", b"\n[[p") + b"\xc3"  # characters of two bytes, headers
    path = tmp_path / "lock"
    path.write_bytes(data)
    monkeypatch.setattr(foreign_format, "_BLOCK", block)
    monkeypatch.setattr(foreign_format, "_PIECE", piece)
    pieces, sha256 = foreign_format.read_in_pieces(path)
    assert "".join(pieces) == data.decode("utf-8", errors="replace")
    assert sha256 == hashlib.sha256(data).hexdigest()
    assert all(piece.endswith("\n") for piece in pieces[:-1]) and all(pieces)


def test_a_file_read_again_must_be_the_file_hashed(tmp_path: Path) -> None:
    """A reader that let go of the pieces and needs the text whole (uv.lock out of uv's layout) reads the file
    again: refused where its bytes are no longer those the import records."""
    path = tmp_path / "uv.lock"
    path.write_text("version = 1\n")
    pieces, sha256 = foreign_format.read_in_pieces(path)
    assert ForeignFile(path, pieces, sha256).text_again() == "version = 1\n"
    path.write_text("version = 2\n")
    with pytest.raises(UserError, match="changed while it was imported"):
        ForeignFile(path, pieces, sha256).text_again()


def _renamed(source: Path, to: Path) -> Path:
    to.write_bytes(source.read_bytes())
    return to


@pytest.mark.parametrize(
    "source, flags, refused, taken",
    [
        (lambda _: FOREIGN / "tiny.pixi.lock", ["--extra", "cpu", "--no-dev"], "--extra, --no-dev", "--environment"),
        (lambda _: FOREIGN / "tiny.explicit.txt", ["--environment", "default"], "--environment", "--allow-partial"),
        (lambda _: FOREIGN / "pylock.tiny.toml", ["--package", "a"], "--package", "--all-extras"),
        (lambda _: FOREIGN / "tiny.uv.lock", ["--environment", "default"], "--environment", "--all-extras"),
        (_conda_lock, ["--python", "3.11", "--glibc", "2.35"], "--python, --glibc", "--allow-partial"),
        (_conda_lock, ["--glibc", "2.28"], "--glibc", "--allow-partial"),  # told, though at its default
        (lambda _: FOREIGN / "tiny.pixi.lock", ["--glibc", "2.28"], "--glibc", "--environment"),
    ],
    ids=["pixi", "explicit", "pylock", "uv", "conda-lock", "conda-lock-default", "pixi-default"],
)
def test_an_option_the_format_does_not_take_is_a_usage_error(
    source: Callable[[Path], Path], flags: list[str], refused: str, taken: str, tmp_path: Path
) -> None:
    """Told an option its format has no use for, import stops before reading (uv and the others would have
    ignored it, and the lock would not be what the user asked for), naming the format and what it takes: an
    option given at its default value too (it was told, whatever its value)."""
    out = tmp_path / "t.yml"
    result = run_cli("import", str(source(tmp_path)), "-t", "t", "-o", str(out), *flags)
    assert result.returncode == 2, result.stderr
    error, hint = result.stderr.strip().splitlines()[-2:]
    assert error.startswith(f"error: {refused} do") and "not apply to the " in error
    assert hint.startswith(f"hint: drop {refused} (the ") and taken in hint
    assert "Traceback" not in result.stderr and not out.exists()


def test_every_format_takes_options_that_exist_and_every_option_has_a_format() -> None:
    options = {option.name for option in fields(ImportOptions) if "flag" in option.metadata}
    taken = set().union(*(form.takes for form in foreign_locks.FORMATS))
    assert taken == options, f"taken by no format: {sorted(options - taken)}; no option: {sorted(taken - options)}"
    assert all(ImportOptions.flag(option).startswith("--") for option in options)


def test_the_guide_lists_each_format_as_the_registry_declares_it() -> None:
    """The guide's table of formats names each one's options and what it refuses, in the order they are asked."""
    page = (REPO / "docs" / "guide" / "import.md").read_text()
    section = page.split("### The formats", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| ")
    ]
    expected = [
        [
            form.described,
            ", ".join(f"`{ImportOptions.flag(option)}`" for option in sorted(form.takes, key=ImportOptions.flag))
            or "none",
            "; ".join(form.refuses),
        ]
        for form in foreign_locks.FORMATS
    ]
    assert [[row[0], row[2], row[3]] for row in rows[1:]] == expected


_ENTRY = st.tuples(st.sampled_from(["linux-64", "linux-aarch64"]), st.sampled_from("abc"), st.sampled_from("12"))


def _wheel(platform: str, name: str, version: str) -> LockedPackage:
    return pip_wheel(name, version, platform, f"https://x/{name}-{version}-py3-none-any.whl", "0" * 64)


@given(st.lists(_ENTRY, max_size=8), st.booleans())
def test_an_entry_listed_again_is_kept_once_and_one_that_differs_refused_in_any_order(
    entries: list[tuple[str, str, str]], ordered: bool
) -> None:
    """An entry listed again as it is is kept once, two of one name and platform that differ are refused naming
    both, whatever the entries' order (in the lock's order only the last entry kept is compared), as a table of
    every entry seen did; and the lock's order is kept or made as a sort makes it."""
    from lockgen.api.import_lock import _once_each
    from lockgen.core.lock.lock_builder import in_lock_order

    packages = [_wheel(*entry) for entry in (sorted(entries) if ordered else entries)]
    expected: dict[tuple[str, str, str], LockedPackage] = {}  # the rule, as a table of every entry seen
    refused = None
    for package in packages:
        first = expected.setdefault((package.platform, package.manager, package.name), package)
        if first is not package and first != package:
            refused = f"holds {package.name} twice for {package.platform} ({first.version} and {package.version})"
            break
    if refused is not None:
        with pytest.raises(LockFormatError, match=re.escape(refused)):
            _once_each(packages, Path("x"))
    else:
        assert _once_each(packages, Path("x")) == list(expected.values())
    assert list(in_lock_order(packages)) == sorted(packages, key=lambda p: p.sort_key())
    if ordered:
        assert in_lock_order(packages) is packages


def test_a_lock_s_entries_in_its_order_are_kept_and_built_without_a_record_per_entry() -> None:
    """Entries that come in the lock's order (a uv.lock's do) are kept once each and built into a lock without a
    record per entry (a table of every entry and a sort key each, about 180 bytes an entry between them, 600k
    entries at 300k packages: the peak of the import's last phase)."""
    import tracemalloc

    from lockgen.api.import_lock import _once_each
    from lockgen.core.lock.lock_builder import imported_lock

    entries = 60_000  # the package set's JSON is hashed 1,024 entries at a time: about 1 MiB whatever the count
    packages = [_wheel("linux-64", f"p{i:05}", "1.0") for i in range(entries)]
    tracemalloc.start()
    try:
        kept = _once_each(packages, Path("x"))
        once_each = tracemalloc.get_traced_memory()[1]  # the list kept, and the peak above it
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        imported_lock("cpu", "x", "uv.lock", "0" * 64, None, (), (), ("linux-64",), kept, {}, (), "3.12")
        built = tracemalloc.get_traced_memory()[1] - held  # the lock's tuple of entries, and the peak above it
    finally:
        tracemalloc.stop()
    assert once_each / entries < 30 and built / entries < 60, (once_each / entries, built / entries)


@given(st.lists(st.sampled_from(["lock-version", "[[packages]]", "[", "]", "\n", " ", "=", "x", "\t"]), max_size=12))
def test_a_pylock_is_told_by_the_lines_that_start_as_pep_751_s(parts: list[str]) -> None:
    """pylock.toml is recognised by a line starting `lock-version =` and one starting `[[packages]]`, found by their
    text and then their place (`pylock.starts_a_line`): what `^` under `re.M` finds, without trying every position."""
    text = "".join(parts)
    for pattern, anchored in ((pylock._PEP751, r"^lock-version\s*="), (pylock._PACKAGES, r"^\[\[packages\]\]")):
        assert pylock.starts_a_line(pattern, text) == bool(re.search(anchored, text, re.M))
