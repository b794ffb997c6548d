"""A tar's headers read the one way two tar readers cannot disagree on. lockgen unpacks image layers with Python's
`tarfile`; a runtime unpacks them with Go's `archive/tar` (containerd, umoci, podman). Where the two read a header
differently, a layer can show lockgen one tree and give the runtime another (found by an attack battery: a size
field starting with a NUL is 0 to Python and N to Go, so Go takes the members that follow as file data; two PAX
headers, or a PAX path and a GNU long name, before one member each name it, and Python keeps the first, Go the
last; bytes after an extended header's declared size are read by Python only; `GNU.sparse.*` records rename or
resize a member for Python only; a `prefix` field without ustar magic is joined by Python only; an old-style
file whose PAX name ends in `/` is a folder to Go only).

`check_headers` walks the headers block by block, skipping file data by the size both readers agree on, and
refuses each of those constructs, which no tar writer lockgen knows produces for an image (GNU tar, Go, Python,
BuildKit, umoci; bsdtar records a sparse file's holes, refused here): a size or checksum field that is not octal
digits (leading spaces allowed) ended by NULs or spaces (a size may be base-256), or a checksum that is not the
header's; an extended header (`x`, `L`, `K`) stacked on another of its kind, or a PAX one mixed with GNU ones;
any non-NUL byte in an extended header's padding, or a NUL inside a long name; PAX records that do not parse, or
any `GNU.sparse` record; a `g` (global) or `S` (sparse) header; a `prefix` without ustar magic, or in a star
header; an old-style (type NUL) member that is a folder by one of its names and a file by the other; a link,
folder or device with a size. What the headers then say, `tarfile` reads."""

from __future__ import annotations

import re
from typing import IO

BLOCK = 512
_ZERO = bytes(BLOCK)
_POSIX_MAGIC, _GNU_MAGIC = b"ustar\x0000", b"ustar  \x00"
_EXTENDED = {b"x": "a PAX header", b"L": "a GNU long name", b"K": "a GNU long link name"}
_HEADER_ONLY = (b"1", b"2", b"3", b"4", b"5", b"6")  # hard link, symbolic link, devices, folder, FIFO: no data
_OCTAL = re.compile(rb" *[0-7]+")
_RECORD_LENGTH = re.compile(rb"[1-9][0-9]{0,8} ")
_LOW = bytes(range(128))  # deleted from a header, it leaves the bytes a signed checksum counts negative


class AmbiguousTar(Exception):
    """Why a tar's headers may be read two ways (the member's header number and what is wrong)."""


def check_headers(stream: IO[bytes]) -> None:
    """Refuses (`AmbiguousTar`) a tar whose headers two readers could read differently; `stream` is read from
    where it stands to the end-of-archive block (file data is read past, not kept)."""
    pending: dict[bytes, bytes] = {}  # extended headers waiting for their member: type -> content
    number = 0
    end = None
    if stream.seekable():  # data is skipped by seeks, within the stream's end, found once
        start = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(start)
    while True:
        number += 1
        header = stream.read(BLOCK)
        if header == _ZERO or not header:  # the end (a missing end block is tarfile's to judge)
            if pending:
                raise AmbiguousTar(f"header {number}: the archive ends after {_EXTENDED[next(iter(pending))]} that names no member")
            return
        if len(header) < BLOCK:
            raise AmbiguousTar(f"header {number}: the archive ends inside a header")
        _checksum(header, number)
        kind, size = header[156:157], _size(header, number)
        if kind in (b"g", b"S"):
            raise AmbiguousTar(f"header {number}: a {'global PAX' if kind == b'g' else 'GNU sparse'} header, which tar readers apply differently")
        if kind in _EXTENDED:
            if kind in pending or (kind == b"x" and pending) or (kind != b"x" and b"x" in pending):
                raise AmbiguousTar(f"header {number}: {_EXTENDED[kind]} after another extended header of the same member: tar readers keep different ones")
            pending[kind] = _content(stream, size, number, kind)
            continue
        size = _member(header, kind, size, pending, number)
        pending = {}
        _skip(stream, end, size if kind not in _HEADER_ONLY else 0, number)


def _octal(field: bytes) -> int | None:
    """A numeric field's value when it is plain octal digits (leading spaces allowed) ended by NULs or spaces, or
    all NULs and spaces (0); None otherwise: a NUL before or among the digits is 0 to Python, a number to Go."""
    digits = field.rstrip(b"\x00 ")
    return int(digits, 8) if _OCTAL.fullmatch(digits) else 0 if not digits else None


def _checksum(header: bytes, number: int) -> None:
    """A checksum field of plain octal digits (a leading NUL is 0 to Python, which then stops reading, and the sum
    to Go, which reads on) that is the header's sum, unsigned or signed, with the field as spaces."""
    stated, blanked = _octal(header[148:156]), header[:148] + b" " * 8 + header[156:]
    unsigned = sum(blanked)
    if stated != unsigned and stated != unsigned - 256 * len(blanked.translate(None, _LOW)):  # signed: bytes past 127 count negative
        raise AmbiguousTar(f"header {number}: its checksum field is not the header's sum in plain octal digits")


def _size(header: bytes, number: int) -> int:
    field = header[124:136]
    if field[0] & 0x80:  # base-256 (GNU, Go, Python alike); 0xff would be negative
        if field[0] != 0x80:
            raise AmbiguousTar(f"header {number}: a negative size")
        return int.from_bytes(field[1:], "big")
    size = _octal(field)
    if size is None:
        raise AmbiguousTar(f"header {number}: its size field is not plain octal digits")
    return size


def _content(stream: IO[bytes], size: int, number: int, kind: bytes) -> bytes:
    """An extended header's content: its declared size, the padding after it all NUL (Python reads the padding
    too, Go does not); a long name without a NUL inside it (Python ends it at the first NUL, Go at the size)."""
    data = stream.read(-(-size // BLOCK) * BLOCK)
    if len(data) < size:
        raise AmbiguousTar(f"header {number}: the archive ends inside {_EXTENDED[kind]}")
    content, padding = data[:size], data[size:]
    if padding.strip(b"\x00"):
        raise AmbiguousTar(f"header {number}: {_EXTENDED[kind]} holds bytes after its declared size")
    if kind != b"x":
        name = content.rstrip(b"\x00")
        if b"\x00" in name:
            raise AmbiguousTar(f"header {number}: {_EXTENDED[kind]} holds a NUL inside it")
        return name
    return content


def _pax_records(content: bytes, number: int) -> dict[bytes, bytes]:
    """`LENGTH KEY=VALUE\\n` records, each exactly its length; a record that does not parse, or a `GNU.sparse`
    one (Python renames and resizes a member by them, Go reads them only for sparse files), is refused."""
    records: dict[bytes, bytes] = {}
    position = 0
    while position < len(content):
        found = _RECORD_LENGTH.match(content, position)
        length = int(found.group()[:-1]) if found else 0
        record = content[position : position + length]
        if not found or len(record) != length or not record.endswith(b"\n") or b"=" not in record[found.end() - position :]:
            raise AmbiguousTar(f"header {number}: a PAX record that does not parse")
        key, _, value = record[found.end() - position : -1].partition(b"=")
        if key.startswith(b"GNU.sparse"):
            raise AmbiguousTar(f"header {number}: a GNU.sparse PAX record, which tar readers apply differently")
        records[key] = value
        position += length
    return records


def _member(header: bytes, kind: bytes, size: int, pending: dict[bytes, bytes], number: int) -> int:
    """Judges a member's own header with the extended headers before it; returns the size of its data."""
    magic, prefixed = header[257:265], header[345] != 0
    if prefixed and magic != _POSIX_MAGIC:  # Python joins it whatever the magic; Go reads GNU's atime there, or nothing
        raise AmbiguousTar(f"header {number}: a prefix field without ustar magic (a GNU incremental or sparse header, or none)")
    if prefixed and header[508:512] == b"tar\x00":  # a star header, whose prefix Go reads as 131 bytes, Python as 155
        raise AmbiguousTar(f"header {number}: a star-format header with a prefix")
    name = header[:100].split(b"\x00", 1)[0]
    if prefixed:
        name = header[345:500].split(b"\x00", 1)[0] + b"/" + name
    records = _pax_records(pending[b"x"], number) if b"x" in pending else {}
    named = records.get(b"path", pending.get(b"L", name))
    # an old-style file (type NUL) named with a trailing `/` is a folder: to Python by its header's own name, to Go by
    # the name a PAX or GNU header gives it (a header's name is that one cut at 100 bytes, which may end in `/`)
    if kind == b"\x00" and named.endswith(b"/") != name.endswith(b"/"):
        raise AmbiguousTar(f"header {number}: an old-style member that is a folder by one of its names and a file by the other")
    if b"size" in records:
        if not re.fullmatch(rb"[0-9]{1,20}", records[b"size"]):
            raise AmbiguousTar(f"header {number}: a PAX size that is not a number")
        size = int(records[b"size"])
    if kind in _HEADER_ONLY and size:
        raise AmbiguousTar(f"header {number}: a link, folder or device with a size, whose data tar readers skip differently")
    return size


def _skip(stream: IO[bytes], end: int | None, size: int, number: int) -> None:
    """Past a member's data (and its padding): a seek where the stream can (`end`: where it ends), else reads."""
    blocks = -(-size // BLOCK) * BLOCK
    if blocks and end is not None:
        at = stream.tell()
        if at + blocks > end:
            raise AmbiguousTar(f"header {number}: the archive ends inside the member's data")
        stream.seek(at + blocks)
        return
    while blocks:
        read = len(stream.read(min(blocks, 1 << 20)))
        if not read:
            raise AmbiguousTar(f"header {number}: the archive ends inside the member's data")
        blocks -= read
