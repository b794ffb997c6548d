"""A step below the use cases that need a lock's environment on disk (materialize, run): the prefix holding
exactly the lock's packages, at the prefix asked for or the store's content-addressed one, built once by
`shared_steps.materialize_into` (atomic, hash-checked, one build at a time per path) and found again unchanged on
every later call, which builds nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.api.shared_steps import Meter, default_prefix, lock_platform, materialize_into
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.stack_layout import target_of_lock
from lockgen.model.lock import LoadedLock


def materialized(loaded: LoadedLock, lock_path: Path, platform: str | None, prefix: Path | None,
                 progress: Callable[[str], None], meter: Meter | None = None, allow_md5: bool = False,
                 verify: bool = False) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`)."""
    chosen = lock_platform(loaded.lock, platform)
    name = f"{LockgenMeta(loaded.lock).target or target_of_lock(lock_path)}-{chosen}"
    final = (prefix or default_prefix(loaded.sha256, name)).absolute()
    return final, materialize_into(loaded, chosen, final, progress, meter, allow_md5, verify)
