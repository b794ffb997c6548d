"""Fingerprints of the files `check --lock` hashed, kept under `$LOCKGEN_HOME/conformance/`, one record per
(environment's real path, lock sha256): for each file its (device, inode, size, mtime_ns, ctime_ns) when it
was hashed, and the sha256 it had. A repeated check of the same environment against the same lock takes
the sha256 of a file whose fingerprint is unchanged without reading it (git's index); any change of inode,
size, mtime or ctime (which an edit moves even when it puts the mtime back), or another lock, means it is
read again. What is kept is what a file held, never a verdict: the check compares every sha256 with the
lock's package manifests each time. `check --lock --full` reads every file."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home

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
