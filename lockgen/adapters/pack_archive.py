"""The tar file of a pack archive (`lockgen pack` / `unpack`): written byte-reproducibly and atomically, read back by a
strict streaming reader. Which members it holds, and the index's rules, are `core.pack_rules`'.

Writing: POSIX pax format (a wheel's file name can pass ustar's 100 bytes; a long name is the only pax record ever
written, no timestamps), every member a regular file with mtime 0, uid/gid 0, no user or group names, mode 0644, in
the order given; each file is hashed as it is copied in and refused unless it has the size and sha256 its member
states. The archive is written to a temporary file beside `out` and renamed into place, so a failure or Ctrl-C leaves
nothing half written (the temporary files of runs that were killed are swept).

Reading (`reading`) first holds the archive to `tar_headers`' rule, the one conda packages and image layers are held
to: an archive whose headers two tar readers could read differently (a PAX path stacked on a GNU long name names one
member `conda/x.conda` to Python's tarfile and `../x` to GNU tar, Go and tar-rs) is refused, naming the member, before
any member is read; the walk reads only the headers, seeking past the data. Then it is one pass in archive order, as
`tarfile`'s stream mode gives it: each member must be a regular file (no link, folder, device or sparse file), named a
relative path without `..`, be exactly the member expected next,
and have the size stated for it (checked before a byte of it is read); its bytes are hashed as they are written out.
Nothing is extracted by tarfile itself, and no metadata of the archive (mode, owner, time) is applied.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tarfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import IO

from lockgen.adapters import user_files
from lockgen.adapters.store import file_guard
from lockgen.adapters.atomic_files import UMASK, replace_onto, temporary_beside
from lockgen.adapters.tar_headers import AmbiguousTar, check_headers
from lockgen.model.names import shown
from lockgen.errors import PackError, UserError
from lockgen.model.pack import PackMember

_BLOCK = 1 << 20
_HINT = "the archive was damaged or changed after lockgen pack wrote it: pack the lock again"
Meter = Callable[[str, int, int], None]


class _Hashing(io.RawIOBase):
    """The archive's output stream: counts and hashes what tarfile writes."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream, self.sha256, self.size = stream, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._stream.write(data)
        self.sha256.update(data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size


class _Checked(io.RawIOBase):
    """A member's source file as tarfile reads it in: hashed on the way, so what went in is what was stated."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream, self.sha256 = stream, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.sha256.update(data)
        return data


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = size, 0, 0o644, 0, 0, "", ""
    info.type = tarfile.REGTYPE
    return info


def write(
    out: Path,
    leading: Sequence[tuple[str, bytes]],
    files: Sequence[tuple[PackMember, Path]],
    meter: Meter | None = None,
) -> tuple[str, int]:
    """Writes the archive `out`: the `leading` members (name, bytes), then each file as its member; returns the
    archive's sha256 and size. A file whose size or sha256 is not its member's is refused, and nothing is kept."""
    if out.is_dir():
        raise UserError(f"`{out}` is a folder", "pass --out the path of the archive file to write (F.tar)")
    out.parent.mkdir(parents=True, exist_ok=True)
    file_guard.sweep_stale(out.parent, f".{out.name}.*.tmp")
    handle, temp = temporary_beside(out)
    guard = file_guard.hold_open(temp)
    total, done = sum(member.size for member, _ in files), 0
    try:
        os.fchmod(handle, 0o644 & ~UMASK)
        with os.fdopen(handle, "wb") as stream:
            sink = _Hashing(stream)
            # 1 MiB reads, not tarfile's 16 KiB: a sixty-fourth of the calls per byte hashed
            with tarfile.TarFile(
                fileobj=sink, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8", copybufsize=_BLOCK
            ) as tar:
                for name, data in leading:
                    tar.addfile(_info(name, len(data)), io.BytesIO(data))
                for member, path in files:
                    _add_file(tar, member, path)
                    done += member.size
                    if meter is not None and total >> 20:
                        meter("pack the artifacts (MiB)", done >> 20, total >> 20)
            stream.flush()
            os.fsync(stream.fileno())
        replace_onto(temp, out)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    finally:
        os.close(guard)
    return sink.sha256.hexdigest(), sink.size


def _add_file(tar: tarfile.TarFile, member: PackMember, path: Path) -> None:
    with path.open("rb") as source:
        if os.fstat(source.fileno()).st_size != member.size:
            raise PackError(
                f"{path} changed while it was packed (its size is not {member.size})",
                "pack again; nothing was written",
                member.path,
            )
        checked = _Checked(source)
        tar.addfile(_info(member.path, member.size), checked)
    if checked.sha256.hexdigest() != member.sha256:
        raise PackError(
            f"{path} does not have the sha256 the lock pins ({member.sha256}) as it is packed",
            "the store's copy was changed: remove it and pack again; nothing was written",
            member.path,
        )


class PackReader:
    """One pass over a pack archive: each member read in turn, as the caller expects it."""

    def __init__(self, tar: tarfile.TarFile, source: str) -> None:
        self._tar, self._source, self._last = tar, source, ""

    def _refuse(self, member: str, problem: str) -> PackError:
        return PackError(
            f"pack archive `{shown(self._source, 200)}`, member `{shown(member, 120)}`: {problem}", _HINT, member
        )

    def _next(self, expected: str) -> tarfile.TarInfo:
        try:
            info = self._tar.next()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise self._refuse(
                expected, f"where it should be, the archive is unreadable ({shown(str(exc), 80)})"
            ) from None
        if info is None:
            raise self._refuse(
                expected, "the archive ends where this member should be (missing, cut short, or its header damaged)"
            )
        self._check_entry(info, expected)
        return info

    def _check_safe(self, info: tarfile.TarInfo) -> None:
        name = info.name
        if name.startswith("/") or ".." in PurePosixPath(name).parts or "\\" in name:
            raise self._refuse(name, "its path leaves the folder it is unpacked into")
        if not info.isreg() or info.issparse():
            raise self._refuse(name, "it is not a regular file (a link, folder, device or sparse file)")

    def _check_entry(self, info: tarfile.TarInfo, expected: str) -> None:
        self._check_safe(info)
        name = info.name
        if name != expected:
            raise self._refuse(
                name, f"the index names `{shown(expected, 120)}` here, not this member (renamed, reordered or added)"
            )

    def read_bytes(self, expected: str, limit: int) -> bytes:
        """The next member, which must be `expected`, of at most `limit` bytes, as bytes."""
        info = self._next(expected)
        if info.size > limit:
            raise self._refuse(expected, f"{info.size} bytes is more than the {limit} it may have")
        return self._copy(info, expected, None)

    def read_member(self, member: PackMember, into: Path | None = None) -> bytes:
        """The next member, which must be `member` with its size and sha256: written to the new file `into`
        (returns b"") or, without `into`, returned."""
        info = self._next(member.path)
        if info.size != member.size:
            raise self._refuse(member.path, f"it has {info.size} bytes, the index states {member.size}")
        hasher = hashlib.sha256()
        data = self._copy(info, member.path, into, hasher)
        if hasher.hexdigest() != member.sha256:
            if into is not None:
                into.unlink(missing_ok=True)
            raise self._refuse(member.path, f"its sha256 is not the {member.sha256} it must have (damaged or changed)")
        return data

    def _copy(self, info: tarfile.TarInfo, name: str, into: Path | None, hasher: hashlib._Hash | None = None) -> bytes:
        chunks: list[bytes] = []
        try:
            source = self._tar.extractfile(info)
            assert source is not None  # a regular file always has a reader
            with contextlib.ExitStack() as stack:
                out = stack.enter_context(open(into, "xb")) if into is not None else None
                while block := source.read(_BLOCK):
                    if hasher is not None:
                        hasher.update(block)
                    if out is not None:
                        out.write(block)
                    else:
                        chunks.append(block)
        except (tarfile.TarError, EOFError) as exc:
            if into is not None:
                into.unlink(missing_ok=True)
            raise self._refuse(name, f"the archive ends inside it (cut short: {shown(str(exc), 80)})") from None
        self._last = name
        return b"".join(chunks)

    def end(self) -> None:
        """Refuses a member after the last one expected."""
        try:
            info = self._tar.next()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise self._refuse(
                f"after {self._last}", f"the archive is unreadable there ({shown(str(exc), 80)})"
            ) from None
        if info is not None:
            self._check_safe(info)
            raise self._refuse(info.name, "the index names no such member (added to the archive)")


@contextlib.contextmanager
def reading(path: Path, first: str) -> Iterator[PackReader]:
    """The archive at `path`, read in one pass (an uncompressed tar, as `lockgen pack` writes); `first`: the
    member expected first (named when the archive's first header is unreadable)."""
    try:
        stream = user_files.opened(path)
    except FileNotFoundError:
        raise UserError(f"pack archive `{path}` does not exist", "pass the .tar written by lockgen pack") from None
    except OSError as exc:
        raise UserError(
            f"cannot read pack archive `{path}`: {exc.strerror or exc}", "pass the .tar written by lockgen pack"
        ) from None
    with stream:
        try:
            check_headers(stream)
        except AmbiguousTar as exc:
            if exc.number == 1:  # where the first member must be: not a tar, or not one lockgen pack wrote
                raise PackError(
                    f"`{shown(str(path), 200)}` is not a pack archive: its first member `{first}` is unreadable "
                    f"({exc.problem})",
                    "pass the .tar written by lockgen pack (uncompressed)",
                    first,
                ) from None
            raise PackError(
                f"pack archive `{shown(str(path), 200)}`, member `{shown(exc.member, 120)}`: its headers read "
                f"differently to different tar readers ({exc})",
                "tarfile (lockgen) and GNU tar, Go or tar-rs would see other members: the archive was damaged or "
                "crafted after lockgen pack wrote it; nothing was unpacked",
                exc.member,
            ) from None
        stream.seek(0)
        try:
            tar = tarfile.open(fileobj=stream, mode="r|", encoding="utf-8")
        except (tarfile.TarError, EOFError) as exc:
            raise PackError(
                f"`{shown(str(path), 200)}` is not a pack archive: its first member `{first}` is unreadable "
                f"({shown(str(exc), 80)})",
                "pass the .tar written by lockgen pack (uncompressed)",
                first,
            ) from None
        with tar:
            yield PackReader(tar, str(path))
