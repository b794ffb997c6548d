"""rattler's package cache (`$LOCKGEN_HOME/rattler-cache/<name>-<version>-<build>/`), checked before each
install: rattler links environments from the extracted folders it keeps there and never re-reads the
archive, so a file changed in the cache (or in an environment, since hard links share the cache's
inode) would reach every later environment. Each extracted file must have the hash its verified
archive's `paths.json` states; after each install every folder it used is stamped with each file's
fingerprint (device, inode, size, mtime_ns, ctime_ns), so the next install re-hashes only what changed
since. ctime is what an edit cannot put back (one with its mtime restored still moves it); every hard link
made or removed moves it too, which is why the stamps are written again after each install, under one lock
with the check before it (`held`), and why a folder whose environment was deleted is re-hashed once. The
stamps catch accidents (an edit through an environment's hard link); someone who can write the cache can
also write its stamps, which is why `lockgen check --lock --full` hashes every file against the archive's
manifest. A folder that fails is removed, and rattler extracts it again from the verified archive."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lockgen.adapters import file_guard
from lockgen.core.confined import file_name
from lockgen.digests import file_digest
from lockgen.model.lock import LockedPackage
from lockgen.model.manifests import PackageManifest

STAMPS = ".lockgen-verified"


def _folder_name(package: LockedPackage) -> str:
    return file_name(f"{package.name}-{package.version}-{package.build or ''}", "a conda package's cache folder")


def _signature(path: str) -> list[int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


@contextlib.contextmanager
def held(cache: Path) -> Iterator[None]:
    """The cache held for one install: checked (`verify_extracted`) before rattler links, stamped after."""
    cache.mkdir(parents=True, exist_ok=True)
    with file_guard.held(cache / ".lockgen-install.lock"):
        yield


def _sha256(path: Path) -> str | None:
    try:
        return file_digest(path, follow=False)
    except OSError:  # gone, or no longer a regular file: not intact
        return None


def _write_stamp(stamp_path: Path, manifest: PackageManifest, signatures: dict[str, list[int] | None]) -> None:
    stamp_path.parent.mkdir(exist_ok=True)
    partial = stamp_path.with_name(f"{stamp_path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps({"archive": manifest.sha256, "files": signatures}))
    os.replace(partial, stamp_path)


def _signatures(folder: Path, manifest: PackageManifest) -> dict[str, list[int] | None]:
    top = str(folder)
    return {f.path: _signature(os.path.join(top, f.path)) for f in manifest.files if f.kind == "file" and f.sha256}


def _verify_one(cache: Path, package: LockedPackage, manifest: PackageManifest) -> bool | None:
    """Whether the extracted folder of `package` is intact; None when there is none yet. A folder that is
    not intact is removed."""
    folder = cache / _folder_name(package)
    if not folder.is_dir():
        return None
    stamp_path = cache / STAMPS / f"{folder.name}.json"
    files = [f for f in manifest.files if f.kind == "file" and f.sha256]
    signatures = _signatures(folder, manifest)
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        stamp = {}
    if stamp.get("archive") == manifest.sha256 and stamp.get("files") == signatures:
        return True
    if all(_sha256(folder / f.path) == f.sha256 for f in files):
        return True  # stamped after the install (its links move every ctime)
    shutil.rmtree(folder, ignore_errors=True)
    stamp_path.unlink(missing_ok=True)
    return False


def verify_extracted(cache: Path, packages: Sequence[tuple[LockedPackage, PackageManifest]], progress: Callable[[str], None]) -> None:
    """Checks every extracted folder the install will link from (a changed one is removed, to be extracted
    again)."""
    with ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1))) as pool:
        intact = list(pool.map(lambda item: _verify_one(cache, *item), packages))
    purged = [f"{p.name} {p.version}" for (p, _), ok in zip(packages, intact) if ok is False]
    if purged:
        progress(f"the package cache held changed files of {', '.join(purged)}: extracting them again")


def stamp(cache: Path, packages: Sequence[tuple[LockedPackage, PackageManifest]]) -> None:
    """Stamps the folders an install just linked from: each was checked before it (`verify_extracted`) or
    extracted by it from an archive lockgen verified."""
    for package, manifest in packages:
        folder = cache / _folder_name(package)
        if folder.is_dir():
            _write_stamp(cache / STAMPS / f"{folder.name}.json", manifest, _signatures(folder, manifest))
