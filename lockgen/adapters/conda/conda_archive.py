"""The one reader of conda package archives, strict so that lockgen reads what rattler installs.

A `.conda` is a zip of stored members: `metadata.json`, one `info-*.tar.zst` and at most one `pkg-*.tar.zst`.
Python's `zipfile` reads members through the central directory at the end of the file; rattler streams the
local file headers from offset 0. An archive where the two disagree (a second `info-*.tar.zst`, a local header
naming another member, members out of order, overlapping or with bytes between them) would show lockgen a
benign `paths.json` while rattler links another. So this reader parses both itself and refuses the archive
unless they list the same members, by name, order, offset, sizes and CRC, packed from offset 0 to the central
directory, which runs to the end-of-central-directory record at the end of the file (zip64 records
included). Data descriptors, encryption and compression are refused: rattler's streaming reader cannot
read the first, and `.conda` writers (conda-package-handling, rattler) store every member.

A `.tar.bz2` is one tar stream, read in order as rattler reads it. Members come out in stream order with
the content of those asked for; any unreadable stream is one `LockFormatError` naming the archive.

Every tar stream is held to `tar_headers`' rule, the one that closed the same hole for image layers: rattler
extracts with tar-rs, which reads stacked extended headers (a PAX path and a GNU long name before one member)
differently from Python's `tarfile` (it keeps the GNU name, Python the PAX one), so a package could show lockgen one
`info/paths.json` and give rattler another. Each tar is decompressed once per reading: `tarfile` reads it through
`tar_headers.ruled_members`, which judges every header before tarfile reads it, and reads on to the end-of-archive
block once tarfile is done, so a member is handed out only once its header (and every one before it) passed, and
an archive with any header two readers could read differently is refused, naming the header's member, before
`members` ends: a reader that reads to the end (each of lockgen's does) acts on nothing the rule refuses."""

from __future__ import annotations

import bz2
import contextlib
import struct
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import zstandard

from lockgen.adapters.tar_headers import AmbiguousTar, ruled_members
from lockgen.model.names import shown
from lockgen.errors import LockFormatError

_LOCAL, _CENTRAL, _END, _END64, _LOCATOR = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # signature … crc, sizes, name and extra lengths
_CENTRAL_HEADER = struct.Struct("<4s6H3I5H2I")  # … comment length, disk, attributes, local offset
_END_RECORD = struct.Struct("<4s4H2IH")
_END64_RECORD = struct.Struct("<4sQ2H2I4Q")
_LOCATOR_RECORD = struct.Struct("<4sIQI")
_ZIP64_TAG, _FULL32, _FULL16 = 1, 0xFFFFFFFF, 0xFFFF
_ENCRYPTED, _DESCRIPTOR = 0x1, 0x8


@dataclass(frozen=True)
class _Member:
    name: str
    offset: int  # of its local header
    flags: int
    method: int
    crc: int
    size: int  # stored: compressed and uncompressed sizes are equal
    data: int = 0  # where its bytes start (after the local header)


def _refused(archive: Path, what: str) -> LockFormatError:
    return LockFormatError(
        f"`{archive.name}` is refused: {what}",
        "its zip local headers and central directory must list the same members, as conda and rattler write "
        "them; this archive reads differently to different tools: nothing was installed",
    )


def _zip64(extra: bytes, wanted: list[bool]) -> list[int]:
    """The 64-bit values a zip64 extra field holds for the fields marked in `wanted` (in the zip order)."""
    at = 0
    while at + 4 <= len(extra):
        tag, size = struct.unpack_from("<2H", extra, at)
        if tag == _ZIP64_TAG:
            values = list(struct.unpack_from(f"<{size // 8}Q", extra, at + 4))
            return [values.pop(0) if want and values else -1 for want in wanted]
        at += 4 + size
    return [-1 for _ in wanted]


def _end_of_directory(archive: Path, stream: IO[bytes], length: int) -> tuple[int, int, int]:
    """(entries, central directory offset, where it must end) from the end records, which end the file."""
    stream.seek(max(0, length - _END_RECORD.size - 0xFFFF))
    tail = stream.read()
    start = length - len(tail)
    at = next(
        (
            i
            for i in range(len(tail) - _END_RECORD.size, -1, -1)
            if tail[i : i + 4] == _END and i + _END_RECORD.size + struct.unpack_from("<H", tail, i + 20)[0] == len(tail)
        ),
        None,
    )
    if at is None:
        raise _refused(archive, "it is not a zip (no end of central directory at its end)")
    _, disk, disk_of_directory, here, entries, size, offset, _ = _END_RECORD.unpack_from(tail, at)
    end = start + at
    locator = at - _LOCATOR_RECORD.size
    signature, _, end64, disks = _LOCATOR_RECORD.unpack_from(tail, locator) if locator >= 0 else (b"", 0, 0, 0)
    if signature == _LOCATOR or _FULL32 in (size, offset) or _FULL16 in (here, entries):  # zip64 records rule
        stream.seek(end64)
        record = stream.read(_END64_RECORD.size)
        if (
            signature != _LOCATOR
            or disks != 1
            or len(record) != _END64_RECORD.size
            or record[:4] != _END64
            or end64 + 12 + struct.unpack_from("<Q", record, 4)[0] != start + locator
        ):
            raise _refused(archive, "its zip64 end records are not where its end record says")
        _, _, _, _, disk, disk_of_directory, here, entries, size, offset = _END64_RECORD.unpack(record)
        end = end64
    if disk or disk_of_directory or here != entries or offset + size != end:
        raise _refused(archive, "its central directory is not the one block just before its end records")
    return entries, offset, end


def _central(archive: Path, stream: IO[bytes], entries: int, offset: int, end: int) -> list[_Member]:
    stream.seek(offset)
    block = stream.read(end - offset)
    members, at = [], 0
    for _ in range(entries):
        if len(block) < at + _CENTRAL_HEADER.size or block[at : at + 4] != _CENTRAL:
            raise _refused(archive, "its central directory holds fewer entries than its end record says")
        (_, _, _, flags, method, _, _, crc, packed, size, name_length, extra_length, comment_length, _, _, _, local) = (
            _CENTRAL_HEADER.unpack_from(block, at)
        )
        name = block[at + _CENTRAL_HEADER.size : at + _CENTRAL_HEADER.size + name_length]
        extra = block[at + _CENTRAL_HEADER.size + name_length : at + _CENTRAL_HEADER.size + name_length + extra_length]
        big = _zip64(extra, [size == _FULL32, packed == _FULL32, local == _FULL32])
        size, packed, local = (b if b >= 0 else v for b, v in zip(big, (size, packed, local)))
        if packed != size:
            raise _refused(
                archive, f"member `{shown(name.decode('latin-1'))}` is compressed (a .conda stores its members)"
            )
        members.append(_Member(_name(archive, name), local, flags, method, crc, size))
        at += _CENTRAL_HEADER.size + name_length + extra_length + comment_length
    if at != len(block):
        raise _refused(archive, "its central directory holds more than its end record lists")
    return members


def _name(archive: Path, raw: bytes) -> str:
    if not raw.isascii() or not raw.decode().isprintable():
        raise _refused(archive, f"a member is named `{shown(raw.decode('latin-1'))}`, not a .conda member name")
    return raw.decode()


def _walk_locals(archive: Path, stream: IO[bytes], listed: list[_Member], directory: int) -> list[_Member]:
    """The central directory's members, each checked against the local header the stream holds at its place:
    members follow each other from offset 0 up to the central directory, with nothing between them."""
    at, placed = 0, []
    for member in listed:
        stream.seek(at)
        header = stream.read(_LOCAL_HEADER.size)
        if member.offset != at or len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL:
            raise _refused(archive, f"member `{member.name}` is not the next local header of the zip (offset {at})")
        _, _, flags, method, _, _, crc, packed, size, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        name = stream.read(name_length)
        big = _zip64(stream.read(extra_length), [size == _FULL32, packed == _FULL32])
        size, packed = (b if b >= 0 else v for b, v in zip(big, (size, packed)))
        if name != member.name.encode() or (flags, method, crc, packed, size) != (
            member.flags,
            member.method,
            member.crc,
            member.size,
            member.size,
        ):
            raise _refused(
                archive,
                f"the local header at offset {at} (`{shown(name.decode('latin-1'))}`) differs from its central "
                f"directory entry `{member.name}`",
            )
        if flags & (_ENCRYPTED | _DESCRIPTOR) or method != 0:
            raise _refused(archive, f"member `{member.name}` is encrypted, compressed or has a data descriptor")
        data = at + _LOCAL_HEADER.size + name_length + extra_length
        placed.append(_Member(member.name, at, flags, method, crc, member.size, data))
        at = data + member.size
    if at != directory:
        raise _refused(archive, f"it holds {directory - at} bytes between its last member and its central directory")
    return placed


def _check_names(archive: Path, members: list[_Member]) -> None:
    names = [m.name for m in members]
    info = [n for n in names if n.startswith("info-") and n.endswith(".tar.zst")]
    pkg = [n for n in names if n.startswith("pkg-") and n.endswith(".tar.zst")]
    others = [n for n in names if n not in info and n not in pkg and n != "metadata.json"]
    if len(set(names)) != len(names) or len(info) != 1 or len(pkg) > 1 or others:
        raise _refused(
            archive,
            f"its members are {', '.join(f'`{n}`' for n in names) or 'none'}: a .conda holds metadata.json, one "
            "info-*.tar.zst and at most one pkg-*.tar.zst, each once",
        )


def conda_members(archive: Path) -> dict[str, tuple[int, int]]:
    """`{"info": (start, size), "pkg": …}`: where the payload tars lie in a `.conda`, refused unless its
    local headers and central directory agree member by member."""
    try:
        with archive.open("rb") as stream:
            length = stream.seek(0, 2)
            entries, offset, end = _end_of_directory(archive, stream, length)
            members = _walk_locals(archive, stream, _central(archive, stream, entries, offset, end), offset)
    except struct.error:
        raise _refused(archive, "a zip record is cut short") from None
    _check_names(archive, members)
    return {m.name.split("-", 1)[0]: (m.data, m.size) for m in members if m.name != "metadata.json"}


class _Slice:
    """`size` bytes of `stream` from where it stands (a `.conda` member), read as a file, forward only."""

    def __init__(self, stream: IO[bytes], size: int) -> None:
        self._stream, self._left = stream, size

    def read(self, wanted: int = -1) -> bytes:
        data = self._stream.read(self._left if wanted is None or wanted < 0 else min(wanted, self._left))
        self._left -= len(data)
        return data


@contextlib.contextmanager
def _opened(archive: Path, place: tuple[int, int] | None) -> Iterator[IO[bytes]]:
    """The decompressed tar of a `.tar.bz2` (`place` None) or of the `.conda` member at `place` (start, size)."""
    if place is None:
        with bz2.open(archive, "rb") as stream:
            yield stream
        return
    with archive.open("rb") as raw:
        raw.seek(place[0])
        with zstandard.ZstdDecompressor().stream_reader(_Slice(raw, place[1])) as stream:  # type: ignore[arg-type]
            yield stream


def _tars(archive: Path, part: str) -> list[tuple[str, tuple[int, int] | None]]:
    """Each tar of `part`: its name in a `.conda` (`info`, `pkg`; "" for the one tar of a `.tar.bz2`) and place."""
    if archive.name.endswith(".tar.bz2"):
        return [("", None)]
    found = conda_members(archive)
    return [(name, found[name]) for name in (("info", "pkg") if part == "all" else (part,)) if name in found]


def entry_name(member: tarfile.TarInfo) -> str:
    """The path a tar member is extracted to, as rattler's tar reader takes it: no leading `/`, no `.` or
    empty components (`..` is kept: `archive_safety` refuses it)."""
    return "/".join(part for part in member.name.split("/") if part not in ("", "."))


INFO_LIMIT = 256 << 20  # an info/ file read whole (paths.json of the largest real packages is a few MiB)


def members(
    archive: Path,
    part: str,
    read: Callable[[str], bool] = lambda _: False,
) -> Iterator[tuple[str, tarfile.TarInfo, bytes | None]]:
    """The tar members of `part` (`info`, `pkg` or `all`; a `.tar.bz2` has one tar for all) in stream order:
    (`entry_name`, member, content when it is a regular file whose entry name `read` asks for); each tar
    decompressed once and held to the header rule as it is read."""
    try:
        for name, place in _tars(archive, part):
            with _opened(archive, place) as stream:
                try:
                    yield from _read_members(archive, ruled_members(stream), read)
                except AmbiguousTar as exc:
                    where = f"its {name}-*.tar.zst" if name else "its tar"
                    raise LockFormatError(
                        f"`{archive.name}` is refused: {where} reads differently to different tar readers ({exc})",
                        "tar-rs (rattler's reader) and Python's tarfile would see other members: the package is "
                        "malformed or crafted; nothing was installed",
                    ) from None
    except (tarfile.TarError, zstandard.ZstdError, EOFError, OSError) as exc:
        raise LockFormatError(
            f"`{archive.name}` is not a readable conda package: {shown(str(exc))}",
            "the package's own bytes are damaged: nothing was installed",
        ) from None


def _read_members(
    archive: Path, ruled: Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]], read: Callable[[str], bool]
) -> Iterator[tuple[str, tarfile.TarInfo, bytes | None]]:
    for member, tar in ruled:
        name = entry_name(member)
        wanted = member.isfile() and read(name)
        if wanted and name.startswith("info/") and member.size > INFO_LIMIT:
            raise LockFormatError(
                f"`{archive.name}`: {shown(name)} claims {member.size} bytes (lockgen reads info/ files of up to "
                f"{INFO_LIMIT >> 20} MiB)",
                "the package is malformed or crafted: nothing was installed",
            )
        yield name, member, tar.extractfile(member).read() if wanted else None  # type: ignore[union-attr]
