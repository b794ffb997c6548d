"""An environment as it is on disk, for conformance: every path under a prefix (files, links, links to
folders) with its kind, size and mode bits, and the sha256 of the files a caller asks for, hashed on
every core (sha256 releases the GIL). Nothing outside the prefix is read: links are not followed."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lockgen.core.conformance import ObservedFile

_BLOCK = 1 << 20


def _sha256(path: str) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb", buffering=0) as stream:
        while block := stream.read(_BLOCK):
            hasher.update(block)
    return hasher.hexdigest()


def _walk(prefix: Path) -> list[tuple[str, os.stat_result]]:
    found = []
    root_text = str(prefix)
    for root, dirs, files in os.walk(root_text):
        relative_root = os.path.relpath(root, root_text)
        keep = []
        for name in dirs:
            info = os.lstat(os.path.join(root, name))
            if stat.S_ISLNK(info.st_mode):
                found.append((os.path.normpath(os.path.join(relative_root, name)), info))
            else:
                keep.append(name)
        dirs[:] = keep
        for name in files:
            found.append((os.path.normpath(os.path.join(relative_root, name)), os.lstat(os.path.join(root, name))))
    return found


def observe(prefix: Path, hash_these: Collection[str], meter: Callable[[str, int, int], None] | None = None) -> list[ObservedFile]:
    """Every path of `prefix`; files named in `hash_these` (prefix-relative) carry their sha256."""
    entries = _walk(prefix)
    wanted = [(relative, info) for relative, info in entries if stat.S_ISREG(info.st_mode) and relative in hash_these]
    total = sum(info.st_size for _, info in wanted) or 1
    done = 0

    def digest(item: tuple[str, os.stat_result]) -> tuple[str, str]:
        return item[0], _sha256(str(prefix / item[0]))

    digests: dict[str, str] = {}
    # big files first, so the pool is never left waiting on one large library at the end
    wanted.sort(key=lambda item: -item[1].st_size)
    with ThreadPoolExecutor(max_workers=max(1, min(32, (os.cpu_count() or 1) * 2))) as pool:
        for (relative, value), (_, info) in zip(pool.map(digest, wanted), wanted):
            digests[relative] = value
            done += info.st_size
            if meter is not None:
                meter("hash files", done >> 20, total >> 20)
    observed = []
    for relative, info in entries:
        mode = info.st_mode
        kind = "file" if stat.S_ISREG(mode) else ("link" if stat.S_ISLNK(mode) else "other")
        if kind == "link" and os.path.isdir(prefix / relative):
            kind = "dir-link"
        observed.append(ObservedFile(relative.replace(os.sep, "/"), kind, info.st_size, stat.S_IMODE(mode),
                                     digests.get(relative)))
    return observed
