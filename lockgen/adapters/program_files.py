"""An environment's programs on disk as the image will hold them: the file a path of the image leads to in an
environment tree that will sit at `prefix`, links followed as a kernel follows them in the container (an
absolute target from the image's root, a relative one from the link's folder, `..` stopping at the root, at
most `MAX_LINKS`), and that file's bytes, which `core.program_start` reads. A path that leaves the prefix is
the image's other layers' (a base's), which this module does not read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lockgen.core.confined import child

MAX_LINKS = 40  # MAXSYMLINKS, as the kernel counts them in one lookup


def _normal(path: str) -> list[str]:
    kept: list[str] = []
    for part in path.split("/"):
        if part == "..":
            kept = kept[:-1]
        elif part not in ("", "."):
            kept.append(part)
    return kept


def program_file(tree: Path, prefix: str, path: str) -> tuple[str, bytes | None]:
    """(where the absolute image path `path` leads, links of the tree followed; the bytes of the regular file
    there when it is one of the tree's, else None: outside the prefix, absent, a folder, or a loop of links)."""
    top = _normal(prefix)
    parts = _normal(path)
    for _ in range(MAX_LINKS + 1):
        if parts[:len(top)] != top:
            return "/" + "/".join(parts), None
        here, moved = tree, False
        for depth in range(len(top), len(parts)):
            here = child(here, parts[depth], "a path in the environment")
            try:
                info = os.lstat(here)
            except OSError:
                return "/" + "/".join(parts), None
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(here)
                parts = _normal(target if target.startswith("/") else "/".join(parts[:depth]) + "/" + target) \
                    + parts[depth + 1:]
                moved = True
                break
            if depth < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
                return "/" + "/".join(parts), None
        if not moved:
            found = "/" + "/".join(parts)
            return found, here.read_bytes() if len(parts) > len(top) and stat.S_ISREG(os.lstat(here).st_mode) else None
    return "/" + "/".join(parts), None
