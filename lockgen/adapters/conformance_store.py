"""Fingerprints of the files `check --lock` hashed, kept under `$LOCKGEN_HOME/conformance/`, one record per
(environment's real path, lock sha256): for each file its (device, inode, size, mtime_ns, ctime_ns) when it
was hashed, and the sha256 it had. A repeated check of the same environment against the same lock takes
the sha256 of a file whose fingerprint is unchanged without reading it (git's index); any change of inode,
size, mtime or ctime (which an edit moves even when it puts the mtime back), or another lock, means it is
read again. What is kept is what a file held, never a verdict: the check compares every sha256 with the
lock's package manifests each time. `check --lock --full` reads every file.

Beside it, a passing check keeps its whole verdict (`<key>.verdict.json`): the fingerprint of the tree it
saw (`stat_walk.tree_fingerprint`, taken before it hashed anything) and the report it gave, keyed by
the same pair and by what else decides the verdict (the platform asked for, this machine, the prefix the
launchers must name, the foreign files allowed, the manifests bundle, lockgen's version); the drift check
of a lockgen environment against its own record (`check --prefix`, a repeated materialize) keeps one
too, with no lock (its record is a file of the tree). A repeated check whose stat walk gives
the same fingerprint is that verdict; any other fingerprint means the per-file fingerprints above decide
what is read again. Only a clean report of a settled tree is kept, so a record can only repeat a pass of
exactly those files; an unreadable or inconsistent record counts as none."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from lockgen import __version__
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home

VERDICT_LAYOUT = 1
Proofs = dict[str, list]  # prefix-relative path -> [device, inode, size, mtime_ns, ctime_ns, sha256]


def _record(prefix: Path, lock_sha256: str) -> Path:
    key = hashlib.sha256(f"{os.path.realpath(prefix)}\0{lock_sha256}".encode()).hexdigest()
    return lockgen_home() / "conformance" / f"{key}.json"


def load(prefix: Path, lock_sha256: str) -> Proofs:
    """The fingerprints kept for this environment and lock (none when there are none, or they are unreadable)."""
    try:
        kept = json.loads(_record(prefix, lock_sha256).read_text())
    except (OSError, ValueError):
        return {}
    files = kept.get("files") if isinstance(kept, dict) and kept.get("prefix") == os.path.realpath(prefix) else None
    return files if isinstance(files, dict) else {}


def save(prefix: Path, lock_sha256: str, proofs: Proofs) -> None:
    """Keeps the fingerprints of this check (a home lockgen cannot write leaves the next check to hash again)."""
    path = _record(prefix, lock_sha256)
    text = json.dumps({"prefix": os.path.realpath(prefix), "lock_sha256": lock_sha256, "files": proofs}, sort_keys=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, text.encode())
    except OSError:
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
    """The verdict kept for this environment, lock and context: {"tree", "paths", "checked", "verdict"},
    or None (none kept, unreadable, or made for something else)."""
    try:
        kept = json.loads(_verdict_record(prefix, lock_sha256, context).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or [kept.get("layout"), kept.get("prefix"), kept.get("lock_sha256"), kept.get("context")] != [VERDICT_LAYOUT, os.path.realpath(prefix), lock_sha256, context]:
        return None
    return kept if isinstance(kept.get("tree"), str) and isinstance(kept.get("verdict"), dict) else None


def save_verdict(prefix: Path, lock_sha256: str, context: list[str], tree: str, paths: int, verdict: dict) -> None:
    """Keeps a passing verdict (atomically; a home lockgen cannot write leaves the next check to do the work)."""
    record = {
        "layout": VERDICT_LAYOUT,
        "prefix": os.path.realpath(prefix),
        "lock_sha256": lock_sha256,
        "context": context,
        "tree": tree,
        "paths": paths,
        "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "verdict": verdict,
    }
    try:
        write_bytes_atomic(_verdict_record(prefix, lock_sha256, context), json.dumps(record, sort_keys=True).encode())
    except OSError:
        return


def drift_kept(prefix: Path, tree: str) -> bool:
    """Whether the drift check of this lockgen environment (no lock: its record is a file of the tree) kept a
    clean verdict of exactly this stat walk (`tree`), by this lockgen."""
    kept = load_verdict(prefix, "", DRIFT_CONTEXT)
    return kept is not None and kept["tree"] == tree


def drift_verdict(prefix: Path) -> tuple[str, dict] | None:
    """The stat walk (its digest) a clean drift check of this lockgen environment kept, and what that check
    kept of the environment's record beside it (its lock, platform, digest: fields of a file of that very walk,
    so they stand while the walk does); None when none is kept."""
    kept = load_verdict(prefix, "", DRIFT_CONTEXT)
    return (kept["tree"], kept["verdict"]) if kept is not None else None


DRIFT_CONTEXT = ["drift", __version__]


def drop_verdict(prefix: Path, lock_sha256: str, context: list[str]) -> None:
    """Forgets the verdict (a check that did not pass, or saw a tree still changing)."""
    try:
        _verdict_record(prefix, lock_sha256, context).unlink(missing_ok=True)
    except OSError:
        return
