"""A tar's headers read the one way two tar readers cannot disagree on. lockgen unpacks image layers with Python's
`tarfile`; a runtime unpacks them with Go's `archive/tar` (containerd, umoci, podman). Where the two read a header
differently, a layer can show lockgen one tree and give the runtime another (found by an attack battery: a size
field starting with a NUL is 0 to Python and N to Go, so Go takes the members that follow as file data; two PAX
headers, or a PAX path and a GNU long name, before one member each name it, and Python keeps the first, Go the
last; bytes after an extended header's declared size are read by Python only; `GNU.sparse.*` records rename or
resize a member for Python only; a `prefix` field without ustar magic is joined by Python only; an old-style
file whose PAX name ends in `/` is a folder to Go only).

`HeaderRule` is fed the tar's bytes in order, in pieces of any size, and judges each header as soon as it holds it,
passing over file data by the size both readers agree on; it refuses each of those constructs, which no tar writer
lockgen knows produces for an image (GNU tar, Go, Python, BuildKit, umoci; bsdtar records a sparse file's holes,
refused here): a size or checksum field that is not octal digits (leading spaces allowed) ended by NULs or spaces (a
size may be base-256), or a checksum that is not the header's; a mode, owner, group, time or device field that is
not octal or base-256 (Python stops reading there, silently; tar-rs reads on); an extended header (`x`, `L`, `K`)
stacked on another of its kind, or a PAX one mixed with GNU ones; an extended header over 1 MiB (Go's reader refuses
them, Python's reads them whole); any non-NUL byte in an extended header's padding, or a NUL inside a long name; PAX
records that do not parse, with no key or a key twice, or any `GNU.sparse` record; a `g` (global), `S` (sparse) or
`X` (Solaris extended, PAX to Python only) header; a `prefix` without ustar magic, or in a star header; an old-style
(type NUL) member that is a folder by one of its names and a file by the other; a link, folder or device with a
size. What the headers then say, `tarfile` reads. Each refusal names the header's number and its member, by the name
the headers give it.

Two ways to hold a tar to the rule: `check_headers` walks a whole stream before a reader opens it (seeking past file
data where the stream can); `ruled_members` reads it once with `tarfile`'s stream mode through `RuledStream`, which
feeds every byte to the rule before handing it on, so each header is judged before tarfile reads it (one
decompression of a compressed tar), reads on to the end-of-archive block once tarfile is done, and refuses a tar that
tarfile stopped reading before that block."""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Callable, Iterator
from typing import IO

from lockgen.model.names import shown

BLOCK = 512
EXTENDED_LIMIT = 1 << 20  # Go's archive/tar refuses a PAX header or long name past it
_ZERO = bytes(BLOCK)
_POSIX_MAGIC, _GNU_MAGIC = b"ustar\x0000", b"ustar  \x00"
_EXTENDED = {b"x": "a PAX header", b"L": "a GNU long name", b"K": "a GNU long link name"}
_APPLIED_BY_SOME = {b"g": "a global PAX header", b"S": "a GNU sparse header", b"X": "a Solaris extended header"}
_HEADER_ONLY = (b"1", b"2", b"3", b"4", b"5", b"6")  # hard link, symbolic link, devices, folder, FIFO: no data
_OCTAL = re.compile(rb" *[0-7]+")
_RECORD_LENGTH = re.compile(rb"[1-9][0-9]{0,8} ")
_PATH_RECORD = re.compile(rb"\n[0-9]+ path=([^\n]*)\n")  # searched in a PAX header's content after a newline
_LOW = bytes(range(128))  # deleted from a header, it leaves the bytes a signed checksum counts negative
_PIECE = 1 << 20  # file data read past in pieces of at most this size


class AmbiguousTar(Exception):
    """Why a tar's headers may be read two ways: the header's number, its member (by the name the headers give it,
    `?` where none can be read) and what is wrong."""

    def __init__(self, number: int, member: str, problem: str) -> None:
        super().__init__(
            f"header {number}, member `{shown(member, 200)}`: {problem}" if member else f"header {number}: {problem}"
        )
        self.number, self.member, self.problem = number, member, problem


class _Problem(Exception):
    """What is wrong with the header being judged (the rule adds which header and member)."""


class HeaderRule:
    """The rule, fed a tar's bytes in order (`feed`) and told where they end (`end`): a header is judged as soon as
    its block (and an extended header's content) is fed, and refused by `AmbiguousTar`. `passed` once the
    end-of-archive block is fed (or the bytes end cleanly between members: a missing end block is tarfile's to
    judge); bytes after it are not judged."""

    def __init__(self) -> None:
        self.passed = False
        self.members: list[tuple[int, str]] = []  # each member's header number and name, in order
        self._number = 0  # of the header being read
        self._member = ""  # its member's name, as the headers give it
        self._pending: dict[bytes, bytes] = {}  # extended headers waiting for their member: type -> content
        self._gathered = bytearray()  # a header's block, or an extended header's content and padding
        self._needed = BLOCK  # how many bytes `_gathered` holds once it is complete
        self._extended: tuple[bytes, int, bytes] | None = None  # (type, size, block) of the extended header gathered
        self._data_left = 0  # a member's data and padding not yet passed

    def wanted(self) -> int:
        """How many bytes the rule can take next without reading past the end-of-archive block (0 once passed)."""
        if self.passed:
            return 0
        return min(self._data_left, _PIECE) if self._data_left else self._needed - len(self._gathered)

    @property
    def data_left(self) -> int:
        """The bytes of member data (with padding) the rule passes over before the next header."""
        return self._data_left

    def pass_data(self, size: int) -> None:
        """`size` bytes of member data (at most `data_left`) were skipped without being fed."""
        self._data_left -= min(size, self._data_left)

    def feed(self, data: bytes) -> None:
        """The next bytes of the tar, in a piece of any size; every header they complete is judged."""
        view, at = memoryview(data), 0
        while at < len(view) and not self.passed:
            if self._data_left:
                step = min(self._data_left, len(view) - at)
                self._data_left -= step
            else:
                step = min(self._needed - len(self._gathered), len(view) - at)
                self._gathered += view[at : at + step]
                if len(self._gathered) == self._needed:
                    self._judged(self._complete)
            at += step

    def end(self) -> None:
        """The stream ends here: refused unless it ends at a member's end."""
        if not self.passed:
            self._judged(self._ended)

    def _judged(self, step: Callable[[], None]) -> None:
        try:
            step()
        except _Problem as problem:
            raise AmbiguousTar(self._number, self._member, str(problem)) from None

    def _ended(self) -> None:
        if self._data_left:
            raise _Problem("the archive ends inside the member's data")
        if self._extended is not None:
            raise _Problem(f"the archive ends inside {_EXTENDED[self._extended[0]]}")
        self._number, self._member = self._number + 1, ""
        if self._gathered:
            raise _Problem("the archive ends inside a header")
        self._end_block()

    def _end_block(self) -> None:
        if self._pending:
            self._member = self._named(b"")
            raise _Problem(f"the archive ends after {_EXTENDED[next(iter(self._pending))]} that names no member")
        self.passed = True

    def _complete(self) -> None:
        gathered = bytes(self._gathered)
        self._gathered.clear()
        self._needed = BLOCK
        if self._extended is not None:
            kind, size, header = self._extended
            self._extended = None
            self._member = self._named(header, kind, gathered[:size])
            self._pending[kind] = _content(gathered, size, kind)
            return
        self._number += 1
        if gathered == _ZERO:
            self._member = ""
            self._end_block()
            return
        self._member = self._named(gathered)
        self._judge(gathered)

    def _judge(self, header: bytes) -> None:
        _checksum(header)
        _numbers(header)
        kind, size = header[156:157], _size(header)
        if kind in _APPLIED_BY_SOME:
            raise _Problem(f"{_APPLIED_BY_SOME[kind]}, which tar readers apply differently")
        if kind in _EXTENDED:
            pending = self._pending
            if kind in pending or (kind == b"x" and pending) or (kind != b"x" and b"x" in pending):
                raise _Problem(
                    f"{_EXTENDED[kind]} after another extended header of the same member: tar readers keep "
                    "different ones"
                )
            if size > EXTENDED_LIMIT:
                raise _Problem(f"{_EXTENDED[kind]} of {size} bytes (Go's tar reader refuses one over {EXTENDED_LIMIT})")
            self._extended, self._needed = (kind, size, header), -(-size // BLOCK) * BLOCK
            if not self._needed:
                self._complete()
            return
        size = _member(header, kind, size, self._pending)
        self.members.append((self._number, self._member))
        self._pending = {}
        self._data_left = -(-size // BLOCK) * BLOCK if kind not in _HEADER_ONLY else 0

    def _named(self, header: bytes, kind: bytes = b"", content: bytes = b"") -> str:
        """The name the extended headers before it (or `content`, an extended header's own, of type `kind`) give
        the member, else its header's ("" where none can be read)."""
        sources = {**self._pending, kind: content} if kind else self._pending
        name = sources[b"L"].split(b"\x00", 1)[0] if b"L" in sources else None
        found = _PATH_RECORD.search(b"\n" + sources[b"x"]) if b"x" in sources else None
        if found:
            name = found.group(1)
        if name is None:
            name = header[:100].split(b"\x00", 1)[0]
            if header[257:263] == b"ustar\x00" and header[345]:
                name = header[345:500].split(b"\x00", 1)[0] + b"/" + name
        return name.decode("utf-8", "replace")


def check_headers(stream: IO[bytes]) -> None:
    """Refuses (`AmbiguousTar`) a tar whose headers two readers could read differently; `stream` is read from
    where it stands to the end-of-archive block (file data is sought past where the stream can, else read)."""
    rule = HeaderRule()
    end = None
    if stream.seekable():  # data is skipped by seeks, within the stream's end, found once
        start = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(start)
    while not rule.passed:
        if rule.data_left and end is not None:
            at = stream.tell()
            skipped = min(rule.data_left, end - at)
            stream.seek(at + skipped)
            rule.pass_data(skipped)
            if rule.data_left:
                rule.end()
            continue
        data = stream.read(rule.wanted())
        if data:
            rule.feed(data)
        else:
            rule.end()


class RuledStream(io.RawIOBase):
    """A tar stream read forward only, every byte fed to `HeaderRule` before it is handed on: a reader such as
    `tarfile`'s stream mode reads no header the rule has not judged. `finish` reads on past what the reader left, to
    the end-of-archive block, so the whole tar is judged (the reader may stop at its end block or before)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream, self.rule = stream, HeaderRule()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        if data:
            self.rule.feed(data)
        else:
            self.rule.end()
        return data

    def finish(self) -> None:
        """Reads (and judges) the rest of the tar up to its end-of-archive block."""
        while not self.rule.passed:
            self.read(self.rule.wanted())


def ruled_members(stream: IO[bytes]) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    """Each member of the uncompressed tar `stream`, as `tarfile`'s stream mode reads it (with the `TarFile` to
    extract it from), in one pass under the rule: every header judged before tarfile reads it. After tarfile's last
    member the rule reads on to the end-of-archive block, and a tar tarfile stopped reading before it is refused
    too: it holds members another reader extracts and lockgen never saw."""
    ruled = RuledStream(stream)
    read = 0
    with tarfile.open(fileobj=ruled, mode="r|") as tar:
        for member in tar:
            read += 1
            yield member, tar
    ruled.finish()
    if read != len(ruled.rule.members):
        raise AmbiguousTar(
            *ruled.rule.members[read], "Python's tarfile stops reading there, where other tar readers read on"
        )


def _octal(field: bytes) -> int | None:
    """A numeric field's value when it is plain octal digits (leading spaces allowed) ended by NULs or spaces, or
    all NULs and spaces (0); None otherwise: a NUL before or among the digits is 0 to Python, a number to Go."""
    digits = field.rstrip(b"\x00 ")
    return int(digits, 8) if _OCTAL.fullmatch(digits) else 0 if not digits else None


def _checksum(header: bytes) -> None:
    """A checksum field of plain octal digits (a leading NUL is 0 to Python, which then stops reading, and the sum
    to Go, which reads on) that is the header's sum, unsigned or signed, with the field as spaces."""
    stated, blanked = _octal(header[148:156]), header[:148] + b" " * 8 + header[156:]
    unsigned = sum(blanked)
    if stated != unsigned and stated != unsigned - 256 * len(
        blanked.translate(None, _LOW)
    ):  # signed: bytes past 127 count negative
        raise _Problem("its checksum field is not the header's sum in plain octal digits")


_NUMBERS = {
    "mode": (100, 108),
    "owner": (108, 116),
    "group": (116, 124),
    "time": (136, 148),
    "device major": (329, 337),
    "device minor": (337, 345),
}


def _numbers(header: bytes) -> None:
    """Mode, owner, group, time and device fields of plain octal digits or base-256 (led by 0x80, or 0xff for a
    negative number): Python stops reading the archive, silently, at a header with a field it cannot parse, where
    tar-rs reads on and extracts the rest."""
    for field, (start, end) in _NUMBERS.items():
        value = header[start:end]
        if value[0] not in (0x80, 0xFF) and _octal(value) is None:
            raise _Problem(f"its {field} field is not plain octal digits")


def _size(header: bytes) -> int:
    field = header[124:136]
    if field[0] & 0x80:  # base-256 (GNU, Go, Python alike); 0xff would be negative
        if field[0] != 0x80:
            raise _Problem("a negative size")
        return int.from_bytes(field[1:], "big")
    size = _octal(field)
    if size is None:
        raise _Problem("its size field is not plain octal digits")
    return size


def _content(data: bytes, size: int, kind: bytes) -> bytes:
    """An extended header's content (`data`: it and its padding): the padding all NUL (Python reads the padding
    too, Go does not); a long name without a NUL inside it (Python ends it at the first NUL, Go at the size)."""
    content, padding = data[:size], data[size:]
    if padding.strip(b"\x00"):
        raise _Problem(f"{_EXTENDED[kind]} holds bytes after its declared size")
    if kind != b"x":
        name = content.rstrip(b"\x00")
        if b"\x00" in name:
            raise _Problem(f"{_EXTENDED[kind]} holds a NUL inside it")
        return name
    return content


def _pax_records(content: bytes) -> dict[bytes, bytes]:
    """`LENGTH KEY=VALUE\\n` records, each exactly its length; a record that does not parse, has no key or repeats
    one, or a `GNU.sparse` one (Python renames and resizes a member by them, Go reads them only for sparse files), is
    refused."""
    records: dict[bytes, bytes] = {}
    position = 0
    while position < len(content):
        found = _RECORD_LENGTH.match(content, position)
        length = int(found.group()[:-1]) if found else 0
        record = content[position : position + length]
        if (
            not found
            or len(record) != length
            or not record.endswith(b"\n")
            or b"=" not in record[found.end() - position :]
        ):
            raise _Problem("a PAX record that does not parse")
        key, _, value = record[found.end() - position : -1].partition(b"=")
        if not key:  # Python stops reading the records there, tar-rs reads on
            raise _Problem("a PAX record with no key")
        if key.startswith(b"GNU.sparse"):
            raise _Problem("a GNU.sparse PAX record, which tar readers apply differently")
        if key in records:  # Python and Go keep the last, tar-rs the first
            raise _Problem(f"a PAX header with two `{shown(key.decode('utf-8', 'replace'))}` records")
        records[key] = value
        position += length
    return records


def _member(header: bytes, kind: bytes, size: int, pending: dict[bytes, bytes]) -> int:
    """Judges a member's own header with the extended headers before it; returns the size of its data."""
    magic, prefixed = header[257:265], header[345] != 0
    if prefixed and magic != _POSIX_MAGIC:  # Python joins it whatever the magic; Go reads GNU's atime there, or nothing
        raise _Problem("a prefix field without ustar magic (a GNU incremental or sparse header, or none)")
    if prefixed and header[508:512] == b"tar\x00":  # a star header, whose prefix Go reads as 131 bytes, Python as 155
        raise _Problem("a star-format header with a prefix")
    name = header[:100].split(b"\x00", 1)[0]
    if prefixed:
        name = header[345:500].split(b"\x00", 1)[0] + b"/" + name
    records = _pax_records(pending[b"x"]) if b"x" in pending else {}
    named = records.get(b"path", pending.get(b"L", name))
    # an old-style file (type NUL) named with a trailing `/` is a folder: to Python by its header's own name, to Go by
    # the name a PAX or GNU header gives it (a header's name is that one cut at 100 bytes, which may end in `/`)
    if kind == b"\x00" and named.endswith(b"/") != name.endswith(b"/"):
        raise _Problem("an old-style member that is a folder by one of its names and a file by the other")
    if b"size" in records:
        if not re.fullmatch(rb"[0-9]{1,20}", records[b"size"]):
            raise _Problem("a PAX size that is not a number")
        size = int(records[b"size"])
    if kind in _HEADER_ONLY and size:
        raise _Problem("a link, folder or device with a size, whose data tar readers skip differently")
    return size
