"""A step below the use cases that need a lock's environment on disk (materialize, run): the prefix holding
exactly the lock's packages, at the prefix asked for or the store's content-addressed one, built once by
`shared_steps.materialize_into` (atomic, hash-checked, one build at a time per path) and found again unchanged on
every later call, which builds nothing. An environment found at the prefix asked for costs its manifest and one
stat walk, against the drift check's kept clean verdict; the lock parser and the build steps are imported only
when that does not hold (a build, or a tree that moved: `recorded_drift` then looks file by file)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import conformance_store, home, prefix_observer
from lockgen.adapters.env_manifest import MANIFEST

if TYPE_CHECKING:
    from lockgen.api.shared_steps import Meter
    from lockgen.model.lock import LoadedLock


def materialized(lock_path: Path, platform: str | None, prefix: Path | None, progress: Callable[[str], None],
                 meter: Meter | None = None, allow_md5: bool = False, verify: bool = False,
                 loaded: LoadedLock | None = None) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`). `loaded`: the lock,
    when the caller has read it already; else it is read only if the environment is not found unchanged."""
    if prefix is not None and not verify:
        digest = _found_unchanged(prefix.absolute(), lock_path, loaded, platform)
        if digest is not None:
            progress(f"{prefix.absolute()} is already materialized (unchanged since it was made)")
            return prefix.absolute(), digest
    from lockgen.adapters.lockfile_yaml import read_lock
    from lockgen.api.shared_steps import default_prefix, lock_platform, materialize_into
    from lockgen.core.lock_builder import LockgenMeta
    from lockgen.core.stack_layout import target_of_lock

    loaded = loaded or read_lock(lock_path)
    chosen = lock_platform(loaded.lock, platform)
    name = f"{LockgenMeta(loaded.lock).target or target_of_lock(lock_path)}-{chosen}"
    final = (prefix or default_prefix(loaded.sha256, name)).absolute()
    return final, materialize_into(loaded, chosen, final, progress, meter, allow_md5, verify)


def _found_unchanged(final: Path, lock_path: Path, loaded: LoadedLock | None, platform: str | None) -> str | None:
    """The environment digest of the lock's environment at `final` when its manifest names this lock's bytes
    and the platform asked for (this host's by default) and the tree's stat walk is the one a clean drift
    check last saw; None for anything else, which the full path decides (and words, when it is an error)."""
    try:
        manifest = json.loads((final / MANIFEST).read_bytes())
        sha256 = loaded.sha256 if loaded is not None else hashlib.sha256(lock_path.read_bytes()).hexdigest()
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("lock_sha256") != sha256 \
            or manifest.get("platform") != (platform or home.native_platform()) \
            or not isinstance(manifest.get("environment_digest"), str):
        return None
    if not conformance_store.drift_kept(final, prefix_observer.tree_fingerprint(final).digest):
        return None
    return str(manifest["environment_digest"])
