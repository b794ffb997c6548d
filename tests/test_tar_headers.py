"""A layer whose tar headers Python's tarfile (lockgen's unpack) and Go's archive/tar (a runtime's: umoci here) read
differently is refused (`adapters/tar_headers`): an attack battery built ten such layers, each passing `check
--image --lock` while umoci wrote /etc/ld.so.preload or changed a locked program. umoci is the oracle: each
crafted layer is one it unpacks, to another tree than lockgen saw. Tars that real writers make pass: Python's in
its three formats (hypothesis), Go's (umoci repack)."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.tar_headers import EXTENDED_LIMIT, AmbiguousTar, HeaderRule, check_headers, ruled_members
from tests.image_run import require
from tests.test_image_whole import TAG, image_files, refused, rewritten

EVIL = b"/opt/env/lib/evil.so\n"
END = bytes(1024)


def header(
    name: bytes,
    size: int = 0,
    kind: bytes = b"0",
    magic: bytes = b"ustar\x0000",
    prefix: bytes = b"",
    size_field: bytes | None = None,
    checksum: bytes = b"%06o\x00 ",
    trailer: bytes = b"",
) -> bytes:
    """One 512-byte header as the ustar layout places its fields, its checksum over the block (`checksum`: how
    the sum is written)."""
    block = bytearray(512)
    for offset, value in (
        (0, name),
        (100, b"0000755\x00"),
        (108, b"0000000\x00"),
        (116, b"0000000\x00"),
        (136, b"00000000000\x00"),
        (156, kind),
        (257, magic),
        (345, prefix),
        (508, trailer),
    ):
        block[offset : offset + len(value)] = value
    block[124:136] = size_field if size_field is not None else b"%011o\x00" % size
    block[148:156] = b" " * 8
    block[148:156] = checksum % sum(block)
    return bytes(block)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def member(name: bytes, data: bytes = b"", kind: bytes = b"0", **fields: bytes) -> bytes:
    return header(name, len(data), kind, **fields) + padded(data)


def record(key: str, value: str) -> bytes:
    """A PAX record, `LENGTH KEY=VALUE\\n`, whose length counts its own digits."""
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode() + body


def pax(**records: str) -> bytes:
    return member(b"PaxHeader", b"".join(record(key.replace("_", "."), value) for key, value in records.items()), b"x")


def long_name(name: bytes) -> bytes:
    return member(b"././@LongLink", name + b"\x00", b"L", magic=b"ustar  \x00")


def crafted(locked: dict[str, bytes]) -> dict[str, tuple[bytes, str]]:
    """Each construct the battery found, as a layer over an honest image whose locked files are `locked`: the
    layer and the refusal's words."""
    libfoo, foo = locked["opt/env/lib/libfoo.txt"], locked["opt/env/bin/foo"]
    inner = member(b"opt/env/lib/libfoo.txt", libfoo) + bytes(512)  # Python: an honest member, then the end
    hidden = b"opt/env/lib/.wh..wh.pad"
    go_pax, python_pax = record("path", "etc/ld.so.preload"), record("path", hidden.decode())
    go_name = b"opt/env/bin/foo"
    return {
        "size field led by a NUL": (
            header(b"opt/env/lib/libfoo.txt", size_field=b"\x00" + b"%010o\x00" % len(inner))
            + inner
            + member(b"etc/ld.so.preload", EVIL)
            + END,
            "not plain octal",
        ),
        "a PAX path, then a GNU long name": (
            pax(path=hidden.decode()) + long_name(b"etc/ld.so.preload") + member(b"x", EVIL) + END,
            "after another extended header",
        ),
        "two PAX headers": (
            pax(path=hidden.decode()) + pax(path="etc/ld.so.preload") + member(b"x", EVIL) + END,
            "after another extended header",
        ),
        "two GNU long names": (
            long_name(hidden) + long_name(b"etc/ld.so.preload") + member(b"x", EVIL) + END,
            "after another extended header",
        ),
        "PAX records in the padding": (
            header(b"PaxHeader", len(go_pax), b"x") + padded(go_pax + python_pax) + member(b"x", EVIL) + END,
            "after its declared size",
        ),
        "a long name past its size": (
            header(b"././@LongLink", len(go_name), b"L", magic=b"ustar  \x00")
            + padded(go_name + b"/.wh..wh.x\x00")
            + member(b"x", b"#!/bin/sh\necho pwned\n")
            + END,
            "after its declared size",
        ),
        "a file whose PAX path ends in /": (
            pax(path=hidden.decode() + "/")
            + header(b"x", len(evil := member(b"etc/ld.so.preload", EVIL)), b"\x00")
            + evil
            + END,
            "a folder by one of its names",
        ),
        "a prefix without ustar magic": (
            header(b"lib/libfoo.txt", len(libfoo), magic=bytes(8), prefix=b"opt/env") + padded(libfoo) + END,
            "prefix field without ustar magic",
        ),
        "GNU.sparse.name on a plain file": (
            pax(path="etc/ld.so.preload", GNU_sparse_name=hidden.decode()) + member(b"x", EVIL) + END,
            "GNU.sparse",
        ),
        "GNU.sparse.realsize on a plain file": (
            pax(GNU_sparse_realsize=str(len(foo)))
            + member(b"opt/env/bin/foo", foo + b"echo pwned > /tmp/pwned\n")
            + END,
            "GNU.sparse",
        ),
        # a review's three more: Python stops at a checksum led by a NUL (it reads 0), Go reads on; Python joins a GNU
        # header's atime as a prefix, Go does not; Go reads a star header's prefix as 131 bytes, Python as 155
        "a checksum led by a NUL": (
            member(b"opt/env/lib/libfoo.txt", libfoo)
            + header(b"etc/ld.so.preload", len(EVIL), checksum=b"\x00%06o\x00")
            + padded(EVIL)
            + END,
            "checksum",
        ),
        "a GNU header with an atime": (
            header(b"etc/ld.so.preload", len(EVIL), magic=b"ustar  \x00", prefix=b"00000000001") + padded(EVIL) + END,
            "prefix field without ustar magic",
        ),
        "a star header's long prefix": (
            header(b"ld.so.preload", len(EVIL), prefix=b"etc/" + b"p" * 127 + b"/x", trailer=b"tar\x00")
            + padded(EVIL)
            + END,
            "star-format",
        ),
    }


LOCKED = {"opt/env/lib/libfoo.txt": b"foo 1.0\n", "opt/env/bin/foo": b"#!/bin/sh\necho foo\n"}


TWO_ENDS = {
    "a checksum led by a NUL",
    "a GNU header with an atime",
    "a star header's long prefix",
}  # umoci's tree is not the oracle's shape here


@pytest.mark.parametrize("construct", sorted(crafted(LOCKED)))
def test_each_construct_read_two_ways_is_refused(construct: str) -> None:
    layer, said = crafted(LOCKED)[construct]
    with pytest.raises(AmbiguousTar, match=said.replace("`", ".")):
        check_headers(io.BytesIO(layer))


@pytest.mark.slow
@pytest.mark.parametrize("construct", sorted(set(crafted(LOCKED)) - TWO_ENDS))
def test_an_image_with_it_is_refused_where_the_runtime_unpacks_another_tree(
    construct: str, honest: tuple[Path, Path], tmp_path: Path
) -> None:
    lock, layout = honest
    locked = {name: data for name, data in image_files(layout).items() if data is not None}
    layer, said = crafted(locked)[construct]
    forged, _ = rewritten(layout, tmp_path / "forged", [layer])
    refused(str(forged), lock, said)
    rootfs = tmp_path / "rootfs"
    unpacked = subprocess.run(
        [require("umoci"), "raw", "unpack", "--rootless", "--image", f"{forged}:{TAG}", str(rootfs)],
        capture_output=True,
        text=True,
    )
    assert unpacked.returncode == 0, unpacked.stderr  # the runtime takes it...
    seen = {
        path: (rootfs / path).read_bytes()
        for path in ("etc/ld.so.preload", "opt/env/bin/foo", "lib/libfoo.txt")
        if (rootfs / path).is_file()
    }
    assert (
        seen.get("etc/ld.so.preload") == EVIL
        or seen.get("opt/env/bin/foo", locked["opt/env/bin/foo"]) != locked["opt/env/bin/foo"]
        or "lib/libfoo.txt" in seen
    ), seen  # ...to another tree


@pytest.fixture
def honest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    from tests.test_export import make_lock, run_export

    lock = make_lock(tmp_path, "1.0")
    run_export(lock, tmp_path / "honest", tmp_path / "home", monkeypatch)
    return lock, tmp_path / "honest"


_NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00/"), min_size=1, max_size=40)
_ENTRIES = st.lists(
    st.tuples(
        st.lists(_NAMES, min_size=1, max_size=6),
        st.sampled_from(["file", "folder", "link", "hard"]),
        st.binary(max_size=700),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=_ENTRIES, tar_format=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]))
def test_tars_pythons_tarfile_writes_pass(entries: list, tar_format: int) -> None:
    """Long names (past 100 bytes: prefix, GNU long names or PAX paths), any UTF-8, every member kind."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format, encoding="utf-8") as tar:
        for parts, kind, data in entries:
            info = tarfile.TarInfo("/".join(parts))
            if kind == "file":
                info.size = len(data)
                try:
                    tar.addfile(info, io.BytesIO(data))
                except ValueError:  # a name the format cannot hold (ustar): the writer refuses it
                    continue
                continue
            info.type = {"folder": tarfile.DIRTYPE, "link": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind]
            info.linkname = "target/" * 20 if kind != "folder" else ""
            try:
                tar.addfile(info)
            except ValueError:
                continue
    raw.seek(0)
    check_headers(raw)


@pytest.mark.parametrize("tar_format", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_a_long_name_cut_at_a_slash_in_its_header_passes(tar_format: int) -> None:
    """A PAX or GNU writer puts the name cut at 100 bytes in the header, which may end in `/` for a file: the
    layer of a venv at a long path (a team image on an adopted base) was refused as if the file were a folder."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format) as tar:
        info = tarfile.TarInfo("a" * 99 + "/site-packages/module.py")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x=1"))
    blocks = [raw.getvalue()[at : at + 512] for at in range(0, len(raw.getvalue()), 512)]
    assert any(block[:99] == b"a" * 99 and block[99:100] == b"/" for block in blocks)  # the member's own header
    raw.seek(0)
    check_headers(raw)


def test_an_old_style_folder_named_with_a_slash_passes() -> None:
    """bsdtar's v7 format writes a folder as a type-NUL member named `dir/`: a folder to Python and Go alike (a
    review found a first rule that refused every such member)."""
    check_headers(
        io.BytesIO(
            header(b"./", kind=b"\x00", magic=bytes(8))
            + header(b"./dir/", kind=b"\x00", magic=bytes(8))
            + member(b"./dir/file", b"x", b"\x00", magic=bytes(8))
            + END
        )
    )
    with tarfile.open(fileobj=io.BytesIO(header(b"./dir/", kind=b"\x00", magic=bytes(8)) + END)) as tar:
        assert tar.getmembers()[0].isdir()


@pytest.mark.slow
def test_a_layer_gos_tar_writes_passes(tmp_path: Path) -> None:
    """umoci (Go's archive/tar) writing long names, links and folders: its layer passes as it is."""
    umoci = require("umoci")
    subprocess.run([umoci, "init", "--layout", str(tmp_path / "img")], check=True, capture_output=True)
    subprocess.run([umoci, "new", "--image", f"{tmp_path / 'img'}:t"], check=True, capture_output=True)
    subprocess.run(
        [umoci, "unpack", "--rootless", "--image", f"{tmp_path / 'img'}:t", str(tmp_path / "bundle")],
        check=True,
        capture_output=True,
    )
    deep = tmp_path / "bundle" / "rootfs" / ("long-folder-name-" * 8) / ("ü" * 60)
    deep.mkdir(parents=True)
    (deep / ("file-" * 40)).write_bytes(b"x" * 1000)
    (deep / "link").symlink_to("../" + "target-" * 30)
    subprocess.run(
        [umoci, "repack", "--image", f"{tmp_path / 'img'}:t", str(tmp_path / "bundle")], check=True, capture_output=True
    )
    layers = [
        path for path in (tmp_path / "img" / "blobs" / "sha256").iterdir() if path.read_bytes()[:2] == b"\x1f\x8b"
    ]
    assert layers
    for layer in layers:
        check_headers(io.BytesIO(gzip.decompress(layer.read_bytes())))
    shutil.rmtree(tmp_path / "bundle", ignore_errors=True)


# --- one reading: the rule fed as a reader reads -----------------------------------------------------------


def _verdict(judge: Callable[[], None]) -> str:
    try:
        judge()
    except AmbiguousTar as exc:
        return str(exc)
    return "passed"


_TARS = [layer for layer, _ in crafted(LOCKED).values()] + [
    member(b"a", b"x" * 700)
    + pax(path="b" * 150)
    + member(b"x", b"y" * 1100)
    + long_name(b"c" * 200)
    + member(b"x")
    + END,
    member(b"a", b"x" * 10) + END + b"bytes after the end block, which no reader reads",
    member(b"a", b"x" * 10),  # no end block: tarfile's to judge
    pax(path="only-an-extended-header"),
]


@settings(max_examples=120, deadline=None)
@given(tar=st.sampled_from(_TARS), cuts=st.lists(st.integers(min_value=1, max_value=1500), max_size=12))
def test_the_rule_fed_in_any_pieces_judges_as_a_walk_of_the_whole(tar: bytes, cuts: list[int]) -> None:
    """`HeaderRule` is fed what a reader reads, in its pieces: its verdict (pass, or the refusal's words) is the
    whole walk's (`check_headers` over a seekable stream, which seeks past file data)."""
    rule = HeaderRule()

    def fed() -> None:
        at = 0
        for cut in cuts:
            rule.feed(tar[at : at + cut])
            at += cut
        rule.feed(tar[at:])
        rule.end()

    assert _verdict(fed) == _verdict(lambda: check_headers(io.BytesIO(tar)))


def test_an_extended_header_past_go_s_limit_is_refused_unread() -> None:
    """A PAX header or long name over 1 MiB (Go refuses it; Python read it whole, however large it claimed to be)."""
    huge = header(b"PaxHeader", EXTENDED_LIMIT + 1, b"x")
    with pytest.raises(AmbiguousTar, match=f"a PAX header of {EXTENDED_LIMIT + 1} bytes"):
        check_headers(io.BytesIO(huge))  # refused from its header alone: its content is not there to read


def test_a_tar_tarfile_stops_reading_before_its_end_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """tarfile ends its reading silently at a header it cannot parse (past the first); the rule walks on to the end
    block, and a tar whose members tarfile did not all read is refused, naming the first it missed (simulated: a
    tarfile that cannot parse the second header, as a later Python's stricter parser may not)."""
    real = tarfile.TarInfo.fromtarfile.__func__
    calls = []

    def stopping(cls: type[tarfile.TarInfo], tar: tarfile.TarFile) -> tarfile.TarInfo:
        calls.append(1)
        if len(calls) == 2:
            raise tarfile.InvalidHeaderError("bad header")
        return real(cls, tar)

    monkeypatch.setattr(tarfile.TarInfo, "fromtarfile", classmethod(stopping))
    raw = member(b"a", b"1") + member(b"b", b"2") + member(b"c", b"3") + END
    read = []
    with pytest.raises(AmbiguousTar, match="header 2, member `b`: Python's tarfile stops reading there"):
        for info, _ in ruled_members(io.BytesIO(raw)):
            read.append(info.name)
    assert read == ["a"]
