"""Use cases over the store of environments (`$LOCKGEN_HOME/envs`): list them (`lockgen envs`), and
remove those no lock refers to (`lockgen gc`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lockgen.adapters import env_manifest, home
from lockgen.core.stack_layout import LOCK_SUFFIX
from lockgen.digests import file_digest
from lockgen.model.results import StoreEntry


def list_envs() -> list[StoreEntry]:
    """Every environment in the store, by name."""
    root = home.store_envs()
    entries = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and not path.name.startswith(".") and (path / env_manifest.MANIFEST).is_file():
            manifest, _ = env_manifest.read(path)
            entries.append(StoreEntry(path, manifest["lock_sha256"], manifest["environment_digest"], manifest["platform"]))
    return entries


def gc(roots: list[Path], dry_run: bool) -> list[Path]:
    """Removes store environments no lock under `roots` refers to (by the lock file's sha256)."""
    wanted = {file_digest(p) for root in roots
              for p in ([root] if root.is_file() else root.rglob(f"*{LOCK_SUFFIX}"))}
    removed = []
    for entry in list_envs():
        if entry.lock_sha256 not in wanted:
            removed.append(entry.path)
            if not dry_run:
                trash = entry.path.parent / f".{entry.path.name}.tmp-gc"
                os.rename(entry.path, trash)  # atomic: the entry disappears at once, then is deleted
                shutil.rmtree(trash)
    return removed
