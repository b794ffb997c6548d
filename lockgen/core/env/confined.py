"""The one way a path is built from a value that came from input (a lock's name, version, build or hash, a
target name): each value must be one plain file name, so the result is always directly inside the folder
it is joined to. Lock fields are checked when the lock is read (`core.lock.lock_fields`); this is the second
wall, at the place where a value becomes a path (a cache folder that is later removed, a manifest file
that is written), so no future reader that skips the first can reach outside."""

from __future__ import annotations

from pathlib import Path

from lockgen.model.names import shown
from lockgen.errors import LockFormatError

NAME_MAX = 255  # bytes, the file-name limit of Linux file systems


def file_name(value: str, what: str) -> str:
    """`value` when it is one plain file name: not empty, not `.` or `..`, no `/`, no NUL or control
    character, at most 255 bytes."""
    if (
        not value
        or value in (".", "..")
        or "/" in value
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
        or len(value.encode("utf-8", "surrogateescape")) > NAME_MAX
    ):
        raise LockFormatError(
            f"{what} `{shown(value)}` cannot be a file name (a path, a control character or over {NAME_MAX} bytes)",
            "the input was made by hand or tampered with: re-create it with lockgen",
        )
    return value


def child(folder: Path, name: str, what: str) -> Path:
    """`folder / name`, where `name` must be one plain file name (see `file_name`)."""
    return folder / file_name(name, what)
