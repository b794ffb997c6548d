"""Archives read one way (issue 27): a `.conda` whose zip reads differently to Python's `zipfile` (central
directory) than to rattler (local headers from offset 0) is refused before rattler sees it; odd info/ files
are one error naming the package and file; image layers are unpacked by lockgen's own extractor, which
never writes, links or removes anything outside the root, whatever the members say (CVE-2025-4517's deep
symlink chains, `..`, absolute names, hard links out, whiteouts), and a mislabelled layer is one error."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockgen.adapters import archive_safety
from lockgen.adapters.conda import conda_archive, conda_package
from lockgen.adapters.image import layer_extract, oci_layout
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.oci import ENVIRONMENT_LABEL
from tests.channel_factory import Pkg, write_package
from tests.conftest import run_cli
from tests.test_tar_headers import END, header, long_name, member, padded, pax, record

# --- .conda archives -------------------------------------------------------------------------------------


def _zip(
    members: list[tuple[str, bytes]],
    listed: list[int] | None = None,
    renamed: dict[str, str] | None = None,
    before: bytes = b"",
) -> bytes:
    """A stored zip of `members` (local headers in this order, after `before`); its central directory lists
    the members at the indexes `listed` (default: all, in order), under `renamed` names where given."""
    out, entries = bytearray(before), []
    for name, data in members:
        crc = zlib.crc32(data)
        entries.append((name, len(out), crc, len(data)))
        out += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(name), 0)
        out += name.encode() + data
    start = len(out)
    chosen = list(range(len(entries))) if listed is None else listed
    for index in chosen:
        name, offset, crc, size = entries[index]
        name = (renamed or {}).get(name, name)
        out += (
            struct.pack(
                "<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, size, size, len(name), 0, 0, 0, 0, 0, offset
            )
            + name.encode()
        )
    out += struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(chosen), len(chosen), len(out) - start, start, 0)
    return bytes(out)


def _tar(files: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files:
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def _info_files(data: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(zstandard.decompress(data))) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


def _parts(
    tmp_path: Path, info: dict[str, bytes] | None = None, more: tuple[tuple[str, bytes], ...] = ()
) -> list[tuple[str, bytes]]:
    """The members of a real package's `.conda` (metadata.json, pkg-…, info-…, in this order), its info/ files
    replaced by `info` and followed by the members `more`."""
    with zipfile.ZipFile(write_package(Pkg("evil", "1.0"), tmp_path / "built")) as built:
        members = sorted(
            ((n, built.read(n)) for n in built.namelist()), key=lambda m: "metadata pkg- info-".find(m[0][:4])
        )
    name, data = members[2]
    files = [(n, (info or {}).get(n, content)) for n, content in _info_files(data)]
    files += [(n, content) for n, content in (info or {}).items() if n not in dict(files)] + list(more)
    return [*members[:2], (name, zstandard.compress(_tar(files)))]


def _evil_info(members: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """The info member again, its paths.json naming a file outside the prefix."""
    evil = json.dumps({"paths": [{"_path": "../../evil", "path_type": "hardlink"}]}).encode()
    files = [(n, evil if n == "info/paths.json" else content) for n, content in _info_files(members[2][1])]
    return members[2][0], zstandard.compress(_tar(files))


def _package(archive: Path) -> LockedPackage:
    return LockedPackage(
        name="evil",
        version="1.0",
        manager="conda",
        platform="linux-64",
        url=archive.as_uri(),
        hash=PackageHash(sha256=hashlib.sha256(archive.read_bytes()).hexdigest()),
        build="h0_0",
    )


def test_an_honest_conda_reads_the_same_through_both_directories(tmp_path: Path) -> None:
    members = _parts(tmp_path)
    (tmp_path / "mine.conda").write_bytes(_zip(members))
    (tmp_path / "no-payload.conda").write_bytes(_zip([members[0], members[2]]))  # pkg-… is optional
    for archive in (tmp_path / "built" / "evil-1.0-h0_0.conda", tmp_path / "mine.conda", tmp_path / "no-payload.conda"):
        assert archive_safety.unsafe_members(archive) == []
        assert conda_package.read_manifest(archive, _package(archive)).name == "evil"


def test_a_zip64_conda_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's zipfile (conda-package-handling's writer) uses zip64 records past 2 GiB: lowered here."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 64)
    archive = tmp_path / "evil-1.0-h0_0.conda"
    with zipfile.ZipFile(archive, "w") as out:
        for name, data in _parts(tmp_path):
            out.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    assert b"PK\x06\x06" in archive.read_bytes()  # the zip64 end record
    assert set(conda_archive.conda_members(archive)) == {"info", "pkg"}
    assert conda_package.read_manifest(archive, _package(archive)).name == "evil"


@pytest.mark.parametrize(
    "craft, message",
    [
        (lambda m, evil: _zip([*m, evil]), "each once"),  # info-… twice
        (lambda m, evil: _zip([*m, evil], listed=[0, 1, 2]), "bytes between"),  # a local member hidden
        (lambda m, evil: _zip([evil, *m], listed=[1, 2, 3]), "not the next local header"),  # hidden before the rest
        (lambda m, evil: _zip(m, listed=[1, 0, 2]), "not the next local header"),  # order differs
        (lambda m, evil: _zip(m, listed=[0, 1, 1, 2]), "not the next local header"),  # overlapping entries
        (lambda m, evil: _zip(m, renamed={m[2][0]: evil[0].replace("info-", "info_")}), "differs from"),
        (lambda m, evil: _zip(m, before=b"#!/bin/sh\n"), "not the next local header"),  # data before the members
        (lambda m, evil: _zip(m) + b"trailing", "no end of central directory"),
        (lambda m, evil: _zip([m[0], m[1]]), "one info-"),  # no info member
    ],
)
def test_a_conda_whose_directories_disagree_is_refused_before_rattler(tmp_path: Path, craft, message: str) -> None:
    members = _parts(tmp_path)
    archive = tmp_path / "evil-1.0-h0_0.conda"
    archive.write_bytes(craft(members, _evil_info(members)))
    for read in (archive_safety.unsafe_members, lambda a: conda_package.read_manifest(a, _package(a))):
        with pytest.raises(LockFormatError, match=message):
            read(archive)


@pytest.mark.parametrize(
    "info, message",
    [
        ({"info/paths.json": b"{not json"}, "info/paths.json is not UTF-8 JSON"),
        (
            {"info/paths.json": '{"paths": [{"_path": "caf\u00e9"}]}'.encode("latin-1")},
            "info/paths.json is not UTF-8 JSON",
        ),
        ({"info/paths.json": b"[1, 2]"}, "info/paths.json is not a JSON object"),
        ({"info/paths.json": b'{"paths": {"_path": "a"}}'}, "info/paths.json is not a list of path entries"),
        ({"info/paths.json": b'{"paths": [{"_path": 3}]}'}, "info/paths.json is not a list of path entries"),
        ({"info/paths.json": b'{"paths": [{"_path": "a", "size_in_bytes": "9"}]}'}, "info/paths.json is not a list"),
        ({"info/paths.json": b'{"paths": [{"_path": "a", "sha256": ["x"]}]}'}, "info/paths.json is not a list"),
        ({"info/paths.json": b'{"paths": [' * 100_000}, "info/paths.json is not UTF-8 JSON"),
        (
            {"info/link.json": b'{"noarch": {"type": "python", "entry_points": "a = b:c"}}'},
            "info/link.json has no noarch",
        ),
        ({"info/link.json": b'{"noarch": "python"}'}, "info/link.json has no noarch"),
        ({"info/link.json": b'"noarch"'}, "info/link.json is not a JSON object"),
        ({"info/index.json": b"[]"}, "info/index.json is not a JSON object"),
    ],
)
def test_odd_info_files_are_one_error_naming_package_and_file(
    tmp_path: Path, info: dict[str, bytes], message: str
) -> None:
    archive = tmp_path / "evil-1.0-h0_0.conda"
    archive.write_bytes(_zip(_parts(tmp_path, info)))
    with pytest.raises(LockFormatError, match=f"`evil` 1.0 .*{message}"):
        conda_package.read_manifest(archive, _package(archive))


@pytest.mark.parametrize("name", ["info/paths.json", "./info/paths.json", "info//paths.json"])
def test_a_repeated_info_file_is_refused(tmp_path: Path, name: str) -> None:
    """rattler extracts the info tar in order (the last `info/paths.json`, however spelled, wins)."""
    archive = tmp_path / "evil-1.0-h0_0.conda"
    archive.write_bytes(_zip(_parts(tmp_path, more=((name, b'{"paths": [{"_path": "../../evil"}]}'),))))
    with pytest.raises(LockFormatError, match=re.escape("info/paths.json is repeated")):
        conda_package.read_manifest(archive, _package(archive))


@pytest.mark.slow
def test_materialize_refuses_a_conda_that_reads_two_ways(tmp_path: Path) -> None:
    """rattler's indexer and Python's zipfile see the benign info member; rattler's installer would stream
    the hidden one first: `materialize` says so in one error, with nothing linked."""
    import asyncio

    import rattler.index

    from tests.channel_factory import cpu_lock

    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "linux-64").mkdir()
    members = _parts(tmp_path)
    (channel / "linux-64" / "evil-1.0-h0_0.conda").write_bytes(_zip([_evil_info(members), *members], listed=[1, 2, 3]))
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))
    lock = cpu_lock(tmp_path, channel.as_uri(), ["evil"])
    done = run_cli(
        "materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(tmp_path / "home")}
    )
    assert done.returncode == 1 and "error: `evil` 1.0 (file://" in done.stderr
    assert "evil-1.0-h0_0.conda` is refused: member `metadata.json` is not the next local header" in done.stderr, (
        done.stderr
    )
    assert "hint:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "env").exists() and not (tmp_path / "evil").exists()


# --- image layers ------------------------------------------------------------------------------------------

Entry = tuple[str, str, "str | bytes"]  # (name, kind: f d l h fifo chr, file content or link target)


def _layer_tar(entries: list[Entry], mode: int = 0o644) -> bytes:
    buffer = io.BytesIO()
    kinds = {
        "f": tarfile.REGTYPE,
        "d": tarfile.DIRTYPE,
        "l": tarfile.SYMTYPE,
        "h": tarfile.LNKTYPE,
        "fifo": tarfile.FIFOTYPE,
        "chr": tarfile.CHRTYPE,
    }
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, value in entries:
            info = tarfile.TarInfo(name)
            info.type, info.mode = kinds[kind], mode
            if kind == "f":
                data = value if isinstance(value, bytes) else value.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.linkname = str(value) if kind in ("l", "h") else ""
            tar.addfile(info)
    return buffer.getvalue()


def _snapshot(folder: Path, skip: Path) -> dict[str, object]:
    """What `folder` holds outside `skip`: each path's kind and content or link target."""
    found: dict[str, object] = {}
    for top, dirs, files in os.walk(folder):
        if Path(top) == skip or skip in Path(top).parents:
            dirs.clear()
            continue
        for name in dirs + files:
            path = Path(top, name)
            if path == skip:
                continue
            info = path.lstat()
            found[str(path)] = (
                os.readlink(path)
                if stat.S_ISLNK(info.st_mode)
                else path.read_bytes()
                if stat.S_ISREG(info.st_mode)
                else "dir",
                info.st_nlink,
                info.st_mode,
            )
    return found


def _apply(root: Path, layers: list[list[Entry]]) -> list[layer_extract.Removal]:
    with layer_extract.unpacking(root) as tree:
        for number, entries in enumerate(layers, 1):
            tree.apply(io.BytesIO(_layer_tar(entries)), f"layer {number}")
    return tree.removed


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(a root to unpack into, a folder beside it holding a secret) inside tmp_path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("keep me\n")
    return tmp_path / "root", outside


def _chain_escape(outside: Path) -> list[Entry]:
    """CVE-2025-4517's pattern: symlinks through folders of 247-character names whose resolved path
    passes PATH_MAX (where `os.path.realpath` stops resolving and `tarfile`'s filters see a path inside),
    then a link that climbs back out, and a file written through it."""
    component, steps, path, entries = "d" * 247, "abcdefghijklmnop", "", []
    for step in steps:
        entries += [(os.path.join(path, component), "d", ""), (os.path.join(path, step), "l", component)]
        path = os.path.join(path, component)
    linkpath = os.path.join("/".join(steps), "l" * 254)
    up = "../" * (len(outside.parts) + 2)
    entries += [
        (linkpath, "l", "../" * len(steps)),
        ("escape", "l", f"{linkpath}/{up}{str(outside).lstrip('/')}"),
        ("escape/secret", "f", b"pwned\n"),
        ("escape/new", "f", b"pwned\n"),
        ("hard", "h", "escape/secret"),
    ]
    return entries


@pytest.mark.parametrize(
    "layers, refused",
    [
        ([[("../outside/secret", "f", b"pwned\n")]], "`..` component"),
        ([[("a/../../outside/new", "f", b"pwned\n")]], "`..` component"),
        ([[("link", "l", "{outside}"), ("link/secret", "f", b"pwned\n")]], None),  # resolved inside the root
        ([[("link", "l", "../outside"), ("link/new", "f", b"pwned\n")]], None),
        ([[("link", "l", "../../../../../../.."), ("link/{rel}/secret", "f", b"pwned\n")]], None),
        ([[("link", "l", "{outside}")], [("link/secret", "f", b"pwned\n")]], None),  # the link from a lower layer
        ([[("{outside}/secret", "f", b"pwned\n")]], None),  # absolute: under the root
        ([[("hard", "h", "../outside/secret")]], "`..` component"),
        ([[("link", "l", "{outside}"), ("hard", "h", "link/secret")]], "not a file unpacked inside the root"),
        ([[("link", "l", "{outside}/secret"), ("hard", "h", "link")]], "not a file unpacked inside the root"),
        ([[("loop", "l", "loop"), ("loop/x", "f", b"")]], "more than 40 symbolic links"),
        ([[(f"l{i}", "l", f"l{i + 1}") for i in range(45)] + [("l45", "d", ""), ("l0/x", "f", b"")]], "more than 40"),
        ([[("file", "f", b""), ("file/x", "f", b"")]], "which is not a folder"),
        ([[("../.wh.outside", "f", b"")]], "`..` component"),
        ([[(".wh...", "f", b"")]], "whiteout of no name"),
        ([[("link", "l", "{outside}")], [("link/.wh.secret", "f", b"")]], None),
        ([[("link", "l", "{outside}")], [("link/.wh..wh..opq", "f", b"")]], None),
        ([[("link", "l", "{outside}")], [(".wh.link", "f", b"")]], None),
        ([[("link", "l", "{outside}/secret")], [("link", "f", b"pwned\n")]], None),  # replaces the link, not its target
        ([[("link", "l", "{outside}")], [("link/", "d", ""), ("link/secret", "f", b"pwned\n")]], None),
    ],
)
def test_no_layer_touches_anything_outside_the_root(
    world: tuple[Path, Path], layers: list[list[Entry]], refused: str | None
) -> None:
    root, outside = world
    fill = {"outside": str(outside), "rel": str(outside).lstrip("/")}
    layers = [
        [(n.format(**fill), k, v.format(**fill) if isinstance(v, str) else v) for n, k, v in layer] for layer in layers
    ]
    before = _snapshot(root.parent, root)
    if refused is None:
        _apply(root, layers)
    else:
        with pytest.raises(LockFormatError, match=f"layer \\d is refused: member .*{refused}"):
            _apply(root, layers)
    assert _snapshot(root.parent, root) == before


def test_a_deep_symlink_chain_stays_inside_the_root(world: tuple[Path, Path]) -> None:
    root, outside = world
    before = _snapshot(root.parent, root)
    _apply(root, [_chain_escape(outside)])
    assert _snapshot(root.parent, root) == before and (outside / "secret").read_text() == "keep me\n"
    written = root / str(outside).lstrip("/")
    assert (written / "secret").read_bytes() == b"pwned\n" and (root / "hard").read_bytes() == b"pwned\n"


def test_oci_replacement_and_whiteouts(world: tuple[Path, Path]) -> None:
    root, _ = world
    removed = _apply(
        root,
        [
            [
                ("x/y", "f", b"y"),
                ("z", "f", b"z"),
                ("d/f1", "f", b"1"),
                ("d/f2", "f", b"2"),
                ("w/a", "f", b"a"),
                ("s", "l", "/etc"),
                ("keep", "f", b"k"),
                ("h1", "f", b"one"),
                ("h2", "h", "h1"),
            ],
            [
                ("x", "f", b"file over folder"),
                ("z/", "d", ""),
                ("z/w", "f", b"folder over file"),
                ("d/f3", "f", b"3"),
                ("d/.wh..wh..opq", "f", b""),
                ("w/.wh.a", "f", b""),
                ("s/", "d", ""),
                ("s/inside", "f", b"i"),
                ("h1", "f", b"new"),
            ],
        ],
    )
    assert (root / "x").read_bytes() == b"file over folder" and (root / "z/w").read_bytes() == b"folder over file"
    assert sorted(p.name for p in (root / "d").iterdir()) == ["f3"] and list((root / "w").iterdir()) == []
    assert (root / "s").is_dir() and not (root / "s").is_symlink() and (root / "s/inside").exists()
    assert (root / "h2").read_bytes() == b"one"  # a replaced hard link's other name keeps the old content
    assert not list(root.rglob(".wh.*")) and (root / "keep").exists()
    assert sorted(r.path for r in removed) == ["d/f1", "d/f2", "w/a"]
    assert {r.member for r in removed} == {"d/.wh..wh..opq", "w/.wh.a"}


def test_modes_as_stated_links_and_special_files(world: tuple[Path, Path]) -> None:
    """Modes land as the header states them, setuid and setgid included, as a runtime lands them (umoci is the
    oracle in test_image_whole); a device is not made, a FIFO is, a link keeps its target as text."""
    root, _ = world
    with layer_extract.unpacking(root) as tree:
        tree.apply(io.BytesIO(_layer_tar([("ro/", "d", ""), ("ro/f", "f", b"x")], mode=0o6777)), "layer 1")
        tree.apply(
            io.BytesIO(
                _layer_tar(
                    [("ro/g", "f", b"y"), ("pipe", "fifo", ""), ("dev", "chr", ""), ("abs", "l", "/usr/bin/python3")]
                )
            ),
            "layer 2",
        )
    assert (
        stat.S_IMODE((root / "ro/f").stat().st_mode) == 0o6777 and stat.S_IMODE((root / "ro").stat().st_mode) == 0o6777
    )
    assert stat.S_ISFIFO((root / "pipe").lstat().st_mode) and not (root / "dev").exists()
    assert os.readlink(root / "abs") == "/usr/bin/python3" and (root / "ro/g").read_bytes() == b"y"


_NAMES = st.lists(
    st.sampled_from(["a", "b", "..", ".", "", ".wh.a", ".wh..wh..opq", "{outside}", "secret"]), min_size=1, max_size=4
).map("/".join)
_ENTRIES = st.lists(
    st.tuples(
        _NAMES,
        st.sampled_from(["f", "d", "l", "h", "fifo"]),
        st.sampled_from(["a", "../..", "..", "/", "{outside}", "{outside}/secret", "a/b", "b"]),
    ),
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layers=st.lists(_ENTRIES, min_size=1, max_size=3))
def test_random_layers_never_touch_anything_outside_the_root(
    world: tuple[Path, Path], layers: list[list[Entry]]
) -> None:
    root, outside = world
    layers = [
        [(n.format(outside=str(outside)), k, v.format(outside=str(outside))) for n, k, v in layer] for layer in layers
    ]
    before = _snapshot(root.parent, root)
    try:
        _apply(root, layers)
    except LockFormatError:
        pass
    finally:
        assert _snapshot(root.parent, root) == before
        shutil.rmtree(root)


def _image(folder: Path, blob: bytes, media_type: str, diff_id: str) -> Path:
    layout = folder / "img"
    layout.mkdir()
    layer = oci_layout.put_blob(layout, blob)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": {ENVIRONMENT_LABEL: "sha256:" + "0" * 64}},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **oci_layout.put_blob(layout, canonical_json(config)),
        },
        "layers": [{"mediaType": media_type, **layer}],
    }
    oci_layout.write_index(layout, manifest, "t")
    return layout


@pytest.mark.slow
@pytest.mark.parametrize(
    "compress, media_type",
    [
        (lambda data: gzip.compress(data, mtime=0), "application/vnd.oci.image.layer.v1.tar+zstd"),
        (zstandard.compress, "application/vnd.oci.image.layer.v1.tar+gzip"),
        (lambda data: gzip.compress(data, mtime=0)[:-20], "application/vnd.oci.image.layer.v1.tar+gzip"),
    ],
)
def test_a_mislabelled_layer_is_one_error(tmp_path: Path, compress, media_type: str) -> None:
    plain = _layer_tar([("opt/env/x", "f", b"x")])
    layout = _image(tmp_path, compress(plain), media_type, "sha256:" + hashlib.sha256(plain).hexdigest())
    with pytest.raises(LockFormatError, match=r"is not the .* it is labelled"):
        oci_layout.unpack(layout, tmp_path / "root")
    done = run_cli("check", "--image", str(layout))
    assert done.returncode == 1 and "it is labelled" in done.stderr and "hint:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_hostile_layer_through_the_cli_is_one_error(tmp_path: Path) -> None:
    plain = _layer_tar([("link", "l", "/"), ("../escape", "f", b"pwned\n")])
    layout = _image(
        tmp_path, plain, "application/vnd.oci.image.layer.v1.tar", "sha256:" + hashlib.sha256(plain).hexdigest()
    )
    done = run_cli("check", "--image", str(layout))
    assert done.returncode == 1 and "error: layer 1 (sha256:" in done.stderr and "member `../escape`" in done.stderr
    assert "hint:" in done.stderr and "Traceback" not in done.stderr and not (tmp_path / "escape").exists()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "paths",
                    "_path",
                    "sha256",
                    "size_in_bytes",
                    "path_type",
                    "noarch",
                    "type",
                    "entry_points",
                    "name",
                    "version",
                    "build",
                    "prefix_placeholder",
                    "file_mode",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["info/paths.json", "info/link.json", "info/index.json", "info/has_prefix"]),
    document=_JSON,
    raw=st.booleans(),
    garbage=st.binary(max_size=40),
)
def test_any_info_file_reads_or_is_one_error(
    tmp_path: Path, name: str, document: object, raw: bool, garbage: bytes
) -> None:
    """Whatever an info/ file holds (any JSON shape, any bytes), reading the package's manifest gives a
    manifest or one LockFormatError naming the package: never another exception (exit 3)."""
    archive = tmp_path / "evil-1.0-h0_0.conda"
    archive.write_bytes(_zip(_parts(tmp_path, {name: garbage if raw else json.dumps(document).encode()})))
    try:
        conda_package.read_manifest(archive, _package(archive))
    except LockFormatError as refused:
        assert refused.message.startswith("`evil` 1.0") or "evil 1.0" in refused.message, refused.message
        assert "\n" not in refused.message and refused.hint


def test_an_info_file_too_large_to_read_is_refused_by_its_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockgen.adapters.conda import conda_archive

    monkeypatch.setattr(conda_archive, "INFO_LIMIT", 1024)
    archive = tmp_path / "evil-1.0-h0_0.conda"
    archive.write_bytes(
        _zip(_parts(tmp_path, {"info/paths.json": json.dumps({"paths": [], "pad": "x" * 4096}).encode()}))
    )
    with pytest.raises(LockFormatError, match=r"info/paths.json claims \d+ bytes"):
        conda_package.read_manifest(archive, _package(archive))


# --- links inside a conda archive ------------------------------------------------------------------------


def _linked_archive(folder: Path, members: list[tuple[str, str | None, str]]) -> Path:
    """A `.tar.bz2` of members (name, link target or None for a file, "sym" or "hard"), in this order."""
    archive = folder / "evil-1.0-h0_0.tar.bz2"
    with tarfile.open(archive, "w:bz2", format=tarfile.PAX_FORMAT) as tar:
        for name, link, kind in members:
            entry = tarfile.TarInfo(name)
            if link is None:
                entry.size = 2
                tar.addfile(entry, io.BytesIO(b"x\n"))
            else:
                entry.type, entry.linkname = (tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE), link
                tar.addfile(entry)
    return archive


@pytest.mark.parametrize(
    "members, message",
    [
        # a link to `..` made by the archive, then a member written through it: rattler followed it out (the
        # attack battery's package put PREFIX/hostetc -> /etc, and materialize, pack/unpack and check passed it)
        (
            [("a/b", "..", "sym"), ("a/b/" * 6 + "hostetc", "../" * 12 + "etc", "sym")],
            "written through the archive's link `a/b`",
        ),
        ([("a/b", "..", "sym"), ("a/b/c", "..", "sym")], "written through the archive's link `a/b`"),
        ([("a/b", "..", "sym"), ("a/b/x.txt", None, "file")], "written through the archive's link `a/b`"),
        # a link whose text stays inside but whose path runs through another link of the archive
        ([("a/b", "..", "sym"), ("c", "a/b/..", "sym")], "link `c` -> `a/b/..` points outside"),
        ([("lib/up", "../..", "sym")], "points outside"),
        ([("share/etc", "/etc", "sym")], "points outside"),
        ([("x", "y", "sym"), ("y", "x", "sym"), ("z", "x/w", "sym")], "points outside"),  # a loop of links
        (
            [("share/pw", "../etc/passwd", "hard")],
            "is not to a file of the archive",
        ),  # a hard link is named from the top
        ([("../evil", None, "file")], "leaves the prefix"),
        ([(".lockgen/manifest.json", None, "file")], "lockgen's record of the environment"),
        # a hard link to a symbolic link: rattler links the link itself, whose text then reads from the new folder
        (
            [("s/" * 12 + "l", "../" * 12 + "etc", "sym"), ("hostetc", "s/" * 12 + "l", "hard")],
            "is not to a file of the archive",
        ),
        ([("sub/l", "..", "sym"), ("h", "sub/l", "hard")], "is not to a file of the archive"),
        (
            [("a", "b" * 5000, "sym")],
            "over 4096 characters",
        ),  # and the walk stays linear: 40,000 parts took 11 s  # overwritten, then every check failed
        ([("./.lockgen/services.json", None, "file")], "lockgen's record of the environment"),
    ],
)
def test_links_that_lead_out_through_the_archives_own_links_are_refused(tmp_path: Path, members, message: str) -> None:
    problems = archive_safety.unsafe_members(_linked_archive(tmp_path, members))
    assert problems and any(message in problem for problem in problems), problems


def test_links_that_stay_inside_are_kept(tmp_path: Path) -> None:
    """What real packages hold: versioned library links, a folder link, links to links, `./` names, a hard link."""
    members = [
        ("lib/libz.so.1.3", None, "file"),
        ("lib/libz.so.1", "libz.so.1.3", "sym"),
        ("lib/libz.so", "libz.so.1", "sym"),
        ("lib64", "lib", "sym"),
        ("bin/tool", "../lib/libz.so", "sym"),
        ("./share/doc/readme", None, "file"),
        ("share/doc/copy", "share/doc/readme", "hard"),
        ("a/b", "..", "sym"),  # a link to the top is no escape by itself
    ]
    assert archive_safety.unsafe_members(_linked_archive(tmp_path, members)) == []


def test_a_scanned_archive_keeps_only_the_current_rules_marker(tmp_path: Path) -> None:
    """A marker of older rules was never read again nor removed (a review found them piling up in the store)."""
    archive = _linked_archive(tmp_path, [("lib/libz.so.1.3", None, "file")])
    older = archive.with_name(f"{archive.name}.scanned")
    older.touch()
    archive.with_name(f"{archive.name}.scanned-{archive_safety.SCAN_RULES - 1}").touch()
    archive_safety.check_archive(archive, "`z` 1.3")
    assert sorted(p.name for p in archive.parent.iterdir() if p.name.startswith(archive.name)) == [
        archive.name,
        f"{archive.name}.scanned-{archive_safety.SCAN_RULES}",
    ]


_PARTS = st.lists(st.sampled_from(["a", "b", "..", "."]), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_PARTS, st.one_of(st.none(), _PARTS), st.sampled_from(["sym", "hard"])), max_size=5))
@example([(["a", "b"], [".."], "sym"), (["c"], ["a", "b"], "hard")])  # the review's: `c` a hard link of `a/b -> ..`
@example([(["a", "b"], [".."], "sym"), (["a", "b", "c"], [".."], "sym")])  # the attack battery's: written through `a/b`
def test_what_the_scan_passes_stays_inside_when_rattler_extracts_it(
    tmp_path_factory: pytest.TempPathFactory, drawn: list
) -> None:
    """The oracle is rattler's own extractor, the one materialize runs: an archive the scan passes, extracted by
    it, leaves nothing outside its folder and no link there that resolves outside it (a hard link to a symbolic
    link, which rattler links as the link itself, got `PREFIX/hostetc -> /etc` past the first version of the
    scan: found by a review)."""
    import rattler.package_streaming as streaming

    members = [("/".join(name), "/".join(link) if link else None, kind) for name, link, kind in drawn]
    folder = tmp_path_factory.mktemp("scan")
    archive = _linked_archive(folder, members)
    if archive_safety.unsafe_members(archive):
        return
    root = folder.joinpath(*"abcdefghijklmnop", "prefix")  # deep enough that any climb lands inside `folder`
    root.parent.mkdir(parents=True)
    with archive.open("rb") as stream:
        try:
            streaming.extract_tar_bz2(stream, str(root))
        except Exception:  # rattler refusing a member is no escape
            pass
    above = {root, *root.parents}
    assert [p for p in folder.rglob("*") if p.suffix != ".bz2" and p not in above and root not in p.parents] == []
    for path in root.rglob("*"):
        if path.is_symlink():
            resolved = Path(os.path.realpath(path))
            assert resolved == root or root in resolved.parents, f"{path} -> {resolved}"


def test_a_check_reads_no_manifest_from_an_archive_the_scan_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check --lock reads a conda package's manifest from its archive: one that writes through its own links is
    refused there too, as materialize refuses it (an environment another installer made from it passed)."""
    from lockgen.api.steps.manifest_steps import manifest_of

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOCKGEN_FILE_ROOTS", str(tmp_path))
    archive = _linked_archive(tmp_path, [("a/b", "..", "sym"), ("a/b/a/b/hostetc", "../../../../etc", "sym")])
    with pytest.raises(LockFormatError, match="written through the archive's link"):
        manifest_of(_package(archive), {})


# --- one reading of a conda archive's tar headers ----------------------------------------------------------


def _stacked_package(folder: Path, victim: Path) -> Path:
    """A `.tar.bz2` whose honest `info/paths.json` is followed by a member named by a PAX path (`info/notes.txt`,
    what Python's tarfile keeps) stacked on a GNU long name (`info/paths.json`, what rattler's tar-rs keeps): to
    rattler the package's paths.json is the second, which names `victim` (an absolute path outside any prefix)."""
    import bz2

    from tests.channel_factory import _contents

    info, files = _contents(Pkg("evil", "1.0"))
    evil = json.dumps(
        {"paths_version": 1, "paths": [{"_path": str(victim), "path_type": "hardlink", "size_in_bytes": 2}]}
    ).encode()
    honest = b"".join(member(name.encode(), data) for name, data in sorted({**info, **files}.items()))
    stacked = pax(path="info/notes.txt") + long_name(b"info/paths.json") + member(b"info/x", evil)
    archive = folder / "evil-1.0-h0_0.tar.bz2"
    folder.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(bz2.compress(honest + stacked + END))
    return archive


def test_stacked_extended_headers_in_a_conda_tar_are_refused(tmp_path: Path) -> None:
    """tar-rs and tarfile name the stacked member differently (the oracle shows rattler extracts the hidden
    paths.json); the scan refuses the archive by the header rule before reading any member."""
    import rattler.package_streaming as streaming

    archive = _stacked_package(tmp_path / "built", tmp_path / "victim")
    with tarfile.open(archive) as tar:  # Python's reading: the honest paths.json and a note
        assert [m.name for m in tar if m.name.startswith("info/")][-1] == "info/notes.txt"
    streaming.extract(str(archive), str(tmp_path / "rattler"))  # rattler's reading: the hidden one replaces it
    assert str(tmp_path / "victim") in (tmp_path / "rattler" / "info" / "paths.json").read_text()
    with pytest.raises(
        LockFormatError,
        match=r"reads differently to different tar readers \(header \d+, member `info/notes.txt`: .*after another "
        r"extended header",
    ):
        archive_safety.check_archive(archive, "`evil` 1.0")
    assert not list(archive.parent.glob("*.scanned*"))


@pytest.mark.slow
def test_materialize_leaves_a_file_a_stacked_header_names_outside_the_prefix(tmp_path: Path) -> None:
    """The attack battery's package: rattler unlinked the absolute path its hidden paths.json names. Refused now,
    by the package's name, and the victim is still there."""
    import asyncio

    import rattler.index

    from tests.channel_factory import cpu_lock

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    _stacked_package(channel / "linux-64", victim)
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))
    lock = cpu_lock(tmp_path, channel.as_uri(), ["evil"])
    done = run_cli(
        "materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(tmp_path / "home")}
    )
    assert done.returncode == 1 and "error: `evil` 1.0 (file://" in done.stderr, done.stderr
    assert (
        "reads differently to different tar readers" in done.stderr
        and "hint:" in done.stderr
        and "Traceback" not in done.stderr
    )
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("suffix", [".tar.bz2", ".conda"])
def test_each_tar_of_a_conda_archive_is_decompressed_once_per_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """The header rule judges each header as tarfile reads it: the scan and each reading of the manifest open (and
    decompress) every tar they read once; the rule's first version walked each tar, then decompressed it again."""
    archive = write_package(Pkg("once", "1.0", archive=suffix, files={"bin/tool": "#!/bin/sh\n"}), tmp_path / "built")
    opened: list[object] = []
    real = conda_archive._opened

    def counted(path: Path, place: tuple[int, int] | None) -> object:
        opened.append(place)
        return real(path, place)

    monkeypatch.setattr(conda_archive, "_opened", counted)
    archive_safety.check_archive(archive, "`once` 1.0")
    assert len(opened) == (1 if suffix == ".tar.bz2" else 2)  # the one tar, or info and pkg
    opened.clear()
    package = replace(_package(archive), name="once")
    assert "bin/tool" in {f.path for f in conda_package.read_manifest(archive, package).files}
    assert len(opened) == 2  # the info read, then the payload read (a .tar.bz2's one tar for each)


def _apart(construct: str) -> tuple[bytes, str]:
    """A tar that Python's tarfile and rattler's tar-rs read apart (each found with rattler as the oracle), and the
    refusal's words: tarfile stops silently at a time or mode field it cannot parse, where tar-rs reads on; tarfile
    takes a Solaris `X` header as PAX, tar-rs as a file; tarfile stops reading PAX records at one with no key, tar-rs
    reads on; of a key given twice tarfile keeps the last, tar-rs the first."""
    honest = member(b"info/paths.json", b'{"paths": []}')

    def fields(name: bytes, data: bytes, at: int, value: bytes) -> bytes:
        block = bytearray(header(name, len(data)))
        block[at : at + len(value)] = value
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\x00 " % sum(block)
        return bytes(block) + padded(data)

    def records(*pairs: bytes) -> bytes:
        return member(b"PaxHeader", b"".join(pairs), b"x")

    hidden = member(b"bin/hidden", b"#!/bin/sh\necho pwned\n")
    return {
        "time field": (
            honest + fields(b"bin/a", b"a\n", 136, b"zzzzzzzzzzz\x00") + hidden + END,
            "member `bin/a`: its time field is not plain octal",
        ),
        "mode field": (
            honest + fields(b"bin/a", b"a\n", 100, b"zzzzzzz\x00") + hidden + END,
            "member `bin/a`: its mode field is not plain octal",
        ),
        "Solaris X header": (
            honest + member(b"PaxHeader", b"20 path=bin/hidden\n", b"X") + member(b"bin/a", b"a\n") + END,
            "a Solaris extended header",
        ),
        "PAX record with no key": (
            honest + records(b"5 =x\n", b"19 path=bin/hidden\n") + member(b"bin/a", b"a\n") + END,
            "member `bin/hidden`: a PAX record with no key",
        ),
        "PAX key twice": (
            honest + records(b"19 path=bin/hidden\n", b"14 path=bin/a\n") + member(b"bin/a", b"a\n") + END,
            "a PAX header with two `path` records",
        ),
    }[construct]


@pytest.mark.parametrize(
    "construct", ["time field", "mode field", "Solaris X header", "PAX record with no key", "PAX key twice"]
)
def test_a_conda_tar_that_tarfile_and_tar_rs_read_apart_is_refused(tmp_path: Path, construct: str) -> None:
    """rattler's extractor is the oracle: it lands a file tarfile never read (or misses one it read); the reader
    refuses the archive naming the member, before a reading of it ends."""
    import bz2

    import rattler.package_streaming as streaming

    raw, said = _apart(construct)
    archive = tmp_path / "apart-1.0-h0_0.tar.bz2"
    archive.write_bytes(bz2.compress(raw))
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as tar:
        python_reads = {m.name for m in tar if m.isfile()}
    streaming.extract(str(archive), str(tmp_path / "landed"))
    landed = {str(p.relative_to(tmp_path / "landed")) for p in (tmp_path / "landed").rglob("*") if p.is_file()}
    assert landed != python_reads, (landed, python_reads)
    with pytest.raises(LockFormatError, match=re.escape(said)):
        list(conda_archive.members(archive, "all"))


# --- what rattler extracted, judged before anything is linked ----------------------------------------------


def _extracted(tmp_path: Path, pkg: Pkg) -> tuple[Path, "object"]:
    """A real package extracted by rattler's own extractor, and its manifest as lockgen reads the archive."""
    import rattler.package_streaming as streaming

    archive = write_package(pkg, tmp_path / "built")
    folder = tmp_path / "extracted"
    streaming.extract(str(archive), str(folder))
    package = replace(_package(archive), name=pkg.name, version=pkg.version, build=pkg.build)
    return folder, conda_package.read_manifest(archive, package)


def _tampered(folder: Path, how: str) -> str:
    """Changes an honest extracted folder as a reader that parts from lockgen's would; returns the words of the
    refusal."""
    if how == "extra file":
        (folder / "bin" / "extra").write_text("#!/bin/sh\n")
        return "`bin/extra` landed, and paths.json does not state it"
    if how == "other bytes":
        (folder / "bin" / "tool").write_text("#!/bin/sh\nrm -rf ~\n")
        return "`bin/tool` is 19 bytes, where paths.json states 18"
    if how == "same size, other bytes":
        (folder / "bin" / "tool").write_text("#!/bin/sh\necho HI\n")
        return "`bin/tool` does not have the sha256 paths.json states"
    if how == "file made a link out":
        (folder / "bin" / "tool").unlink()
        (folder / "bin" / "tool").symlink_to("/etc/passwd")
        return "`bin/tool` is not the regular file paths.json states"
    if how == "link retargeted out":
        (folder / "lib" / "libz.so").unlink()
        (folder / "lib" / "libz.so").symlink_to("../../../etc/passwd")
        return "link `lib/libz.so` -> `../../../etc/passwd`, where the archive as lockgen read it says `libz.so.1`"
    if how == "missing":
        (folder / "bin" / "tool").unlink()
        return "`bin/tool` is stated by paths.json and did not land"
    if how == "fifo":
        os.mkfifo(folder / "etc" / "pipe")
        return "`etc/pipe` landed, and paths.json does not state it"
    if how == "info link out":
        (folder / "info" / "recipe").symlink_to("/etc")
        return "link `info/recipe` -> `/etc` points outside the package"
    raise AssertionError(how)


_JUDGED = Pkg(
    "judged",
    "1.0",
    files={"bin/tool": "#!/bin/sh\necho hi\n", "lib/libz.so.1": "z"},
    links={"lib/libz.so": "libz.so.1"},
)


def test_an_honest_extracted_package_is_what_its_paths_json_states(tmp_path: Path) -> None:
    from lockgen.adapters.conda.rattler_cache import landed_problems

    folder, manifest = _extracted(tmp_path, _JUDGED)
    assert landed_problems(folder, manifest) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "how",
    [
        "extra file",
        "other bytes",
        "same size, other bytes",
        "file made a link out",
        "link retargeted out",
        "missing",
        "fifo",
        "info link out",
    ],
)
def test_what_landed_other_than_paths_json_states_is_named(tmp_path: Path, how: str) -> None:
    from lockgen.adapters.conda.rattler_cache import landed_problems

    folder, manifest = _extracted(tmp_path, _JUDGED)
    words = _tampered(folder, how)
    assert words in landed_problems(folder, manifest), landed_problems(folder, manifest)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_package_rattler_extracts_otherwise_is_refused_before_it_is_linked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A differential the header rule does not know (simulated: rattler's extractor, wrapped, plants a link out of
    the package): materialize refuses the package naming the member, links nothing, leaves no folder in the cache,
    and the file the link names is untouched."""
    import asyncio

    import rattler.index
    import rattler.package_streaming as streaming

    from lockgen.api import materialize as api
    from tests.channel_factory import cpu_lock

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    channel = tmp_path / "channel"
    write_package(_JUDGED, channel / "linux-64")
    (channel / "noarch").mkdir()
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = cpu_lock(tmp_path, channel.as_uri(), ["judged"])
    real = streaming.extract

    def parting(archive: str, dest: str) -> tuple[bytes, bytes]:
        found = real(archive, dest)
        Path(dest, "bin", "tool").unlink()
        Path(dest, "bin", "tool").symlink_to(victim)
        return found

    monkeypatch.setattr(streaming, "extract", parting)
    with pytest.raises(
        LockFormatError,
        match=r"`judged` 1.0 \(file://.*judged-1.0-h0_0.conda\) is refused: as rattler extracted it, `bin/tool` is not "
        r"the regular file",
    ):
        api.materialize(lock, None, tmp_path / "env", lambda _: None)
    assert victim.read_text() == "keep me\n" and not (tmp_path / "env").exists()
    cache = tmp_path / "home" / "rattler-cache"
    assert (
        not [p.name for p in cache.iterdir() if p.name.startswith(("judged", ".extracting"))]
        if cache.exists()
        else True
    )
    monkeypatch.setattr(streaming, "extract", real)  # the honest extractor: the same lock materializes
    api.materialize(lock, None, tmp_path / "env", lambda _: None)
    assert (tmp_path / "env" / "bin" / "tool").read_text() == "#!/bin/sh\necho hi\n"


_HONEST_SHAPES = (
    "plain",
    "pax path",
    "gnu long name",
    "link then file",
    "long pax path",
    "long gnu name",
    "ustar prefix",
)
_SHAPES = st.sampled_from(
    [
        *_HONEST_SHAPES,
        "pax then gnu",
        "gnu then pax",
        "two pax",
        "nul-led size",
        "bad time field",
        "solaris x",
        "pax record with no key",
        "pax key twice",
    ]
)


def _shaped(shape: str, index: int) -> bytes:
    """One member of a conda tar in a header shape of the attack battery's (stacked extended headers, NUL-led
    fields, a link and then a file of its name), a long name (past the header's 100 bytes: a PAX path, a GNU long
    name, ustar's prefix field), or one found reading the rule's one-pass walk against rattler (a time field
    tarfile cannot parse, a Solaris `X` header, PAX records with no key or a key twice)."""
    name, other, data = f"share/f{index}", f"share/g{index}", f"content {index}\n".encode()
    long = f"share/{'long-folder-' * 12}/f{index}"
    if shape in ("long pax path", "long gnu name", "ustar prefix"):
        if shape == "ustar prefix":
            info = tarfile.TarInfo(long)
            info.size = len(data)
            return info.tobuf(tarfile.USTAR_FORMAT) + padded(
                data
            )  # the folders in the prefix field, the file's name after
        return (pax(path=long) if shape == "long pax path" else long_name(long.encode())) + member(b"x", data)
    if shape == "bad time field":
        block = bytearray(header(name.encode(), len(data)))
        block[136:148] = b"zzzzzzzzzzz\x00"
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\x00 " % sum(block)
        return bytes(block) + padded(data)
    if shape == "solaris x":
        return member(b"PaxHeader", record("path", other), b"X") + member(name.encode(), data)
    if shape == "pax record with no key":
        return member(b"PaxHeader", b"5 =x\n" + record("path", name), b"x") + member(other.encode(), data)
    if shape == "pax key twice":
        return member(b"PaxHeader", record("path", name) + record("path", other), b"x") + member(b"x", data)
    if shape == "plain":
        return member(name.encode(), data)
    if shape == "pax path":
        return pax(path=name) + member(b"x", data)
    if shape == "gnu long name":
        return long_name(name.encode()) + member(b"x", data)
    if shape == "pax then gnu":
        return pax(path=name) + long_name(other.encode()) + member(b"x", data)
    if shape == "gnu then pax":
        return long_name(name.encode()) + pax(path=other) + member(b"x", data)
    if shape == "two pax":
        return pax(path=name) + pax(path=other) + member(b"x", data)
    if shape == "nul-led size":
        return header(name.encode(), size_field=b"\x00" + b"%010o\x00" % len(data)) + padded(data)
    link = tarfile.TarInfo(name)
    link.type, link.linkname = tarfile.SYMTYPE, f"g{index}"
    return link.tobuf(tarfile.USTAR_FORMAT) + member(name.encode(), data)  # a link, then a file of its name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_SHAPES, min_size=1, max_size=5))
@example(["pax then gnu"])
@example(["plain", "bad time field", "plain"])
@example(["solaris x"])
@example(["pax record with no key"])
@example(["pax key twice"])
@example(["long pax path", "long gnu name", "ustar prefix"])
def test_a_conda_tar_the_header_rule_passes_lands_as_lockgen_read_it(
    tmp_path_factory: pytest.TempPathFactory, shapes: list[str]
) -> None:
    """rattler's extractor (tar-rs) is the oracle: for any tar the header rule passes, the regular files it lands
    are exactly the members, with the contents, that lockgen's reader reads; the rest is refused by the rule."""
    import bz2

    import rattler.package_streaming as streaming

    folder = tmp_path_factory.mktemp("shapes")
    archive = folder / "shaped-1.0-h0_0.tar.bz2"
    archive.write_bytes(bz2.compress(b"".join(_shaped(shape, index) for index, shape in enumerate(shapes)) + END))
    try:
        read = {
            name: data
            for name, member_, data in conda_archive.members(archive, "all", lambda _: True)
            if member_.isfile()
        }
    except LockFormatError as exc:
        assert "reads differently to different tar readers" in exc.message
        assert any(shape not in _HONEST_SHAPES for shape in shapes)
        return
    landed = folder / "landed"
    with archive.open("rb") as stream:
        try:
            streaming.extract_tar_bz2(stream, str(landed))
        except OSError:  # rattler refusing the tar lands nothing to compare
            return
    files = {
        str(p.relative_to(landed)): p.read_bytes() for p in landed.rglob("*") if p.is_file() and not p.is_symlink()
    }
    assert files == read
