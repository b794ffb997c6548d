"""An environment's programs on disk as the image will hold them: the file a path of the image leads to in an
environment tree that will sit at `prefix`, links followed as a kernel follows them in the container (an
absolute target from the image's root, a relative one from the link's folder, `..` stopping at the root, at
most `MAX_LINKS`), and that file's bytes, which `core.image.program_start` reads. A path that leaves the prefix is
the image's other layers' (a base's), which this module does not read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lockgen.core.env.confined import child

MAX_LINKS = 40  # MAXSYMLINKS, as the kernel counts them in one lookup


def _joined(parts: list[str]) -> str:
    return "/" + "/".join(part for part in parts if part not in ("", "."))


def _in_tree(tree: Path, names: list[str]) -> Path:
    here = tree
    for name in names:
        here = child(here, name, "a path in the environment")
    return here


def program_file(tree: Path, prefix: str, path: str) -> tuple[str, bytes | None]:
    """(where the absolute image path `path` leads, links of the tree followed; the bytes of the regular file
    there when it is one of the tree's, else None: outside the prefix, absent, a folder, not a folder where
    the path goes on, or more than `MAX_LINKS` links). Each `..` is taken where the links so far have led, as
    the kernel takes it; a path that leaves the prefix is given as it goes on from there."""
    top = [part for part in prefix.split("/") if part]
    resolved: list[str] = []
    pending = path.split("/")
    links = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            resolved = resolved[:-1]
            continue
        resolved.append(part)
        if resolved[: len(top)] != top[: len(resolved)]:
            return _joined(resolved + pending), None  # the base's layers hold the rest of the way
        if len(resolved) <= len(top):
            continue  # a folder on the way to the environment
        here = _in_tree(tree, resolved[len(top) :])
        try:
            info = os.lstat(here)
        except OSError:
            return _joined(resolved + pending), None
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                return _joined(resolved + pending), None
            target = os.readlink(here)
            resolved = [] if target.startswith("/") else resolved[:-1]
            pending = target.split("/") + pending
        elif any(rest not in ("", ".") for rest in pending) and not stat.S_ISDIR(info.st_mode):
            return _joined(resolved + pending), None
    found = _joined(resolved)
    if len(resolved) <= len(top):
        return found, None
    here = _in_tree(tree, resolved[len(top) :])
    return found, here.read_bytes() if stat.S_ISREG(os.lstat(here).st_mode) else None
