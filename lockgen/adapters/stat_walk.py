"""One stat walk of a whole tree, hashed as it goes: the cheap look that lets a repeated check, or a repeated
materialize, reuse the verdict a full look kept (`conformance_store`). Apart from `prefix_observer`, which looks
at every file, so that the found-unchanged path loads nothing it does not need.

A file changed less than `RACY_NS` before a look is not trusted by its fingerprint later (git's racy entries): a
file system stamps times from a coarse clock (a jiffy, or a whole second on some), so an edit made in the same
tick right after lockgen read a file would leave it unchanged."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

RACY_NS = 1_000_000_000  # a whole second: the coarsest stamps of the file systems lockgen trusts fingerprints on


@dataclass(frozen=True)
class TreeFingerprint:
    """The sha256 of a tree's stat walk, how many paths it covers, and whether none of them changed within
    `RACY_NS` of the look (only a settled tree's fingerprint may stand for its content later); `walked`, when
    kept: the walk's paths but its folders with the lstat the digest covers, for a caller that goes on to look
    at the files (`prefix_observer.observe(walked=...)`: the tree is walked once)."""

    digest: str
    paths: int
    settled: bool
    walked: dict[str, os.stat_result] | None = field(default=None, compare=False, repr=False)


def tree_fingerprint(prefix: Path, keep_walk: bool = False) -> TreeFingerprint:
    """Every path under `prefix`, folders too (an empty one is drift), each with (device, inode, size,
    mtime_ns, ctime_ns, mode) and, for a link, whether it leads to a folder (what conformance sees of it
    outside the tree), hashed in walk order: any edit (ctime moves even when mtime is put back), replacement
    (inode), new or removed path, mode or capability change (ctime) gives another digest. Links are never
    entered. Folders are not judged settled or not: what they hold is in the walk itself. `keep_walk`: the
    walk's paths but its folders are kept with their lstat (`walked`), for a caller that looks at the files next."""
    since = time.time_ns() - RACY_NS
    lines: list[str] = []
    add = lines.append
    walked: dict[str, os.stat_result] | None = {} if keep_walk else None
    settled = True
    pending = [(str(prefix), "")]
    while pending:
        path, base = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                mode = info.st_mode
                relative = base + entry.name
                if stat.S_ISDIR(mode):
                    pending.append((entry.path, f"{relative}/"))
                else:
                    if walked is not None:
                        walked[relative] = info
                    if info.st_ctime_ns >= since:
                        settled = False
                leads = "d" if stat.S_ISLNK(mode) and os.path.isdir(entry.path) else ""
                add(f"{relative}\0{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} {info.st_ctime_ns} {mode}{leads}\n")
    return TreeFingerprint(hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest(), len(lines), settled, walked)
