"""Use case `lockgen import`: another tool's lock becomes a lockgen lock (pip and conda entries, every
platform, hashes kept), a starting point for teams that bring what they have."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.foreign_locks import read_foreign
from lockgen.adapters.lockfile_yaml import dump_lock, write_atomic
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LOCKGEN_META_FORMAT, Lock, LockChannel, LockMetadata


def import_lock(source: Path, target: str, environment: str | None = None, out: Path | None = None,
                python: str | None = None, glibc: str = "2.28") -> tuple[Path, Lock]:
    """Converts `source` and writes it to `out` (default `locks/<target>.conda-lock.yml`)."""
    imported = read_foreign(source, environment, python, glibc)
    if not imported.packages:
        raise UserError(f"`{source}` holds no package for a Linux platform lockgen locks",
                        "check --environment (pixi) or --python (uv.lock)")
    seen: dict[tuple[str, str, str], str] = {}
    for package in imported.packages:
        key = (package.platform, package.manager, package.name)
        if key in seen and seen[key] != package.version:
            raise LockFormatError(f"`{source}` holds {package.name} twice for {package.platform} "
                                  f"({seen[key]} and {package.version})", "pass --python to choose one fork (uv.lock)")
        seen[key] = package.version
    custom = {
        "lockgen.format": LOCKGEN_META_FORMAT,
        "lockgen.target": target,
        "lockgen.imported-from": source.name,
        "lockgen.imported-format": imported.format,
        "lockgen.imported-sha256": imported.sha256,
    }
    if environment:
        custom["lockgen.environment"] = environment
    if imported.skipped:
        custom["lockgen.import-skipped"] = "; ".join(imported.skipped)
    lock = Lock(
        metadata=LockMetadata(content_hash={p: imported.sha256 for p in imported.platforms},
                              channels=tuple(LockChannel(url=c) for c in imported.channels),
                              platforms=imported.platforms, sources=(source.name,), custom_metadata=custom),
        package=tuple(sorted(imported.packages, key=lambda p: p.sort_key())))
    path = out or Path("locks") / f"{target}.conda-lock.yml"
    write_atomic(path, dump_lock(lock))
    return path, lock
