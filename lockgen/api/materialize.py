"""Use case `lockgen materialize`: a lock becomes an environment (content-addressed, atomic,
hash-checked, one at a time per target path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.adapters import env_manifest, file_guard
from lockgen.adapters.lockfile_yaml import read_lock
from lockgen.api.shared_steps import Meter, build_environment, default_prefix, lock_platform, recorded_drift
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.stack_layout import target_of_lock
from lockgen.errors import UserError


def materialize(lock_path: Path, platform: str | None, prefix: Path | None,
                progress: Callable[[str], None], meter: Meter | None = None, allow_md5: bool = False,
                verify: bool = False) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`)."""
    loaded = read_lock(lock_path)
    lock, lock_digest = loaded.lock, loaded.sha256
    chosen = lock_platform(lock, platform)
    name = f"{LockgenMeta(lock).target or target_of_lock(lock_path)}-{chosen}"
    final = (prefix or default_prefix(lock_digest, name)).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    with file_guard.held(final.parent / f".{final.name}.lock"):  # two runs of one lock make one environment
        file_guard.sweep_dead_builds(final.parent, final.name)
        if (final / env_manifest.MANIFEST).is_file():
            manifest, _ = env_manifest.read(final)
            if manifest.get("lock_sha256") == lock_digest:
                drift = recorded_drift(final, full=verify)
                if not drift.clean:
                    changed = (drift.modified + drift.missing + drift.extra + drift.unsafe)[0]
                    raise UserError(f"{final} holds this lock's environment but changed since it was made "
                                    f"({len(drift.modified)} modified, {len(drift.missing)} missing, "
                                    f"{len(drift.extra)} extra, {len(drift.unsafe)} with unsafe modes; first {changed})",
                                    "remove it and materialize again, or pass another --prefix")
                progress(f"{final} is already materialized (unchanged since it was made)")
                return final, manifest["environment_digest"]
            raise UserError(f"{final} holds another lock's environment", "choose another --prefix or remove it")
        if final.exists():
            raise UserError(f"{final} exists and is not a lockgen environment", "choose another --prefix")
        with file_guard.built_beside(final) as temp:
            digest = build_environment(lock, lock_digest, chosen, temp, final, progress, meter, allow_md5=allow_md5,
                                       verify=verify)
    return final, digest
