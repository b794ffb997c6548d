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

from lockgen.adapters.parallel import hash_files
from lockgen.adapters.security_xattrs import privilege_of
from lockgen.adapters.stat_walk import RACY_NS
from lockgen.core.conformance import ObservedFile
from lockgen.core.launchers import LIMIT

SCRIPT_LIMIT = LIMIT + 1  # read one byte past a launcher's limit, so a longer file is seen as longer


def _walk(prefix: Path) -> list[tuple[str, os.stat_result]]:
    """Every path under `prefix` but its folders (a link to a folder is a path, never entered), with its lstat:
    one scandir pass (each folder entered once), no path joined in Python."""
    found = []
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
                    found.append((relative, info))
    return found


def _text(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            return stream.read(SCRIPT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


def _fingerprint(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def observe(prefix: Path, hash_these: Collection[str], meter: Callable[[str, int, int], None] | None = None,
            read_these: Collection[str] = (), proofs: MutableMapping[str, list] | None = None,
            walked: Mapping[str, os.stat_result] | None = None, privileges: bool = True,
            seen: MutableMapping[str, list] | None = None) -> list[ObservedFile]:
    """Every path of `prefix`; files named in `hash_these` (prefix-relative) carry their sha256, small files
    named in `read_these` (entry-point launchers) their text. `proofs` (path -> fingerprint and sha256, as
    `conformance_store` keeps them) gives the sha256 of a file whose fingerprint is unchanged, unread; it is
    left holding the fingerprint and sha256 of every file of `hash_these` that changed more than `RACY_NS`
    before this look (a file changed since is read again next time). `walked`: the tree's paths but its
    folders with their lstat, from a walk the caller made (`env_manifest.scan_tree`) and shares; `privileges`
    false: file capabilities are not looked for (a caller judging paths alone); `seen` is filled like `proofs`
    but with every file of `hash_these`, however recent (for a caller that uses them at once: export)."""
    since = time.time_ns() - RACY_NS
    entries = list(walked.items()) if walked is not None else _walk(prefix)
    top = str(prefix)
    infos = {relative: info for relative, info in entries if stat.S_ISREG(info.st_mode) and relative in hash_these}
    now = {relative: _fingerprint(info) for relative, info in infos.items()} if proofs is not None or seen is not None else {}
    kept = dict(proofs or {})
    digests = {relative: kept[relative][5] for relative, fingerprint in now.items()
               if kept.get(relative, [None])[:5] == fingerprint}
    wanted = {f"{top}/{relative}": relative for relative in infos if relative not in digests}
    hashed = hash_files([(path, infos[relative].st_size) for path, relative in wanted.items()],
                        (lambda done, total: meter("hash files (MiB)", done >> 20, total >> 20)) if meter is not None else None)
    digests.update({wanted[path]: digest for path, digest in hashed.items()})
    if seen is not None:
        seen.update({relative: [*fingerprint, digests[relative]] for relative, fingerprint in now.items()})
    if proofs is not None:
        proofs.clear()
        proofs.update({relative: [*fingerprint, digests[relative]] for relative, fingerprint in now.items()
                       if fingerprint[4] < since})
    observed = []
    for relative, info in entries:
        mode, path = info.st_mode, f"{top}/{relative}"
        kind = "file" if stat.S_ISREG(mode) else ("link" if stat.S_ISLNK(mode) else "other")
        if kind == "link" and os.path.isdir(path):
            kind = "dir-link"
        text = _text(path) if kind == "file" and relative in read_these else None
        target = os.readlink(path) if kind in ("link", "dir-link") else None
        privilege = privilege_of(path) if kind == "file" and privileges else None
        observed.append(ObservedFile(relative, kind, info.st_size, stat.S_IMODE(mode), digests.get(relative), text,
                                     target, privilege))
    return observed
