"""The one way lockgen opens a file a user names (a stack, a lock, a foreign lock, a key, a certificate, a node
facts file, an inventory, a pack archive, an expectations file) or one it keeps for itself (a conformance record):
opened without waiting (`O_NONBLOCK`: a FIFO with no writer would hold an open for reading forever, a device
would be read without end), judged on the descriptor opened, so nothing swapped in after is read, and refused
unless it is a regular file; a file of a kind whose size is known is read no further than its cap.

A refusal is an OSError naming what the path is (`a FIFO, not a regular file`; `over 1 MiB, no key is`), so
each caller's handling of a file it cannot read, with its own message and hint, covers it unchanged."""

from __future__ import annotations

import errno
import fcntl
import os
import stat

TYPE_CHECKING = False  # pathlib, typing: for annotations only (this module is on the kept `run`'s path)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import BinaryIO

KEY_LIMIT = 1 << 20  # a PEM key is a few hundred bytes
CERTIFICATE_LIMIT = 16 << 20  # a certificate's checks and figures: tens of KiB
STACK_LIMIT = 16 << 20  # a stack.toml, a pyproject.toml, a node facts or expectations file: a few KiB
GROWN_BLOCK = 1 << 16  # what a capped read asks for at a time past the size the file had when opened

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class RefusedFile(OSError):
    """A path that is not a regular file, or a file past its kind's cap: its `strerror` says which, in words."""

    def __str__(self) -> str:
        return self.strerror or ""


def opened(path: Path | str) -> BinaryIO:
    """`path` open for reading, in blocking mode again once judged a regular file; anything else a RefusedFile."""
    fd, _ = _regular(path)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _regular(path: Path | str) -> tuple[int, int]:
    """A descriptor of `path` opened without waiting, and its size, once judged a regular file (O_NONBLOCK does
    not change how a regular file reads); anything else a RefusedFile."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            kind = next((word for test, word in _KINDS if test(status.st_mode)), "no regular file")
            raise RefusedFile(
                errno.EISDIR if stat.S_ISDIR(status.st_mode) else errno.EINVAL, f"{kind}, not a regular file"
            )
        return fd, status.st_size
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path | str, limit: int | None = None, kind: str = "file") -> bytes:
    """The bytes of the regular file `path`; with `limit`, a file larger than that (`kind` names what it should
    be, for the refusal: "key") is refused after reading at most one byte past it. With a limit the file is read
    by its descriptor into one buffer of the size it has (a buffered read of the cap allocates and frees all of
    it, 16 MiB for a certificate of 25 KiB: a fleet of 10,000 spent more in that than in reading), and on, in
    case it grew, to the end or one byte past the cap."""
    if limit is None:
        with opened(path) as stream:
            return stream.read()
    fd, size = _regular(path)
    try:
        parts = [os.read(fd, min(size, limit) + 1)]
        held = len(parts[0])
        while parts[-1] and held <= limit:  # to its end (one read that finds none), in blocks not the cap's size
            parts.append(os.read(fd, min(limit + 1 - held, GROWN_BLOCK)))
            held += len(parts[-1])
    finally:
        os.close(fd)
    if held > limit:
        raise RefusedFile(errno.EFBIG, f"over {_size(limit)}, larger than any {kind}")
    return parts[0] if held == len(parts[0]) else b"".join(parts)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def names_ending(root: str, suffix: str) -> Iterator[str]:
    """Every path under the folder `root` (as `str(Path)` writes it) whose name ends with `suffix`, as text, in the
    order the folders list them: what `Path(root).rglob(f"*{suffix}")` finds, and what is under the folders linked
    to (an NFS layout's `certs/rack1 -> /elsewhere/rack1`), each real folder walked once (a link to a folder walked,
    or to be, or to one of its parents is passed over: no loop); one that cannot be listed is passed over. Without
    a Path per entry, nor a system call per folder that is no link: a folder's real path is its parent's and its
    name."""
    pending = [(root, os.path.realpath(root))]
    walked = {pending[0][1]}  # the real paths of the trees walked: the root's and each linked folder's
    while pending:
        folder, real = pending.pop()
        prefix = "" if folder == "." else folder if folder.endswith("/") else folder + "/"
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:  # not a folder, gone, or not ours to list: rglob finds nothing there either
            continue
        for entry in listed:
            path = prefix + entry.name
            if entry.name.endswith(suffix):
                yield path
            try:
                if entry.is_dir(follow_symlinks=False):
                    inside = os.path.join(real, entry.name)
                    if inside not in walked:  # else a link to it was followed: walked there
                        pending.append((path, inside))
                elif entry.is_symlink() and entry.is_dir():
                    target = os.path.realpath(path)
                    if not _under(target, walked):
                        walked.add(target)
                        pending.append((path, target))
            except OSError:
                continue


def _under(real: str, walked: set[str]) -> bool:
    """Whether the real path `real` is one of `walked` or inside one of them."""
    while real not in walked:
        parent = os.path.dirname(real)
        if parent == real:
            return False
        real = parent
    return True
