"""A wheel's own file list (`*.dist-info/RECORD`, `WHEEL`, `entry_points.txt`), read from a local `.whl` or
from a wheel URL by HTTP range requests on the zip's central directory and those three members only; and a
remote wheel's METADATA the same way (or its PEP 658 file), as evidence of a release the facts lack.

The stdlib does it: `zipfile.ZipFile` reads through `_RangeFile`, a seekable file whose reads become
`Range:` GETs (at least 64 KiB each, cached), so `remotezip` and its `requests` dependency are not needed
and every request is counted. The first GET asks for the file's last 64 KiB (a suffix range), which holds
the end-of-central-directory record and, in a small wheel, everything else. A server that ignores `Range`
(200 instead of 206) sends the whole file: that is read, up to `max_download` bytes.

Trust: a local wheel is checked against the pinned sha256 (`check_sha256`) before its RECORD is read. A
RECORD read by ranges is as good as the HTTPS origin that serves the pinned file name (PyPI files are
immutable); proving it against the pin takes the whole file.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.core.credentials import scrub_url
from lockgen.core.env.package_identity import require_wheel_metadata
from lockgen.digests import file_digest
from lockgen.adapters.http_fetch import Meter, get
from lockgen.core.env.wheel_files import (
    RecordRow,
    ScriptEntry,
    WheelInfo,
    parse_entry_points,
    parse_record,
    parse_wheel,
)
from lockgen.model.names import normalize
from lockgen.errors import UserError
from lockgen.model.manifests import ManifestFile, PackageManifest

TAIL = 1 << 16
MEMBER_LIMIT = 64 << 20  # uncompressed bytes of one metadata member (torch's RECORD is a few MiB)
_RECORD = re.compile(r"^([^/]+)\.dist-info/RECORD$")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
_UNIX = 3  # a zip member made on Unix: its external attributes' high 16 bits are its mode (the central directory's)


@dataclass(frozen=True)
class WheelContents:
    """What a wheel says about itself: its dist-info folder, RECORD rows, WHEEL and scripts."""

    dist_info: str
    record: tuple[RecordRow, ...]
    wheel: WheelInfo
    scripts: tuple[ScriptEntry, ...]
    metadata: str
    executable: frozenset[str] = (
        frozenset()
    )  # members an installer makes executable: a Unix mode with any exec bit (pip, uv)


@dataclass(frozen=True)
class Fetched:
    """The cost of one remote read: GETs answered, body bytes received, whether the server sent it all."""

    requests: int
    bytes: int
    full_download: bool


def check_sha256(path: Path, expected: str) -> None:
    """Refuses a wheel whose sha256 is not the pinned one."""
    actual = file_digest(path)
    if actual != expected.lower():
        raise UserError(
            f"{path.name} has sha256 {actual}, the lock pins {expected.lower()}",
            "the file was replaced or corrupted; fetch it again from the index",
        )


def _member(archive: zipfile.ZipFile, name: str, where: str) -> str:
    info = archive.getinfo(name)
    if info.file_size > MEMBER_LIMIT:
        raise UserError(f"{where}: {name} claims {info.file_size} bytes", "the wheel is malformed")
    with archive.open(info) as stream:
        data = stream.read(MEMBER_LIMIT + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: {name} is not UTF-8", "the wheel is malformed") from None


def _contents(archive: zipfile.ZipFile, filename: str, where: str) -> WheelContents:
    stems = sorted({m.group(1) for m in map(_RECORD.match, archive.namelist()) if m})
    if len(stems) != 1:
        raise UserError(f"{where} holds {len(stems)} dist-info RECORD files, not one", "the wheel is malformed")
    dist_info = f"{stems[0]}.dist-info"
    if normalize(stems[0].split("-")[0]) != normalize(filename.split("-")[0]):
        raise UserError(
            f"{where}: {dist_info} belongs to another distribution than {filename}", "the wheel is malformed"
        )
    names = set(archive.namelist())
    if f"{dist_info}/WHEEL" not in names:
        raise UserError(f"{where} has no {dist_info}/WHEEL", "the wheel is malformed")
    if f"{dist_info}/METADATA" not in names:
        raise UserError(f"{where} has no {dist_info}/METADATA", "the wheel is malformed")
    metadata = _member(archive, f"{dist_info}/METADATA", where)  # first: it sits before RECORD, so one range holds both
    entry_points = f"{dist_info}/entry_points.txt"
    return WheelContents(
        dist_info,
        parse_record(_member(archive, f"{dist_info}/RECORD", where)),
        parse_wheel(_member(archive, f"{dist_info}/WHEEL", where)),
        parse_entry_points(_member(archive, entry_points, where)) if entry_points in names else (),
        metadata,
        frozenset(
            info.filename
            for info in archive.infolist()
            if info.create_system == _UNIX and info.external_attr >> 16 & 0o111
        ),
    )


def read_wheel_file(path: Path, expected_sha256: str | None = None, filename: str | None = None) -> WheelContents:
    """The contents statement of a local `.whl`, after checking its sha256 when one is pinned; `filename`: the
    wheel's own file name, where the local copy is kept under another (a store's hash-prefixed name)."""
    if expected_sha256 is not None:
        check_sha256(path, expected_sha256)
    try:
        with zipfile.ZipFile(path) as archive:
            return _contents(archive, filename or path.name, filename or path.name)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{path.name} is not a readable wheel: {exc}", "fetch it again from the index") from None


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file; reads become cached `Range:` GETs."""

    def __init__(self, url: str, size: int, first: tuple[int, bytes], meter: Meter, timeout_s: float) -> None:
        super().__init__()
        self.url, self.size, self.meter, self.timeout_s = url, size, meter, timeout_s
        self.pos = 0
        self.segments = [first]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._span(self.pos, min(self.size, self.pos + len(buffer)))
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def _span(self, start: int, end: int) -> bytes:
        out, pos = bytearray(), start
        while pos < end:  # each turn either copies from a cached segment or fetches the gap at `pos`
            held = next(((s, d) for s, d in self.segments if s <= pos < s + len(d)), None)
            if held is not None:
                piece = held[1][pos - held[0] : end - held[0]]
                out += piece
                pos += len(piece)
                continue
            following = min((s for s, _ in self.segments if s > pos), default=self.size)
            stop = min(following, max(end, pos + TAIL))
            self.segments.append((pos, self._fetch(pos, stop)))
        return bytes(out)

    def _fetch(self, start: int, stop: int) -> bytes:
        reply = get(self.url, {"Range": f"bytes={start}-{stop - 1}"}, self.meter, self.timeout_s, stop - start)
        if reply.status != 206 or len(reply.body) != stop - start:
            raise UserError(
                f"GET {scrub_url(self.url)}: bytes {start}-{stop - 1} came back as HTTP {reply.status} with "
                f"{len(reply.body)} bytes",
                "the server mishandles range requests",
            )
        return reply.body


def _open_remote(url: str, meter: Meter, timeout_s: float, max_download: int) -> tuple[io.RawIOBase | io.BytesIO, bool]:
    reply = get(url, {"Range": f"bytes=-{TAIL}", "Accept-Encoding": "identity"}, meter, timeout_s, max_download)
    if reply.status == 200:
        return io.BytesIO(reply.body), True
    found = _CONTENT_RANGE.fullmatch(reply.headers.get("content-range", ""))
    if reply.status != 206 or not found or int(found[2]) - int(found[1]) + 1 != len(reply.body):
        raise UserError(
            f"GET {scrub_url(url)}: HTTP {reply.status} without a usable Content-Range",
            "the server mishandles range requests",
        )
    return _RangeFile(url, int(found[3]), (int(found[1]), reply.body), meter, timeout_s), False


def read_wheel_url(url: str, timeout_s: float = 30.0, max_download: int = 256 << 20) -> tuple[WheelContents, Fetched]:
    """The contents statement of a remote wheel, read by range requests, and what reading it cost."""
    meter = Meter()
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    where = scrub_url(url)
    source, full = _open_remote(url, meter, timeout_s, max_download)
    try:
        with zipfile.ZipFile(source) as archive:
            contents = _contents(archive, filename, where)
    except zipfile.BadZipFile as exc:
        raise UserError(f"{where} is not a readable wheel: {exc}", "check the URL") from None
    return contents, Fetched(meter.requests, meter.bytes, full)


def read_metadata_url(url: str, separate_file: bool, timeout_s: float = 30.0) -> str:
    """A remote wheel's METADATA text: the PEP 658 file at `url + ".metadata"` when the index serves one,
    else the member read by range requests (a few requests, about 1.3 MB of a 550 MB torch wheel)."""
    meter = Meter()
    where = scrub_url(url)
    if separate_file:
        reply = get(url + ".metadata", {"Accept-Encoding": "identity"}, meter, timeout_s, MEMBER_LIMIT)
        return reply.body.decode("utf-8", errors="replace")
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    source, _ = _open_remote(url, meter, timeout_s, 256 << 20)
    try:
        with zipfile.ZipFile(source) as archive:
            stem = f"{filename.split('-')[0]}-{filename.split('-')[1]}.dist-info/METADATA"
            names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
            chosen = stem if stem in names else (names[0] if len(names) == 1 else None)
            if chosen is None:
                raise UserError(
                    f"{where} holds {len(names)} dist-info METADATA files, not one", "the wheel is malformed"
                )
            return _member(archive, chosen, where)
    except zipfile.BadZipFile as exc:
        raise UserError(f"{where} is not a readable wheel: {exc}", "check the URL") from None


def wheel_manifest(contents: WheelContents, sha256: str, name: str, version: str, source: str) -> PackageManifest:
    """What a wheel says it installs, as the manifest kept for the wheel file of hash `sha256`; a wheel that
    says it is another project or version than `name` `version` (the lock entry) is refused."""
    require_wheel_metadata(name, version, contents.dist_info, contents.metadata)
    return PackageManifest(
        sha256=sha256,
        name=normalize(name),
        version=version,
        kind="wheel",
        files=tuple(
            ManifestFile(path=r.path, sha256=r.sha256, size=r.size, executable=r.path in contents.executable)
            for r in contents.record
        ),
        dist_info=contents.dist_info,
        scripts=tuple(s.name for s in contents.scripts),
        entry_points={s.name: s.target for s in contents.scripts},
        source=source,
    )
