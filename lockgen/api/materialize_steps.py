"""A step below the use cases that need a lock's environment on disk (materialize, run): the prefix holding
exactly the lock's packages, built once (content-addressed, atomic, hash-checked, one build at a time per
path), and found again unchanged on every later call, which builds nothing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from lockgen.adapters import env_manifest, file_guard
from lockgen.api.shared_steps import Meter, build_environment, default_prefix, lock_platform, recorded_drift
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.stack_layout import target_of_lock
from lockgen.errors import UserError
from lockgen.model.lock import LoadedLock


def materialized(loaded: LoadedLock, lock_path: Path, platform: str | None, prefix: Path | None,
                 progress: Callable[[str], None], meter: Meter | None = None, allow_md5: bool = False,
                 verify: bool = False) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest (`allow_md5`: install
    conda entries the lock pins by md5 alone; `verify`: hash every installed wheel file, trusting no store
    fingerprint; an existing environment of the lock is then checked with `--full`)."""
    lock, lock_digest = loaded.lock, loaded.sha256
    chosen = lock_platform(lock, platform)
    name = f"{LockgenMeta(lock).target or target_of_lock(lock_path)}-{chosen}"
    final = (prefix or default_prefix(lock_digest, name)).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    with file_guard.held(final.parent / f".{final.name}.lock"):  # two runs of one lock make one environment
        _sweep(final.parent, final.name)
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
        temp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        try:
            digest = build_environment(lock, lock_digest, chosen, temp, final, progress, meter, allow_md5=allow_md5,
                                       verify=verify)
            os.rename(temp, final)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    return final, digest


def _sweep(folder: Path, name: str) -> None:
    """Removes temporary folders of interrupted runs (their process is gone)."""
    for leftover in folder.glob(f".{name}.tmp-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(leftover, ignore_errors=True)
