"""Fingerprints of the files `check --lock` hashed, kept under `$LOCKGEN_HOME/conformance/`, one record per
(environment's real path, lock sha256): for each file its (device, inode, size, mtime_ns, ctime_ns) when it
was hashed, the sha256 it had, and its link count then. A repeated check of the same environment against the same lock
takes
the sha256 of a file whose fingerprint is unchanged without reading it (git's index); any change of inode,
size or mtime, of ctime with the link count as it was (an edit that put the mtime back moves it), or another lock,
means it is read again. What is kept is what a file held, never a verdict: the check compares every sha256 with the
lock's package manifests each time. `check --lock --full` reads every file.

Beside it, a passing check keeps its whole verdict (`<key>.verdict.json`): the fingerprint of the tree it
saw (`stat_walk.tree_fingerprint`, taken before it hashed anything; its digest and the stamps of its files' link
counts and ctimes) and the report it gave, keyed by
the same pair and by what else decides the verdict (the platform asked for, this machine, the prefix the
launchers must name, the foreign files allowed, the manifests bundle, lockgen's version); the drift check
of a lockgen environment against its own record (`check --prefix`, a repeated materialize) keeps one
too, with no lock (its record is a file of the tree). A repeated check whose stat walk gives
the same digest, and stamps where every ctime that moved moved with its file's link count (`stat_walk.links_moved`:
another environment sharing the files was made or removed), is that verdict; any other walk means the per-file
fingerprints above decide what is read again, by the same rule (a file's link count is kept beside its ctime). Only a
clean report of a settled tree is kept, so a record can only repeat a pass of
exactly those files; an unreadable or inconsistent record (not a regular file, nested past any record lockgen
writes) counts as none, and one that cannot be written (a home lockgen cannot write, a folder where the record
goes) is not kept: either costs the next check its hashing, never its verdict.

Stat trust has an end: beside them, `<key>.read.json` keeps when a check last read every byte of the environment
(for a lock, or for the drift check, key ""). Once that is `LOCKGEN_STAT_TRUST_S` seconds ago (default a day; 0:
never trusted), no verdict and no fingerprint stands: the next check reads every byte and starts the window again.
A stat check cannot see a write through a writable mapping opened before the check (it keeps size, mtime, ctime and
inode); this bounds how long such an edit can pass (docs/reference/security-model.md)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from lockgen import __version__
from lockgen.adapters import user_files
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.adapters.proof.stat_digest import DEFAULT_TRUST_S, TRUST_ENV, trust_window_s
from lockgen.adapters.proof.stat_walk import TreeFingerprint, links_moved
from lockgen.core import nesting
from lockgen.core.env.stat_rules import ctime_stands
from lockgen.errors import UserError

__all__ = ["DEFAULT_TRUST_S", "TRUST_ENV", "trust_window_s"]  # the stat trust window's, read here too

VERDICT_LAYOUT = (
    2  # 1 kept every file's ctime in the walk's digest: removing an environment sharing its files threw it away
)
Proofs = dict[str, list]  # prefix-relative path -> [device, inode, size, mtime_ns, ctime_ns, sha256, link count]


def _record(prefix: Path, lock_sha256: str) -> Path:
    key = hashlib.sha256(f"{os.path.realpath(prefix)}\0{lock_sha256}".encode()).hexdigest()
    return lockgen_home() / "conformance" / f"{key}.json"


def load(prefix: Path, lock_sha256: str) -> Proofs:
    """The fingerprints kept for this environment and lock (none when there are none, or they are unreadable)."""
    try:
        kept = nesting.loads(user_files.read_bytes(_record(prefix, lock_sha256)))
    except (OSError, ValueError):
        return {}
    files = kept.get("files") if isinstance(kept, dict) and kept.get("prefix") == os.path.realpath(prefix) else None
    return files if isinstance(files, dict) else {}


def save(prefix: Path, lock_sha256: str, proofs: Proofs) -> None:
    """Keeps the fingerprints of this check (a home lockgen cannot write leaves the next check to hash again)."""
    path = _record(prefix, lock_sha256)
    text = json.dumps({"prefix": os.path.realpath(prefix), "lock_sha256": lock_sha256, "files": proofs}, sort_keys=True)
    _kept(path, text.encode())


def _kept(path: Path, data: bytes) -> None:
    """Writes a record, atomically; one that cannot be written (a home lockgen cannot write: an OSError; a folder
    where the record goes: write_bytes_atomic's UserError) is not kept, and the next check does the work again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except (OSError, UserError):
        return


@contextmanager
def saving(prefix: Path, lock_sha256: str, proofs: Proofs) -> Iterator[None]:
    """Keeps the fingerprints (`save`) from a child process while the caller's block runs on (the JSON of 60,000
    files takes about 0.3 s), waited for at the block's end; in this process where no child could do it."""
    from lockgen.adapters.parallel import Forked  # threads and futures: not for a command that only reads a verdict

    with Forked(partial(_saved, prefix, lock_sha256, proofs)) as child:
        yield
        if child.result() is None:
            save(prefix, lock_sha256, proofs)


def _saved(prefix: Path, lock_sha256: str, proofs: Proofs) -> str:
    save(prefix, lock_sha256, proofs)
    return "saved"


def _verdict_record(prefix: Path, lock_sha256: str, context: list[str]) -> Path:
    key = hashlib.sha256("\0".join([os.path.realpath(prefix), lock_sha256, *context]).encode()).hexdigest()
    return lockgen_home() / "conformance" / f"{key}.verdict.json"


def load_verdict(prefix: Path, lock_sha256: str, context: list[str]) -> dict | None:
    """The verdict kept for this environment, lock and context: {"tree", "stamps", "paths", "checked", "verdict"},
    or None (none kept, unreadable, or made for something else)."""
    try:
        kept = nesting.loads(user_files.read_bytes(_verdict_record(prefix, lock_sha256, context)))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or [
        kept.get("layout"),
        kept.get("prefix"),
        kept.get("lock_sha256"),
        kept.get("context"),
    ] != [VERDICT_LAYOUT, os.path.realpath(prefix), lock_sha256, context]:
        return None
    return (
        kept
        if isinstance(kept.get("tree"), str)
        and isinstance(kept.get("stamps"), dict)
        and isinstance(kept.get("verdict"), dict)
        else None
    )


def save_verdict(
    prefix: Path, lock_sha256: str, context: list[str], tree: TreeFingerprint, verdict: dict, checked: str | None = None
) -> None:
    """Keeps a passing verdict of the walk `tree` (atomically; a home lockgen cannot write leaves the next check to
    do the work); `checked`: when the check that found it was made (default now)."""
    record = {
        "layout": VERDICT_LAYOUT,
        "prefix": os.path.realpath(prefix),
        "lock_sha256": lock_sha256,
        "context": context,
        "tree": tree.digest,
        "stamps": tree.stamps,
        "paths": tree.paths,
        "checked": checked or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "verdict": verdict,
    }
    _kept(_verdict_record(prefix, lock_sha256, context), json.dumps(record, sort_keys=True).encode())


def standing(kept: dict, tree: TreeFingerprint) -> int | None:
    """Whether the verdict `kept` (by `load_verdict`) stands for the walk `tree`: None when not (the digest differs,
    or a ctime moved with its file's link count as it was), else how many files' ctime moved with their link count
    only. Those are kept anew by the caller once the tree is settled (`renew`, or the drift check's own record), so
    that a later edit that puts size and mtime back is compared with the link counts of now."""
    return links_moved(kept["stamps"], tree.stamps) if tree.digest == kept["tree"] else None


def renew(prefix: Path, lock_sha256: str, context: list[str], kept: dict, tree: TreeFingerprint) -> None:
    """Keeps anew, without reading a file, the ctime and link count of the files whose ctime moved only with their
    link count (`standing`), in the verdict `kept` and in the per-file fingerprints of this environment and lock:
    `tree` is a settled walk that kept its paths (`keep_walk`), of the same digest. When the verdict was found stays."""
    proofs = load(prefix, lock_sha256) if tree.walked is not None else {}
    renewed = 0
    for relative, proof in proofs.items():
        info = tree.walked.get(relative) if tree.walked is not None else None
        if (
            info is None
            or not isinstance(proof, list)
            or len(proof) < 6
            or proof[:4] != [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]
            or proof[4] == info.st_ctime_ns
        ):
            continue
        if ctime_stands(
            proof[6] if len(proof) > 6 and type(proof[6]) is int else None, info.st_nlink, proof[4], info.st_ctime_ns
        ):
            proof[4:] = [info.st_ctime_ns, proof[5], info.st_nlink]
            renewed += 1
    if renewed:
        save(prefix, lock_sha256, proofs)
    save_verdict(prefix, lock_sha256, context, tree, kept["verdict"], str(kept.get("checked") or "") or None)


def drift_verdict(prefix: Path) -> dict | None:
    """The verdict a clean drift check of this lockgen environment (no lock: its record is a file of the tree)
    kept: its walk, and what it kept of the environment's record beside it under "verdict" (its lock, platform,
    digest: fields of a file of that very walk, so they stand while the walk does); None when none is kept, or the
    stat trust window ended (`byte_trust`). `standing` says whether it stands for a walk now."""
    return load_verdict(prefix, "", DRIFT_CONTEXT) if not byte_trust(prefix, "").expired else None


DRIFT_CONTEXT = ["drift", __version__]


def drop_verdict(prefix: Path, lock_sha256: str, context: list[str]) -> None:
    """Forgets the verdict (a check that did not pass, or saw a tree still changing)."""
    try:
        _verdict_record(prefix, lock_sha256, context).unlink(missing_ok=True)
    except OSError:
        return


@dataclass(frozen=True)
class ByteTrust:
    """When a check last read every byte of an environment (epoch seconds, None: never, or not known here), the
    time of this look, and whether what that read kept may still stand for reading (`trust_window_s`)."""

    read: float | None
    now: float
    expired: bool


def drift_records(prefix: Path) -> tuple[Path, Path]:
    """The files the drift check of this lockgen environment keeps: its verdict, and when it last read every byte."""
    return _verdict_record(prefix, "", DRIFT_CONTEXT), _read_record(prefix, "")


def _read_record(prefix: Path, lock_sha256: str) -> Path:
    key = hashlib.sha256(f"{os.path.realpath(prefix)}\0{lock_sha256}".encode()).hexdigest()
    return lockgen_home() / "conformance" / f"{key}.read.json"


def byte_trust(prefix: Path, lock_sha256: str) -> ByteTrust:
    """How far the fingerprints and verdict kept for this environment and lock (`""`: its drift check) may be
    trusted now: expired when no check read every byte within the window (or the clock went back past it)."""
    window, now = trust_window_s(), time.time()
    try:
        kept = json.loads(_read_record(prefix, lock_sha256).read_bytes())
    except (OSError, ValueError, RecursionError):
        kept = None
    value = (
        kept.get("read")
        if isinstance(kept, dict)
        and [kept.get("prefix"), kept.get("lock_sha256")] == [os.path.realpath(prefix), lock_sha256]
        else None
    )
    read = (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )
    return ByteTrust(read, now, read is None or not read <= now < read + window)


def every_byte_read(prefix: Path, lock_sha256: str, when: float) -> None:
    """Keeps that a check which began at `when` read every byte of this environment (and kept what it read)."""
    record = {"prefix": os.path.realpath(prefix), "lock_sha256": lock_sha256, "read": when}
    _kept(_read_record(prefix, lock_sha256), json.dumps(record, sort_keys=True).encode())


def shown_time(when: float) -> str:
    """A time as the records and the CLI show it: UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
