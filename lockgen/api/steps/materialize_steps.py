"""A step below the use cases that need a lock's environment on disk (materialize, run): the prefix holding
exactly the lock's packages, at the prefix asked for or the store's content-addressed one, built once by
`shared_steps.materialize_into` (atomic, hash-checked, one build at a time per path) and found again unchanged on
every later call, which builds nothing; also the platform of a lock to work on and the store's prefix for it. An
environment found at its prefix costs one stat walk, against the drift check's kept clean verdict, which holds
what its record says (lock, platform, digest; at a `--prefix`, the lock's bytes, read once by the use case, are only
hashed; the store's prefix is named from the lock; the folders an interrupted build of it left are swept all the
same); the build steps are imported only when that does not hold (a build, or a tree that moved: `recorded_drift`
then looks file by file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import conformance_store, file_guard, home, stat_walk
from lockgen.core.confined import child
from lockgen.core.platforms import choose_platform

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter
    from lockgen.model.inputs import LockBytes
    from lockgen.model.lock import LoadedLock, Lock


def lock_platform(lock: Lock, wanted: str | None) -> str:
    """The platform of `lock` to work on: `wanted`, else this host's."""
    return choose_platform(lock.metadata.platforms, wanted, home.native_platform(), home.machine())


def default_prefix(lock_digest: str, name: str) -> Path:
    """Where the store keeps the environment of a lock (its digest) for a target and platform (`name`)."""
    return child(home.store_envs(), f"{lock_digest[:16]}-{name}", "an environment's folder name")


def materialized(
    lock: LockBytes | LoadedLock, platform: str | None, prefix: Path | None, progress: Callable[[str], None], meter: Meter | None = None, allow_md5: bool = False, verify: bool = False
) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`). `lock`: as the use case
    read it, once; its bytes are parsed here only when the entries are needed (the store's prefix, a build)."""
    if prefix is None:  # the store's prefix for it is named from the lock
        lock = _parsed(lock)
        prefix = _store_prefix(lock, platform)
    final = prefix.absolute()
    if not verify:
        digest = _found_unchanged(final, lock.sha256, platform)
        if digest is not None:
            file_guard.sweep_dead_builds(final.parent, final.name)  # what an interrupted build of it left
            progress(f"{final} is already materialized (unchanged since it was made)")
            return final, digest
    from lockgen.api.steps.shared_steps import materialize_into

    loaded = _parsed(lock)
    return final, materialize_into(loaded, lock_platform(loaded.lock, platform), final, progress, meter, allow_md5, verify)


def _parsed(lock: LockBytes | LoadedLock) -> LoadedLock:
    from lockgen.adapters.lockfile_yaml import parsed

    return parsed(lock)


def _store_prefix(loaded: LoadedLock, platform: str | None) -> Path:
    """The store's prefix for the lock's environment on the platform chosen (refused when the lock lacks it)."""
    from lockgen.core.lock_builder import LockgenMeta
    from lockgen.core.stack_layout import target_of_lock

    chosen = lock_platform(loaded.lock, platform)
    return default_prefix(loaded.sha256, f"{LockgenMeta(loaded.lock).target or target_of_lock(Path(loaded.source))}-{chosen}")


def _found_unchanged(final: Path, lock_sha256: str, platform: str | None) -> str | None:
    """The environment digest of the lock's environment at `final` when a clean drift check of it kept its
    verdict with its record naming this lock's bytes and the platform asked for (this host's by default), and
    the tree's stat walk is the one that check saw (the record is a file of that walk: not read again); None
    for anything else, which the full path decides (and words, when it is an error)."""
    kept = conformance_store.drift_verdict(final)
    if kept is None:
        return None
    tree, record = kept
    if record.get("lock_sha256") != lock_sha256 or record.get("platform") != (platform or home.native_platform()) or not isinstance(record.get("environment_digest"), str):
        return None
    try:
        walked = stat_walk.tree_fingerprint(final).digest
    except OSError:  # gone (its verdict outlives it), or unreadable: the full path says which
        return None
    return str(record["environment_digest"]) if walked == tree else None
