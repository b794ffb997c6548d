"""An environment as it is on disk, for conformance: every path under a prefix (files, links, links to
folders) with its kind, size, mode bits and file capabilities, and the sha256 of the files a caller asks for
(`parallel.hash_files`, on every core), or, given fingerprints kept from an earlier look (`conformance_store`),
of those whose fingerprint moved. Nothing outside the prefix is read: links are not followed.

The cheap look at the whole tree that lets a repeated check reuse its verdict is `stat_walk`'s. A file changed
less than `RACY_NS` before a look is not trusted by its fingerprint later (git's racy entries)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping
from pathlib import Path

from lockgen.adapters.parallel import HashedAhead, hash_ahead, hash_files
from lockgen.adapters.proof.security_xattrs import privilege_of
from lockgen.adapters.proof.stat_walk import RACY_NS, StatFields
from lockgen.core.env.conformance import ObservedFile
from lockgen.core.env.stat_rules import ctime_stands
from lockgen.core.image.launchers import LIMIT

SCRIPT_LIMIT = LIMIT + 1  # read one byte past a launcher's limit, so a longer file is seen as longer


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


def likely_wanted(prefix: Path, walked: Mapping[str, StatFields], proofs: Mapping[str, list]) -> HashedAhead:
    """Starts hashing, in child processes (`parallel.hash_ahead`), the files of `walked` a check will most
    likely ask `observe` for, before the caller knows which its packages state: every regular file that no
    kept fingerprint of `proofs` proves, byte code too (its proof needs its sha256). A file no package states
    is read for nothing: an environment that holds one does not conform (an extra file) unless the caller
    allows it by name."""
    top = str(prefix)
    return hash_ahead(
        [
            (f"{top}/{relative}", info.st_size)
            for relative, info in walked.items()
            if stat.S_ISREG(info.st_mode) and not _proven(proofs.get(relative), info)
        ]
    )


def _proven(before: list | None, info: StatFields) -> bool:
    """Whether a kept fingerprint ([device, inode, size, mtime_ns, ctime_ns, sha256, link count]) still proves the
    file: the same first four, and a ctime that stands (`stat_rules.ctime_stands`: the same, or moved with the link
    count; a record without the link count compares the ctime alone)."""
    return (
        before is not None
        and before[:4] == [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]
        and len(before) >= 6
        and ctime_stands(
            before[6] if len(before) > 6 and type(before[6]) is int else None,
            info.st_nlink,
            before[4],
            info.st_ctime_ns,
        )
    )


def observe(
    prefix: Path,
    hash_these: Collection[str],
    meter: Callable[[str, int, int], None] | None = None,
    read_these: Collection[str] = (),
    proofs: MutableMapping[str, list] | None = None,
    walked: Mapping[str, StatFields] | None = None,
    privileges: bool = True,
    seen: MutableMapping[str, list] | None = None,
    ahead: HashedAhead | None = None,
) -> list[ObservedFile]:
    """Every path of `prefix`; files named in `hash_these` (prefix-relative) carry their sha256, small files
    named in `read_these` (entry-point launchers) their text. `proofs` (path -> fingerprint, sha256 and link count, as
    `conformance_store` keeps them) gives the sha256 of a file whose fingerprint is unchanged (`_proven`), unread; it is
    left holding the fingerprint, sha256 and link count of every file of `hash_these` that changed more than `RACY_NS`
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
    now: dict[
        str, list
    ] = {}  # path -> [device, inode, size, mtime_ns, ctime_ns], the sha256 and link count appended below
    links: dict[str, int] = {}
    unread: list[str] = []
    for relative, info in entries.items():  # one pass: what is wanted, and what a kept fingerprint proves
        if relative in hash_these and stat.S_ISREG(info.st_mode):
            if recorded:
                now[relative] = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
                links[relative] = info.st_nlink
                before = kept.get(relative)
                if _proven(before, info):
                    digests[relative] = before[5]  # type: ignore[index]  # `_proven` holds it to a list of six or more
                    continue
            unread.append(relative)
    paths = [f"{top}/{relative}" for relative in unread]
    shown = (lambda done, total: meter("hash files (MiB)", done >> 20, total >> 20)) if meter is not None else None
    hashed = dict(ahead.digests(shown)) if ahead is not None and unread else {}
    hashed.update(
        hash_files(
            [(path, entries[relative].st_size) for path, relative in zip(paths, unread) if path not in hashed], shown
        )
    )
    for path, relative in zip(paths, unread):
        digests[relative] = hashed[path]
    for relative, fingerprint in now.items():
        fingerprint += [digests[relative], links[relative]]
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
            add(
                ObservedFile(
                    relative,
                    "file",
                    info.st_size,
                    stat.S_IMODE(mode),
                    digests.get(relative),
                    _text(path) if relative in read_these else None,
                    None,
                    privilege_of(path, mode) if privileges else None,
                )
            )
            continue
        path = f"{top}/{relative}"
        kind = "link" if stat.S_ISLNK(mode) else "other"
        if kind == "link" and os.path.isdir(path):
            kind = "dir-link"
        add(
            ObservedFile(
                relative,
                kind,
                info.st_size,
                stat.S_IMODE(mode),
                None,
                None,
                os.readlink(path) if kind != "other" else None,
            )
        )
    return observed
