"""One stat walk of a whole tree, hashed as it goes and shared among the cores: the cheap look that lets a
repeated check, or a repeated materialize, reuse the verdict a full look kept (`conformance_store`). Apart from
`prefix_observer`, which looks
at every file, so that the found-unchanged path loads nothing it does not need.

A file changed less than `RACY_NS` before a look is not trusted by its fingerprint later (git's racy entries): a
file system stamps times from a coarse clock (a jiffy, or a whole second on some), so an edit made in the same
tick right after lockgen read a file would leave it unchanged.

A file's ctime and link count are kept beside the digest, not in it (`TreeFingerprint.stamps`): environments
hard-link the store's files, so removing one moves the ctime of every file another shares with it, and that is no
edit. A kept walk stands for a new one of the same digest where every ctime that moved moved with its link count
(`links_moved`, the rule of `core.env.drift.ctime_stands`); a ctime moved with the link count as it was (an edit with
size and mtime put back, a chmod back, new file capabilities) is a changed tree, as before."""

from __future__ import annotations

import marshal
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from lockgen.adapters.proof.stat_digest import (
    FRONTIER,
    RACY_NS,
    digest_of,
    folder_record,
    settled_since,
    subtree_records,
    top_of_tree,
)
from lockgen.core.env.stat_rules import ctime_stands

if TYPE_CHECKING:
    from lockgen.adapters.proof.stat_digest import Keep

__all__ = ["FRONTIER", "RACY_NS", "Lstat", "StatFields", "TreeFingerprint", "links_moved", "tree_fingerprint"]
BIG_FOLDER = 10  # a waiting folder linked this often (8 folders in it) is opened before the sharing
MOST_SHARES = (
    1024  # the frontier is handed out in at most this many shares: `parallel.MOST_SHARES`, one write to the pipe
)


class StatFields(Protocol):
    """The lstat fields a conformance check reads of a walked path: an `os.stat_result`'s, or a kept walk's `Lstat`."""

    @property
    def st_dev(self) -> int: ...
    @property
    def st_ino(self) -> int: ...
    @property
    def st_size(self) -> int: ...
    @property
    def st_mtime_ns(self) -> int: ...
    @property
    def st_ctime_ns(self) -> int: ...
    @property
    def st_mode(self) -> int: ...
    @property
    def st_nlink(self) -> int: ...


class Lstat(NamedTuple):
    """What a kept walk holds of a path's lstat: the fields a fingerprint and a conformance check read (an
    `os.stat_result` has the same names), small enough for forked children to send back fast."""

    st_dev: int
    st_ino: int
    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int
    st_mode: int
    st_nlink: int


@dataclass(frozen=True)
class TreeFingerprint:
    """The sha256 of a tree's stat walk, how many paths it covers, and whether none of them changed within
    `RACY_NS` of the look (only a settled tree's fingerprint may stand for its content later); `stamps`: per
    folder (its path with a slash, "" the top), the link count and ctime of each of its files and links, in the
    order the digest covers them, as text (`links_moved` compares two walks' stamps); `walked`, when kept: the
    walk's paths but its folders with their lstat, for a caller that goes on to look at the files
    (`prefix_observer.observe(walked=...)`: the tree is walked once)."""

    digest: str
    paths: int
    settled: bool
    stamps: dict[str, str] = field(default_factory=dict, repr=False)
    walked: dict[str, Lstat] | None = field(default=None, compare=False, repr=False)


def links_moved(kept: object, now: dict[str, str]) -> int | None:
    """How many files' ctime moved with their link count between a kept walk's `stamps` and a new walk's of the
    same digest (another environment linking them was made or removed: no edit); None when a ctime moved with the
    link count as it was (an edit, git's rule), or `kept` is not stamps of the same folders (a damaged record)."""
    if not isinstance(kept, dict) or kept.keys() != now.keys():
        return None
    moved = 0
    for base, stamps in now.items():
        before = kept[base]
        if before == stamps:
            continue
        if not isinstance(before, str):
            return None
        old, new = before.split(), stamps.split()
        if len(old) != len(new) or not all(value.isdigit() for value in old):
            return None
        for at in range(0, len(new), 2):
            if old[at + 1] != new[at + 1]:
                if not ctime_stands(int(old[at]), int(new[at]), int(old[at + 1]), int(new[at + 1])):
                    return None
                moved += 1
    return moved


def tree_fingerprint(prefix: Path, keep_walk: bool = False) -> TreeFingerprint:
    """Every path under `prefix`, folders too (an empty one is drift), each with (device, inode, size,
    mtime_ns, mode; a folder's ctime too) and, for a link, whether it leads to a folder (what conformance sees of
    it outside the tree), hashed: an edit that moves size or mtime, replacement (inode), new or removed path or
    mode change gives another digest; the ctime and link count of files and links are the walk's `stamps`, which
    `links_moved` holds to git's rule (an edit with size and mtime put back, or a capability change, moves the
    ctime alone). Links are never entered. Folders are not judged settled or not: what they hold is in the walk
    itself. `keep_walk`: the walk's paths but its folders are kept with their lstat (`walked`), for a caller that
    looks at the files next.

    The digest is of each folder's own entries, hashed apart and listed by the folder's path, so who looks at
    which folder does not change it: the top of the tree is looked at here until `FRONTIER` folders wait, the
    ones holding most folders opened further, and their subtrees are shared, biggest first, among this process
    and forked children, one per other core (the stat calls are most of a repeated check, and a tenth of a first
    one on 16 cores), who send back their part of the walk too when it is kept. Where no child can be forked,
    it is all walked here: the same digest, the same walk."""
    since = settled_since()
    walked: dict[str, Lstat] | None = {} if keep_walk else None
    keep = _keeper(walked)
    folders, frontier = top_of_tree(str(prefix), since, keep, FRONTIER)  # the top, a level at a time
    while frontier and len(frontier) < MOST_SHARES // 2:  # a folder holding many folders is opened: shares even out
        biggest = max(range(len(frontier)), key=lambda index: frontier[index][2])
        if frontier[biggest][2] < BIG_FOLDER:
            break
        path, base, _, _ = frontier.pop(biggest)
        folders.append(folder_record(path, base, since, frontier, keep))
    frontier.sort(
        key=lambda waiting: -waiting[3]
    )  # most entries first (a folder's size grows with them): the last shares are small
    theirs, done = _shared(frontier, since, walked)
    folders.append(theirs)
    for index, (path, base, _, _) in enumerate(frontier):
        if index not in done:  # not forked, a child that failed: walked here, where an error is met as before
            folders.append(subtree_records(path, base, since, keep))
    digest, paths, settled, stamps = digest_of(folders)
    return TreeFingerprint(digest, paths, settled, stamps, walked)


def _keeper(walked: dict[str, Lstat] | None) -> Keep | None:
    """What puts a walked path's lstat fields in `walked` (None when the walk is not kept)."""
    if walked is None:
        return None

    def keep(relative: str, info: os.stat_result) -> None:
        walked[relative] = Lstat(
            info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode, info.st_nlink
        )

    return keep


def _shared(
    frontier: list[tuple[str, str, int, int]], since: int, walked: dict[str, Lstat] | None
) -> tuple[str, set[int]]:
    """The records of the frontier's subtrees walked by this process and a forked child per other core, each
    taking the next share from one pipe (a big subtree does not hold up the rest), and which subtrees they are
    (a child that failed gave none of its own); `walked`, when kept, gets every path they walked."""
    if not frontier:  # a small tree, walked whole at its top: nothing to share (and no threads imported)
        return "", set()
    from contextlib import ExitStack
    from functools import partial

    from lockgen.adapters import parallel

    children = min(parallel.cores(), len(frontier)) - 1
    if children < 1:
        return "", set()
    shares = min(len(frontier), MOST_SHARES)
    read = parallel.share_numbers(shares)
    if read is None:  # no descriptor to be had: walked here
        return "", set()
    theirs = partial(_child, read, frontier, shares, since, walked is not None)
    try:
        with ExitStack() as started:  # an error here ends the children rather than leave them blocked on their pipes
            forked = [started.enter_context(parallel.Forked(theirs)) for _ in range(children)]
            texts = [_taken(read, frontier, shares, since, walked), *(_sent(child.data(), walked) for child in forked)]
    finally:
        os.close(read)
    records: list[str] = []
    done: set[int] = set()
    for text in filter(None, texts):
        mine, _, indices = text.rpartition("\0\0")
        records.append(mine)
        done.update(map(int, indices.split()))
    return "".join(records), done


def _child(read: int, frontier: list[tuple[str, str, int, int]], shares: int, since: int, keep: bool) -> bytes:
    """A forked child's part (`_taken`) and, when the walk is kept, its paths and their lstat fields, marshalled:
    70,000 paths are read back in a fifth of the time lines of numbers take to parse."""
    walked: dict[str, Lstat] | None = {} if keep else None
    text = _taken(read, frontier, shares, since, walked)
    return marshal.dumps(
        (text, list(walked), [tuple(info) for info in walked.values()]) if walked is not None else (text, [], [])
    )


def _sent(data: bytes | None, walked: dict[str, Lstat] | None) -> str:
    """The text of a child's part (empty when it failed: the caller walks its shares), its paths put in `walked`."""
    if data is None:
        return ""
    text, paths, infos = marshal.loads(data)  # written by lockgen's own forked child, from this process's memory
    if walked is not None:
        walked.update(zip(paths, map(Lstat._make, infos)))
    return str(text)


def _taken(
    read: int, frontier: list[tuple[str, str, int, int]], shares: int, since: int, walked: dict[str, Lstat] | None
) -> str:
    """Shares of the frontier walked until the pipe of their numbers is empty: their subtrees' records, two NULs
    (no record holds them: no field is empty), their numbers; `walked`, when kept, gets their paths."""
    from lockgen.adapters.parallel import taken_shares

    records, done = [], []
    for share in taken_shares(read):
        for index in range(share * len(frontier) // shares, (share + 1) * len(frontier) // shares):
            path, base, _, _ = frontier[index]
            records.append(subtree_records(path, base, since, _keeper(walked)))
            done.append(str(index))
    return "".join(records) + "\0\0" + " ".join(done)
