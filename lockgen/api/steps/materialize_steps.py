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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import home
from lockgen.adapters.lock import kept_inputs
from lockgen.adapters.proof import conformance_store, stat_walk
from lockgen.adapters.store import file_guard
from lockgen.core.env.confined import child
from lockgen.core.stack.platforms import choose_platform
from lockgen.errors import LockgenError
from lockgen.model.inputs import LockBytes

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter
    from lockgen.model.lock import LoadedLock, Lock


def lock_platform(lock: Lock, wanted: str | None) -> str:
    """The platform of `lock` to work on: `wanted`, else this host's."""
    return choose_platform(lock.metadata.platforms, wanted, home.native_platform(), home.machine())


def default_prefix(lock_digest: str, name: str) -> Path:
    """Where the store keeps the environment of a lock (its digest) for a target and platform (`name`)."""
    return child(home.store_envs(), f"{lock_digest[:16]}-{name}", "an environment's folder name")


def materialized(
    lock: LockBytes | LoadedLock,
    platform: str | None,
    prefix: Path | None,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    allow_md5: bool = False,
    verify: bool = False,
) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`). `lock`: as the use case
    read it, once; its bytes are parsed here only when the entries are needed (the store's prefix, a build)."""
    if prefix is None:  # the store's prefix for it is named from the lock: its bytes' kept facts, else its entries
        kept = kept_inputs.kept_lock(lock.sha256)
        if kept is None:
            lock = _parsed(lock)
            prefix = _store_prefix(lock, platform)
        else:
            prefix = store_prefix(lock.sha256, kept.target, kept.platforms, lock.source, platform, kept.editable)
    final = prefix.absolute()
    if not verify:
        digest = unchanged(final, lock.sha256, platform, progress)
        if digest is not None:
            return final, digest
    from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable
    from lockgen.api.steps.shared_steps import materialize_into

    # the environment is built beside the prefix and renamed onto it: its folder must take new files, found
    # before anything is fetched (named as given, never the build's temporary folder)
    check_writable(final.with_name(f".{final.name}.lock"), f"--prefix {final}", WRITABLE_HINT)
    loaded = _parsed(lock)
    return final, materialize_into(
        loaded, lock_platform(loaded.lock, platform), final, progress, meter, allow_md5, verify
    )


@dataclass(frozen=True)
class Made:
    """A lock's environment found made and unchanged from what is kept: the prefix, the environment's digest, the
    target the lock records ("" when none), and whether the lock holds an editable local package (its kept facts)."""

    prefix: Path
    digest: str
    target: str
    editable: bool


def kept_made(
    lock: LockBytes, platform: str | None, prefix: Path | None, progress: Callable[[str], None]
) -> Made | None:
    """The environment of `lock` (its bytes, read once by the use case), at `prefix` (default: the store's, named
    from the lock's kept facts), when it is found made and unchanged (said, as `materialized` says it) without
    parsing the lock: its bytes' checked value kept (`kept_inputs`). None, with nothing said, for anything else
    (none kept, a platform the lock lacks, no environment or one changed), which `materialized` decides."""
    kept = kept_inputs.kept_lock(lock.sha256)
    if kept is None:
        return None
    try:
        final = (
            prefix or store_prefix(lock.sha256, kept.target, kept.platforms, lock.source, platform, kept.editable)
        ).absolute()
    except LockgenError:
        return None
    digest = unchanged(final, lock.sha256, platform, progress)
    return None if digest is None else Made(final, digest, kept.target, kept.editable)


def _parsed(lock: LockBytes | LoadedLock) -> LoadedLock:
    """The lock's entries: the value the models accepted for its bytes when it is kept (`kept_inputs`: the YAML,
    its field rules and the lockgen keys are not read again, as the fast path trusts them), else its bytes parsed."""
    from lockgen.model.lock import LoadedLock, lock_from_document

    if isinstance(lock, LoadedLock):
        return lock
    value = kept_inputs.kept_lock_value(lock.sha256)
    if value is not None:
        try:
            entries = lock_from_document(value)
        except (KeyError, TypeError, AttributeError):  # a kept value not of the records' shape: parsed again
            pass
        else:
            return LoadedLock(source=lock.source, data=lock.data, sha256=lock.sha256, lock=entries)
    from lockgen.adapters.lock.lockfile_yaml import parsed

    return parsed(lock)


def _store_prefix(loaded: LoadedLock, platform: str | None) -> Path:
    from lockgen.core.lock.lock_builder import LockgenMeta, has_editable

    meta = LockgenMeta(loaded.lock)
    return store_prefix(
        loaded.sha256,
        meta.target,
        loaded.lock.metadata.platforms,
        loaded.source,
        platform,
        has_editable(loaded.lock.package),
    )


def store_prefix(
    lock_sha256: str, target: str, platforms: tuple[str, ...], source: str, platform: str | None, editable: bool = False
) -> Path:
    """The store's prefix for the environment of the lock whose bytes' sha256 is `lock_sha256` (its recorded
    `target`, else the one its file `source` is named for) on the platform chosen of its `platforms` (refused
    when it lacks it). A lock with an `editable` local package gets one environment per folder of its file: the
    environment reads the package where that folder's stack keeps it, so two checkouts of the same lock bytes
    must not share one."""
    import hashlib

    from lockgen.core.stack.stack_layout import target_of_lock

    chosen = choose_platform(platforms, platform, home.native_platform(), home.machine())
    if editable:
        folder = str(Path(source).absolute().parent).encode("utf-8", "surrogateescape")
        lock_sha256 = hashlib.sha256(lock_sha256.encode() + b"\0" + folder).hexdigest()
    return default_prefix(lock_sha256, f"{target or target_of_lock(Path(source))}-{chosen}")


def unchanged(final: Path, lock_sha256: str, platform: str | None, progress: Callable[[str], None]) -> str | None:
    """The environment digest of the lock's environment at `final` when it is found made and unchanged (saying
    so, and sweeping what an interrupted build of it left); None, with nothing said or done, otherwise."""
    found = found_unchanged(final, lock_sha256, platform)
    if found is None:
        return None
    file_guard.sweep_dead_builds(final.parent, final.name)  # what an interrupted build of it left
    progress(found_line(final))
    return found.environment_digest


def found_line(final: Path) -> str:
    """What a command says of an environment it found made and unchanged."""
    return f"{final} is already materialized (unchanged since it was made)"


@dataclass(frozen=True)
class Unchanged:
    """A lock's environment found unchanged by its kept drift verdict: its environment digest, the stat walk of
    now, and how many files' ctime moved with their link count only since the verdict (`conformance_store.standing`)."""

    environment_digest: str
    walk: stat_walk.TreeFingerprint
    links_moved: int


def found_unchanged(final: Path, lock_sha256: str, platform: str | None) -> Unchanged | None:
    """The environment digest of the lock's environment at `final`, its stat walk, and how many files' ctime moved
    with their link count only since the verdict, when a clean drift check of it
    kept its verdict with its record naming this lock's bytes and the platform asked for (this host's by
    default), and the tree's stat walk is the one that check saw (the record is a file of that walk: not read
    again); None for anything else, which the full path decides (and words, when it is an error)."""
    kept = conformance_store.drift_verdict(final)
    if kept is None:
        return None
    record = kept["verdict"]
    if (
        record.get("lock_sha256") != lock_sha256
        or record.get("platform") != (platform or home.native_platform())
        or not isinstance(record.get("environment_digest"), str)
    ):
        return None
    try:
        walked = stat_walk.tree_fingerprint(final)
    except OSError:  # gone (its verdict outlives it), or unreadable: the full path says which
        return None
    linked = conformance_store.standing(kept, walked)
    # where link counts moved in a settled tree, the drift check keeps them anew (the full path, reading no file)
    return (
        Unchanged(str(record["environment_digest"]), walked, linked)
        if linked == 0 or (linked and not walked.settled)
        else None
    )
