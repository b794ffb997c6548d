"""Use cases over lockgen's store: its environments (`$LOCKGEN_HOME/envs`), listed (`lockgen envs`) and removed
where no lock refers to them (`lockgen gc`); and the files environments link from (its uv cache and rattler cache),
read again byte by byte against their proofs and, with `--repair`, a damaged folder moved out to be fetched again
(`lockgen store verify`).

gc refuses a root that names no lock (a misspelt folder would otherwise keep nothing and remove every
environment). One gc runs at a time, under a flock guard in the store (`file_guard.held`), so a
`.NAME.tmp-gc` folder found while holding it belongs to a gc that was killed mid-delete: it is swept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from lockgen.adapters import home
from lockgen.adapters.conda import rattler_cache
from lockgen.adapters.lock import lock_file
from lockgen.adapters.proof import store_scrub
from lockgen.adapters.pypi import wheel_store
from lockgen.adapters.store import env_manifest, file_guard
from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.core.stack.stack_layout import LOCK_SUFFIX
from lockgen.errors import UserError
from lockgen.model.inputs import LockBytes
from lockgen.model.lock import LoadedLock
from lockgen.model.results import DamagedStoreFolder, StoreEntry, StoreScrub

TRASH_SUFFIX = ".tmp-gc"
GUARD = ".gc.lock"


def list_envs() -> list[StoreEntry]:
    """Every environment in the store, by name. A symbolic link there is none: lockgen never makes one, and gc
    would otherwise follow it to a folder elsewhere (it stopped on one, leaving its set-aside link behind)."""
    root = home.store_envs()
    entries = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if (
            not path.is_symlink()
            and path.is_dir()
            and not path.name.startswith(".")
            and (path / env_manifest.MANIFEST).is_file()
        ):
            try:
                manifest, _ = env_manifest.read(path)
            except UserError:  # a damaged record: an environment no lock can name, which gc removes
                entries.append(StoreEntry(path, "", "damaged", ""))
                continue
            entries.append(
                StoreEntry(
                    path,
                    str(manifest.get("lock_sha256", "")),
                    str(manifest.get("environment_digest", "")),
                    str(manifest.get("platform", "")),
                )
            )
    return entries


def gc(roots: list[Path], dry_run: bool) -> list[Path]:
    """Removes store environments no lock under `roots` refers to (by the lock file's sha256), and the
    leftovers of interrupted gc runs; with `dry_run`, only returns what would be removed."""
    wanted = {lock.sha256 for lock in _locks_named(roots)}
    store = home.store_envs()
    if not store.is_dir():
        return []
    if dry_run:
        return sorted(store.glob(f".*{TRASH_SUFFIX}")) + [e.path for e in list_envs() if e.lock_sha256 not in wanted]
    with file_guard.held(store / GUARD):
        removed = [file_guard.delete_set_aside(leftover) for leftover in sorted(store.glob(f".*{TRASH_SUFFIX}"))]
        for entry in list_envs():
            if entry.lock_sha256 not in wanted:
                trash = entry.path.parent / f".{entry.path.name}{TRASH_SUFFIX}"
                file_guard.set_aside(entry.path, trash)
                removed.append(file_guard.delete_set_aside(trash, entry.path))
    return removed


def _locks_named(roots: list[Path]) -> list[LockBytes | LoadedLock]:
    """The lock files the roots name, each read once: a root that is missing, a folder holding no lock, or a file
    that is not a lock (parsed, so a LockFormatError names it) is refused, so a typo never keeps nothing."""
    locks: list[LockBytes | LoadedLock] = []
    for root in roots:
        if root.is_file():
            locks.append(read_lock(root))
        elif root.is_dir():
            found = sorted(root.rglob(f"*{LOCK_SUFFIX}"))
            if not found:
                raise UserError(
                    f"gc: `{root}` holds no *{LOCK_SUFFIX}, so it names no environment to keep",
                    "pass the locks (or their folders) whose environments stay; nothing was removed",
                )
            locks.extend(lock_file.read(path) for path in found)
        else:
            raise UserError(
                f"gc: `{root}` does not exist",
                "check the spelling: every argument must be a lock or a folder of locks whose environments stay; "
                "nothing was removed",
            )
    return locks


def verify_store(repair: bool) -> StoreScrub:
    """Every file of lockgen's store that a proof keeps (a wheel's proven files in uv's cache, a conda package's
    stamped files in rattler's) read again and compared with the sha256 it was proven to have; with `repair`, each
    damaged folder is moved into the quarantine and its proof dropped, so the next materialize fetches it again
    against its locked hash. The environments that link a damaged file are named either way."""
    with wheel_store.held():  # no install links from the store meanwhile
        proofs = list(wheel_store.proven_folders())
        wheels = {folder: wheel for wheel, folder, _ in proofs}

        def forget_wheel(folder: Path) -> None:
            wheel_store.forget(wheels[folder])
            wheel_store.drop_entries(folder)

        files, damaged = _scrubbed("wheel", [(folder, proven) for _, folder, proven in proofs], forget_wheel, repair)
    cache = home.lockgen_home() / "rattler-cache"
    with rattler_cache.held(cache):
        conda_files, conda_damaged = _scrubbed(
            "conda", rattler_cache.stamped_folders(cache), rattler_cache.forget, repair
        )
    return StoreScrub(files + conda_files, tuple(damaged + conda_damaged))


def _scrubbed(
    kind: Literal["wheel", "conda"],
    folders: list[tuple[Path, dict[str, str]]],
    forget: Callable[[Path], None],
    repair: bool,
) -> tuple[int, list[DamagedStoreFolder]]:
    """The files read and the damaged folders among `folders` (each with the sha256 its files were proven to
    have) of the store's `kind` part; with `repair`, each damaged one moved into the quarantine and `forget`."""
    files, damaged = 0, []
    for folder, proven in folders:
        files += len(proven)
        changed, inodes = store_scrub.damaged_files(folder, proven)
        if changed:
            environments = tuple(store_scrub.sharing(kind, inodes, changed))
            moved = store_scrub.quarantine(folder, kind) if repair else None
            if repair:
                forget(folder)
            damaged.append(DamagedStoreFolder(kind, folder, tuple(changed), moved, environments))
    return files, damaged
