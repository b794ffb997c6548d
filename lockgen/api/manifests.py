"""Use case `lockgen manifests`: the manifests of every package of a lock (wheel RECORDs read by range
requests, conda paths.json from the verified archives) as one bundle file, written on a connected
machine for `check --manifests` and `verify --manifests` on one without network."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable
from lockgen.adapters.proof import manifest_store
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.steps.manifest_steps import bundle_of


def write_manifests(lock_path: Path, out: Path, progress: Callable[[str], None], known: Path | None = None) -> int:
    """Writes the bundle; returns how many manifests it holds. `known`: a bundle whose manifests are taken as
    they are (check-only entries have no other source: the bundle `pin` wrote of them)."""
    check_writable(out, f"--out {out}", WRITABLE_HINT, file=True)  # before any manifest is read or fetched
    lock = load_lock(lock_path)
    progress(f"reading the manifests of {len(lock.package)} packages")
    found = bundle_of(lock, manifest_store.read_bundle(known) if known is not None else {})
    manifest_store.write_bundle(out, found)
    return len({m.sha256 for m in found})
