"""Writing files so that a reader sees the old bytes or the new, never half: a temporary file in the
same folder, then a rename (locks, rendered files, certificates, manifests, cache entries)."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path

from lockgen.errors import UserError


def write_atomic(path: Path, text: str, mode: int = 0o666) -> None:
    """Writes `text` (UTF-8, `\\n` line ends) to `path` through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _umask()  # read once, at import: changing it later would race other threads' mkdir and open


def temporary_beside(path: Path) -> tuple[int, Path]:
    """A new temporary file (its descriptor and path) in `path`'s folder, to be renamed onto `path`. A folder
    that is there but takes no new file (under /proc or /sys: ENOENT for a name just made) is the user's to fix."""
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileNotFoundError as exc:
        raise UserError(
            f"`{path.parent}` takes no new file ({exc.strerror}): `{path.name}` cannot be written there",
            "choose a path on a disk, in a folder of ordinary files",
        ) from None
    return handle, Path(temp)


WRITABLE_HINT = (
    "choose another path, or make that folder writable (a read-only mount, an immutable folder or its"
    " permissions); nothing was done"
)


def check_writable(destination: Path, what: str, hint: str, *, file: bool = False) -> None:
    """Refuses, before any work whose result goes to `destination`, a destination that cannot be written as lockgen
    writes: an existing folder (written into) that takes no new file; an existing file (replaced by a rename)
    marked immutable or append-only; else the parent, where the file or folder is made (the parents made first
    where missing), that takes no new file. Taking a new file is proven by making an empty one where the write's
    own temporary file would go and removing it at once: mode bits alone would not tell (root writes a chmod 0555
    folder, but not a read-only mount or an immutable folder), and an append-only folder takes the file but not
    its removal or a rename over a file in it. `what` names the destination as the user gave it (`--out img`);
    the error names the folder or file they gave, and the one that refused where that is an ancestor still to be
    made (never the probe). Anything else that is there (a FIFO, a device, a socket) is refused: the rename would
    put a file in its place, never write to it. With `file` (the result is one file: a lock, a certificate, a
    rendering, an archive) an existing folder is refused too, as the write would refuse it after the work."""
    if file and destination.is_dir():
        raise UserError(f"`{destination}` is a folder: {what} cannot replace it", "pass the path of a file to write")
    if destination.is_dir():
        given = folder = destination
    else:
        _refuse_special(destination, what)
        marks = _marks(destination) if destination.exists() else []
        if marks:
            raise UserError(f"`{destination}` is marked {' and '.join(marks)}: {what} cannot replace it", hint)
        given = folder = destination.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"`{folder}` is not a folder: {what} cannot be written under it", hint)
    if "append-only" in _marks(folder):  # the probe would be made, and then left there
        raise UserError(
            f"`{folder}` is marked append-only (no file in it may be replaced): {what} cannot be written there", hint
        )
    try:
        handle, probe = tempfile.mkstemp(prefix=".lockgen-writable-", dir=folder)
    except OSError as exc:
        refused = f"`{given}` takes no new file" if folder == given else f"`{given}` cannot be made in `{folder}`"
        raise UserError(f"{refused} ({exc.strerror}): {what} cannot be written there", hint) from None
    os.close(handle)
    try:
        os.unlink(probe)
    except OSError as exc:  # the folder takes files but keeps them: the write's rename would fail the same way
        raise UserError(
            f"`{folder}` takes new files but not their removal ({exc.strerror}): {what} cannot be written there "
            f"(the empty file `{Path(probe).name}` made to find that out could not be removed either)",
            hint,
        ) from None


_SPECIAL = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _refuse_special(path: Path, what: str) -> None:
    """Refuses a `path` that is there (through its links) and is neither a file nor a folder: lockgen writes a new
    file and renames it onto `path`, which would remove a FIFO, a device (as root, /dev/null) or a socket and leave
    a file in its place."""
    try:
        kind = _SPECIAL.get(stat.S_IFMT(os.stat(path).st_mode))
    except OSError:
        return  # not there (or a dangling link): a new file is made
    if kind is not None:
        raise UserError(
            f"`{path}` is {kind}, not a file: {what} cannot replace it",
            "name a file or a new path: lockgen writes a file and renames it into place, which would put a file "
            "where the " + kind.removeprefix("a ") + " is, never write to it",
        )


FS_IOC_GETFLAGS = 0x80086601  # <linux/fs.h>: _IOR('f', 1, long) on 64-bit Linux
_MARKS = {0x00000010: "immutable", 0x00000020: "append-only"}  # FS_IMMUTABLE_FL, FS_APPEND_FL (`chattr +i`, `+a`)


def _marks(path: Path) -> list[str]:
    """The marks of a file or folder (`lsattr`) that no rename gets past: immutable (nothing replaces it or, in
    a folder, is made or removed) and append-only (for a folder: files are made in it, never removed or replaced).
    None where the file system keeps no such marks, or they cannot be read."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []  # unreadable: the probe that follows, or the write, says what is wrong
    try:
        flags = struct.unpack_from("i", fcntl.ioctl(handle, FS_IOC_GETFLAGS, b"\0" * 8))[0]  # the kernel writes an int
    except OSError:
        return []
    finally:
        os.close(handle)
    return [name for bit, name in _MARKS.items() if flags & bit]


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Writes `data` to `path` through a temporary file in the same folder and a rename; `mode` (less the
    umask) is set before the rename (0o777 for a script), so the file appears whole with its mode."""
    _write_pieces(path, [data], mode)


def write_pieces_atomic(path: Path, pieces: Iterable[str], mode: int = 0o666) -> None:
    """Writes the text `pieces` (UTF-8) to `path` one by one, as `write_bytes_atomic` writes their whole: a large
    lock is never held as one text. A piece that cannot be made (an error raised while they are drawn) leaves
    nothing: the temporary file is removed, `path` is as it was."""
    _write_pieces(path, (piece.encode("utf-8") for piece in pieces), mode)


def _write_pieces(path: Path, pieces: Iterable[bytes], mode: int) -> None:
    if path.is_dir():
        raise UserError(f"`{path}` is a folder", "pass the path of a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = temporary_beside(path)
    try:
        os.fchmod(handle, mode & ~UMASK)  # as open() would make it: mkstemp's 0600 is for secrets, not locks
        with os.fdopen(handle, "wb") as stream:
            for piece in pieces:
                stream.write(piece)
        replace_onto(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def replace_onto(temporary: Path, path: Path) -> None:
    """Renames the finished `temporary` onto `path`. A refusal that no check before the work foresees names `path`,
    the destination the user gave, never the temporary file (the caller's to remove: gone by the time the error is
    said): a `path` that is a mount point (a bind-mounted file: EBUSY, or EXDEV) is the user's to fix; any other
    (EACCES in a sticky folder where `path` is another user's, a disk gone read-only) is said as the machine's."""
    try:
        os.replace(temporary, path)
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.EXDEV):
            raise UserError(
                f"`{path}` cannot be replaced ({exc.strerror}): it is a mount point, or held by the system",
                "choose another path, or unmount what is there: lockgen writes a file beside it and renames it into "
                "place; nothing was written",
            ) from None
        raise OSError(exc.errno, exc.strerror, str(path)) from None
