"""Use case `lockgen materialize`: a lock becomes an environment (content-addressed, atomic,
hash-checked, one at a time per target path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.adapters.lockfile_yaml import read_lock
from lockgen.api.shared_steps import Meter, default_prefix, lock_platform, materialize_into
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.stack_layout import target_of_lock


def materialize(lock_path: Path, platform: str | None, prefix: Path | None,
                progress: Callable[[str], None], meter: Meter | None = None, allow_md5: bool = False,
                verify: bool = False) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`)."""
    loaded = read_lock(lock_path)
    chosen = lock_platform(loaded.lock, platform)
    name = f"{LockgenMeta(loaded.lock).target or target_of_lock(lock_path)}-{chosen}"
    final = (prefix or default_prefix(loaded.sha256, name)).absolute()
    return final, materialize_into(loaded, chosen, final, progress, meter, allow_md5, verify)
