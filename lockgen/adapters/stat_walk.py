"""One stat walk of a whole tree, hashed as it goes and shared among the cores: the cheap look that lets a
repeated check, or a repeated materialize, reuse the verdict a full look kept (`conformance_store`). Apart from `prefix_observer`, which looks
at every file, so that the found-unchanged path loads nothing it does not need.

A file changed less than `RACY_NS` before a look is not trusted by its fingerprint later (git's racy entries): a
file system stamps times from a coarse clock (a jiffy, or a whole second on some), so an edit made in the same
tick right after lockgen read a file would leave it unchanged."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

RACY_NS = 1_000_000_000  # a whole second: the coarsest stamps of the file systems lockgen trusts fingerprints on
FRONTIER = 64  # the top of a walk is looked at a level at a time until this many folders are found; fixed, so a digest never depends on the cores
MOST_SHARES = 1024  # the frontier is handed out in at most this many shares, 4 bytes each: one write to the pipe


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
    outside the tree), hashed: any edit (ctime moves even when mtime is put back), replacement (inode), new or
    removed path, mode or capability change (ctime) gives another digest. Links are never entered. Folders are
    not judged settled or not: what they hold is in the walk itself. `keep_walk`: the walk's paths but its
    folders are kept with their lstat (`walked`), for a caller that looks at the files next.

    The top of the tree is walked level by level until `FRONTIER` folders are found, whose subtrees are each
    hashed apart and shared among this process and forked children, one per other core (the stat calls are
    most of a repeated check). What the split is depends on the tree alone, so the digest is the same on any
    number of cores, and the same walked by one process (`keep_walk`, or where none can be forked)."""
    since = time.time_ns() - RACY_NS
    walked: dict[str, os.stat_result] | None = {} if keep_walk else None
    lines: list[str] = []
    settled = True
    frontier = [(str(prefix), "")]
    while frontier and len(frontier) < FRONTIER:  # a level at a time, so the split is the tree's own
        level, frontier = frontier, []
        for path, base in level:
            settled = _look(path, base, since, lines.append, frontier, walked) and settled
    subtrees = {} if keep_walk else _shared(frontier, since)
    for index, (path, base) in enumerate(frontier):
        if index not in subtrees:  # not forked, a child that failed: walked here, where an error is met as before
            subtrees[index] = _subtree(path, base, since, walked)
    parts = [f"{base}\0{digest} {count}\n" for (_, base), (digest, count, _) in zip(frontier, (subtrees[i] for i in range(len(frontier))))]
    text = f"{len(lines)} {len(parts)}\n" + "".join(lines) + "".join(parts)  # counted: the two lists read apart
    paths = len(lines) + sum(count for _, count, _ in subtrees.values())
    settled = settled and all(calm for _, _, calm in subtrees.values())
    return TreeFingerprint(hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(), paths, settled, walked)


def _look(path: str, base: str, since: int, add: Callable[[str], None], folders: list[tuple[str, str]], walked: dict[str, os.stat_result] | None) -> bool:
    """One folder's entries, each a line given to `add`; its subfolders appended to `folders` (path, relative
    path with a slash); whether none of its other entries changed since `since`."""
    settled = True
    with os.scandir(path) as entries:
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            mode = info.st_mode
            relative = base + entry.name
            if stat.S_ISDIR(mode):
                folders.append((entry.path, f"{relative}/"))
            else:
                if walked is not None:
                    walked[relative] = info
                if info.st_ctime_ns >= since:
                    settled = False
            leads = "d" if stat.S_ISLNK(mode) and os.path.isdir(entry.path) else ""
            add(f"{relative}\0{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} {info.st_ctime_ns} {mode}{leads}\n")
    return settled


def _subtree(path: str, base: str, since: int, walked: dict[str, os.stat_result] | None = None) -> tuple[str, int, bool]:
    """The digest of everything below one folder (its paths in walk order), how many, whether all settled."""
    lines: list[str] = []
    settled = True
    pending = [(path, base)]
    while pending:
        folder, relative = pending.pop()
        settled = _look(folder, relative, since, lines.append, pending, walked) and settled
    return hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest(), len(lines), settled


def _shared(frontier: list[tuple[str, str]], since: int) -> dict[int, tuple[str, int, bool]]:
    """The frontier's subtrees walked by this process and a forked child per other core, each taking the next
    share from one pipe (a big subtree does not hold up the rest); what a child could not give is left out."""
    from lockgen.adapters import parallel

    children = min(parallel.cores(), len(frontier)) - 1
    if children < 1:
        return {}
    shares = min(len(frontier), MOST_SHARES)
    read, write = os.pipe()
    os.write(write, b"".join(share.to_bytes(4, "little") for share in range(shares)))  # one write within PIPE_BUF
    os.close(write)
    work = partial(_taken, read, frontier, shares, since)
    try:
        with ExitStack() as started:  # an error here ends the children rather than leave them blocked on their pipes
            forked = [started.enter_context(parallel.Forked(work)) for _ in range(children)]
            texts = [work(), *(child.result() or "" for child in forked)]
    finally:
        os.close(read)
    subtrees: dict[int, tuple[str, int, bool]] = {}
    for line in "\n".join(texts).split("\n"):
        if line:
            index, digest, count, calm = line.split(" ")
            subtrees[int(index)] = (digest, int(count), calm == "1")
    return subtrees


def _taken(read: int, frontier: list[tuple[str, str]], shares: int, since: int) -> str:
    """Shares of the frontier walked until the pipe of their numbers is empty (a read of 4 bytes from a pipe
    is whole), a line for each subtree: its number, digest, paths, settled."""
    done = []
    while len(record := os.read(read, 4)) == 4:
        share = int.from_bytes(record, "little")
        for index in range(share * len(frontier) // shares, (share + 1) * len(frontier) // shares):
            digest, count, settled = _subtree(*frontier[index], since)
            done.append(f"{index} {digest} {count} {int(settled)}")
    return "\n".join(done)
