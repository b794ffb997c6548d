"""An environment as it is on disk, for conformance: every path under a prefix (files, links, links to
folders) with its kind, size, mode bits and file capabilities, and the sha256 of the files a caller asks for
(`parallel.hash_files`, on every core), or, given fingerprints kept from an earlier look (`conformance_store`),
of those whose fingerprint moved. Nothing outside the prefix is read: links are not followed.

`tree_fingerprint` is the cheap look at the whole tree that lets a repeated check reuse its verdict: one
stat walk, hashed as it goes. A file changed less than `RACY_NS` before a look is not trusted by its
fingerprint later (git's racy entries): a file system stamps times from a coarse clock (a jiffy, or a whole
second on some), so an edit made in the same tick right after lockgen read a file would leave it unchanged."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from lockgen.adapters.parallel import BIG, HashedAhead, hash_ahead, hash_files
from lockgen.adapters.security_xattrs import privilege_of
from lockgen.core.conformance import ObservedFile
from lockgen.core.launchers import LIMIT

SCRIPT_LIMIT = LIMIT + 1  # read one byte past a launcher's limit, so a longer file is seen as longer
RACY_NS = 1_000_000_000  # a whole second: the coarsest stamps of the file systems lockgen trusts fingerprints on


@dataclass(frozen=True)
class TreeFingerprint:
    """The sha256 of a tree's stat walk, how many paths it covers, and whether none of them changed within
    `RACY_NS` of the look (only a settled tree's fingerprint may stand for its content later); `walked`, when
    kept: the walk's paths but its folders with the lstat the digest covers, for a caller that goes on to look
    at the files (`observe(walked=...)`: the tree is walked once)."""

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
    return TreeFingerprint(hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest(), len(lines),
                           settled, walked)


def walk(prefix: Path) -> dict[str, os.stat_result]:
    """Every path under `prefix` but its folders (a link to a folder is a path, never entered), with its lstat:
    one scandir pass (each folder entered once), no path joined in Python."""
    found: dict[str, os.stat_result] = {}
    pending = [(str(prefix), "")]
    while pending:
        path, base = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                relative = f"{base}/{entry.name}" if base else entry.name
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    pending.append((entry.path, relative))
                else:
                    found[relative] = info
    return found


def _text(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            return stream.read(SCRIPT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


def likely_wanted(prefix: Path, walked: Mapping[str, os.stat_result], proofs: Mapping[str, list]) -> HashedAhead:
    """Starts hashing, in child processes (`parallel.hash_ahead`), the small files of `walked` a check will most
    likely ask `observe` for, before the caller knows which its packages state: every regular file under
    `parallel.BIG` that no kept fingerprint of `proofs` proves, but byte code (`__pycache__/`, proven apart).
    A file no package states is read for nothing: at most `BIG` bytes each."""
    top = str(prefix)
    return hash_ahead([f"{top}/{relative}" for relative, info in walked.items()
                       if stat.S_ISREG(info.st_mode) and info.st_size < BIG and "__pycache__/" not in relative
                       and not _proven(proofs.get(relative), info)])


def _proven(before: list | None, info: os.stat_result) -> bool:
    return before is not None and before[:5] == [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def observe(prefix: Path, hash_these: Collection[str], meter: Callable[[str, int, int], None] | None = None,
            read_these: Collection[str] = (), proofs: MutableMapping[str, list] | None = None,
            walked: Mapping[str, os.stat_result] | None = None, privileges: bool = True,
            seen: MutableMapping[str, list] | None = None, ahead: HashedAhead | None = None) -> list[ObservedFile]:
    """Every path of `prefix`; files named in `hash_these` (prefix-relative) carry their sha256, small files
    named in `read_these` (entry-point launchers) their text. `proofs` (path -> fingerprint and sha256, as
    `conformance_store` keeps them) gives the sha256 of a file whose fingerprint is unchanged, unread; it is
    left holding the fingerprint and sha256 of every file of `hash_these` that changed more than `RACY_NS`
    before this look (a file changed since is read again next time). `walked`: the tree's paths but its
    folders with their lstat, from a walk the caller made (`env_manifest.scan_tree`) and shares; `privileges`
    false: file capabilities are not looked for (a caller judging paths alone); `seen` is filled like `proofs`
    but with every file of `hash_these`, however recent (for a caller that uses them at once: export); `ahead`:
    files `likely_wanted` started hashing on the same walk (those it could not read are read here)."""
    since = time.time_ns() - RACY_NS
    entries = walked if walked is not None else walk(prefix)
    top = str(prefix)
    kept = proofs if proofs is not None else {}
    recorded = proofs is not None or seen is not None
    digests: dict[str, str] = {}
    now: dict[str, list] = {}  # path -> [device, inode, size, mtime_ns, ctime_ns], the sha256 appended below
    unread: list[str] = []
    for relative, info in entries.items():  # one pass: what is wanted, and what a kept fingerprint proves
        if relative in hash_these and stat.S_ISREG(info.st_mode):
            if recorded:
                fingerprint = now[relative] = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
                before = kept.get(relative)
                if before is not None and before[:5] == fingerprint:
                    digests[relative] = before[5]
                    continue
            unread.append(relative)
    paths = [f"{top}/{relative}" for relative in unread]
    hashed = dict(ahead.digests()) if ahead is not None and unread else {}
    hashed.update(hash_files([(path, entries[relative].st_size) for path, relative in zip(paths, unread) if path not in hashed],
                             (lambda done, total: meter("hash files (MiB)", done >> 20, total >> 20)) if meter is not None else None))
    for path, relative in zip(paths, unread):
        digests[relative] = hashed[path]
    for relative, fingerprint in now.items():
        fingerprint.append(digests[relative])
    if seen is not None:
        seen.update(now)
    if proofs is not None:
        proofs.clear()
        proofs.update({relative: fingerprint for relative, fingerprint in now.items() if fingerprint[4] < since})
    observed: list[ObservedFile] = []
    add = observed.append
    for relative, info in entries.items():
        mode = info.st_mode
        if stat.S_ISREG(mode):
            path = f"{top}/{relative}"
            add(ObservedFile(relative, "file", info.st_size, stat.S_IMODE(mode), digests.get(relative),
                             _text(path) if relative in read_these else None, None,
                             privilege_of(path, mode) if privileges else None))
            continue
        path = f"{top}/{relative}"
        kind = "link" if stat.S_ISLNK(mode) else "other"
        if kind == "link" and os.path.isdir(path):
            kind = "dir-link"
        add(ObservedFile(relative, kind, info.st_size, stat.S_IMODE(mode), None, None,
                         os.readlink(path) if kind != "other" else None))
    return observed
