"""An environment as it is on disk, for conformance: every path under a prefix (files, links, links to
folders) with its kind, size, mode bits and file capabilities, and the sha256 of the files a caller asks for
(`parallel.hash_files`). Nothing outside the prefix is read: links are not followed."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection
from pathlib import Path

from lockgen.adapters.parallel import hash_files
from lockgen.adapters.security_xattrs import privilege_of
from lockgen.core.conformance import ObservedFile
from lockgen.core.launchers import LIMIT

SCRIPT_LIMIT = LIMIT + 1  # read one byte past a launcher's limit, so a longer file is seen as longer

def _walk(prefix: Path) -> list[tuple[str, os.stat_result]]:
    found = []
    top = str(prefix)
    for root, dirs, files in os.walk(top):
        base = root[len(top) + 1:]  # os.walk's roots extend `top`: no relpath per file
        keep = []
        for name in dirs:
            info = os.lstat(os.path.join(root, name))
            if stat.S_ISLNK(info.st_mode):
                found.append((f"{base}/{name}" if base else name, info))
            else:
                keep.append(name)
        dirs[:] = keep
        for name in files:
            found.append((f"{base}/{name}" if base else name, os.lstat(os.path.join(root, name))))
    return found


def _text(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            return stream.read(SCRIPT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


def observe(prefix: Path, hash_these: Collection[str], meter: Callable[[str, int, int], None] | None = None,
            read_these: Collection[str] = ()) -> list[ObservedFile]:
    """Every path of `prefix`; files named in `hash_these` (prefix-relative) carry their sha256, small files
    named in `read_these` (entry-point launchers) their text."""
    entries = _walk(prefix)
    top = str(prefix)
    wanted = {os.path.join(top, relative): relative for relative, info in entries
              if stat.S_ISREG(info.st_mode) and relative in hash_these}
    sizes = {relative: info.st_size for relative, info in entries}
    hashed = hash_files([(path, sizes[relative]) for path, relative in wanted.items()],
                        (lambda done, total: meter("hash files (MiB)", done >> 20, total >> 20)) if meter is not None else None)
    digests = {wanted[path]: digest for path, digest in hashed.items()}
    observed = []
    for relative, info in entries:
        mode = info.st_mode
        kind = "file" if stat.S_ISREG(mode) else ("link" if stat.S_ISLNK(mode) else "other")
        if kind == "link" and os.path.isdir(os.path.join(top, relative)):
            kind = "dir-link"
        text = _text(os.path.join(top, relative)) if kind == "file" and relative in read_these else None
        target = os.readlink(os.path.join(top, relative)) if kind in ("link", "dir-link") else None
        privilege = privilege_of(os.path.join(top, relative)) if kind == "file" else None
        observed.append(ObservedFile(relative.replace(os.sep, "/"), kind, info.st_size, stat.S_IMODE(mode),
                                     digests.get(relative), text, target, privilege))
    return observed
