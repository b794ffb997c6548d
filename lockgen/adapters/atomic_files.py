"""Writing files so that a reader sees the old bytes or the new, never half: a temporary file in the
same folder, then a rename (locks, rendered files, certificates, manifests, cache entries)."""

from __future__ import annotations

import os
import tempfile
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


def check_writable(destination: Path, what: str, hint: str) -> None:
    """Refuses, before any work whose result goes to `destination` (a file or folder made in its parent, the
    parents made first where missing), a parent that takes no new file: proven by making an empty file where the
    write's own temporary file would go and removing it at once. Mode bits alone would not tell: root writes a
    chmod 0555 folder, but not a read-only mount or an immutable (`chattr +i`) folder. `what` names the
    destination as the user gave it (`--out img`); the error names the folder they gave, and the one that
    refused where that is an ancestor still to be made."""
    given = destination.parent
    folder = given
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"`{folder}` is not a folder: {what} cannot be written under it", hint)
    try:
        handle, probe = tempfile.mkstemp(prefix=".lockgen-writable-", dir=folder)
    except OSError as exc:
        refused = f"`{given}` is not writable" if folder == given else f"`{given}` cannot be made in `{folder}`"
        raise UserError(f"{refused} ({exc.strerror}): {what} cannot be written there", hint) from None
    os.close(handle)
    os.unlink(probe)


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Writes `data` to `path` through a temporary file in the same folder and a rename; `mode` (less the
    umask) is set before the rename (0o777 for a script), so the file appears whole with its mode."""
    if path.is_dir():
        raise UserError(f"`{path}` is a folder", "pass the path of a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = temporary_beside(path)
    try:
        os.fchmod(handle, mode & ~UMASK)  # as open() would make it: mkstemp's 0600 is for secrets, not locks
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
