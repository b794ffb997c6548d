"""Use case `lockgen materialize`: a lock becomes an environment (content-addressed, atomic,
hash-checked, one at a time per target path: `materialize_steps`, which `lockgen run` shares; an environment
found unchanged costs a stat walk, and nothing that builds is imported for it). The lock is read once, here: its
bytes, parsed by the step only when it builds or names the store's prefix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters.lock import kept_inputs, lock_file
from lockgen.api.steps.kept_run_steps import keep_run
from lockgen.api.steps.materialize_steps import kept_made, materialized
from lockgen.errors import LockgenError

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter
    from lockgen.model.inputs import LockBytes


def materialize(
    lock_path: Path,
    platform: str | None,
    prefix: Path | None,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    allow_md5: bool = False,
    verify: bool = False,
) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`)."""
    return materialized(lock_file.read(lock_path), platform, prefix, progress, meter, allow_md5, verify)


def kept_lock(lock_path: Path) -> LockBytes | None:
    """The bytes of the lock file when the value the models accepted for them is kept (`kept_inputs`), for
    `materialize_kept`; None, having said nothing, otherwise (an unreadable lock too)."""
    try:
        read = lock_file.read(lock_path)
    except LockgenError:
        return None
    return read if kept_inputs.kept_lock_value(read.sha256) is not None else None


def materialize_kept(
    lock: LockBytes, platform: str | None, prefix: Path | None, progress: Callable[[str], None], meter: Meter
) -> tuple[Path, str]:
    """`materialize` of a lock whose checked value is kept (`kept_lock`), without `--allow-md5` or `--verify`: the
    build takes that value (`materialize_steps.materialized`), every proof of the build the same."""
    return materialized(lock, platform, prefix, progress, meter)


def kept_materialized(
    lock_path: Path, platform: str | None, prefix: Path | None, progress: Callable[[str], None]
) -> tuple[Path, str] | None:
    """`materialize`'s answer when the lock's environment is found made and unchanged from what is kept, without
    parsing the lock (`materialize_steps.kept_made`); None, having said nothing, otherwise (an unreadable lock too)."""
    try:
        read = lock_file.read(lock_path)
    except LockgenError:
        return None
    made = kept_made(read, platform, prefix, progress)
    if made is None:
        return None
    keep_run(read, platform, prefix, made)  # the next `materialize` (or `run`) of it stands on its record
    return made.prefix, made.digest
