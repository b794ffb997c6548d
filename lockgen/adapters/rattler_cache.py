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
manifest. A folder that fails is removed, and extracted again from the verified archive.

A folder rattler does not have yet is extracted here, by rattler's own extractor (tar-rs: the reader that would
have made it), into a staging folder of the cache, and judged before it takes the name rattler links from
(rattler links from a folder it finds under that name): what landed must be exactly what the archive's
paths.json, as lockgen read it, states (each file a regular file with its stated hash and size, each link a
link to its stated target that stays inside the folder, nothing else but folders and `info/`). The scan and the
header rule make the two readings agree; this is what holds if a difference between them hides elsewhere. A
folder that fails is removed and the package refused, naming the member, before anything is linked."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lockgen.adapters import file_guard
from lockgen.adapters.archive_safety import stays_inside
from lockgen.core.confined import file_name
from lockgen.digests import file_digest
from lockgen.errors import LockFormatError
from lockgen.model.lock import LockedPackage
from lockgen.model.manifests import ManifestFile, PackageManifest
from lockgen.model.names import shown

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


def _landed_entry(path: str, info: os.stat_result, stated: ManifestFile | None, links: dict[str, str]) -> str | None:
    """Why one extracted path (not under `info/`) is not what paths.json states, or None."""
    if stat.S_ISDIR(info.st_mode):  # a folder above stated paths, or an empty one (a `directory` entry has no hash)
        return f"`{shown(path)}` is a folder where paths.json states a file" if stated is not None and stated.sha256 else None
    if stated is None:
        return f"`{shown(path)}` landed, and paths.json does not state it"
    if stated.kind == "link":
        if not stat.S_ISLNK(info.st_mode):
            return f"`{shown(path)}` is not the link paths.json states"
        target = links[path]
        if stated.target is not None and target != stated.target:
            return f"link `{shown(path)}` -> `{shown(target)}`, where the archive as lockgen read it says `{shown(stated.target)}`"
        if target.startswith("/") or not stays_inside(os.path.join(os.path.dirname(path), target), links):
            return f"link `{shown(path)}` -> `{shown(target)}` points outside the package"
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"`{shown(path)}` is not the regular file paths.json states"
    if stated.size is not None and info.st_size != stated.size:
        return f"`{shown(path)}` is {info.st_size} bytes, where paths.json states {stated.size}"
    return None


def landed_problems(folder: Path, manifest: PackageManifest) -> list[str]:
    """What an extracted package folder holds that its paths.json (`manifest`) does not state, or lacks: every
    path is lstat'ed (no link is followed), every stated file hashed."""
    stated = {f.path: f for f in manifest.files}
    landed: dict[str, os.stat_result] = {}
    for top, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(top, name)
            landed[os.path.relpath(path, folder)] = os.lstat(path)
    links = {path: os.readlink(folder / path) for path, info in landed.items() if stat.S_ISLNK(info.st_mode)}
    problems = []
    for path, info in sorted(landed.items()):
        if path == "info" or path.startswith("info/"):  # the package's metadata, never linked into a prefix
            if stat.S_ISLNK(info.st_mode) and (links[path].startswith("/") or not stays_inside(os.path.join(os.path.dirname(path), links[path]), links)):
                problems.append(f"link `{shown(path)}` -> `{shown(links[path])}` points outside the package")
            elif not (stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                problems.append(f"`{shown(path)}` is neither a file, a link nor a folder")
            continue
        problem = _landed_entry(path, info, stated.get(path), links)
        if problem is None and stated.get(path) is not None and stated[path].kind == "file" and stated[path].sha256 and stat.S_ISREG(info.st_mode):
            if _sha256(folder / path) != stated[path].sha256:
                problem = f"`{shown(path)}` does not have the sha256 paths.json states"
        if problem:
            problems.append(problem)
    problems += [f"`{shown(path)}` is stated by paths.json and did not land" for path in sorted(stated.keys() - landed.keys())]
    return problems


def _extract_judged(cache: Path, package: LockedPackage, manifest: PackageManifest, archive: Path) -> None:
    """Extracts `archive` with rattler's extractor into a staging folder of `cache`, judges what landed and
    renames it to the folder rattler links from; a package whose folder fails is refused (nothing renamed)."""
    import rattler.package_streaming

    folder = cache / _folder_name(package)
    staging = cache / f".extracting-{folder.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        rattler.package_streaming.extract(str(archive), str(staging))  # type: ignore[arg-type]  # its stub says PathLike; it takes str only
        problems = landed_problems(staging, manifest)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise LockFormatError(
                f"`{package.name}` {package.version} ({shown(package.url)}) is refused: as rattler extracted it, {problems[0]}{more}",
                "the archive reads differently to rattler than to lockgen's scan (malformed or crafted): nothing was linked into any environment",
            )
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def verify_extracted(cache: Path, packages: Sequence[tuple[LockedPackage, PackageManifest]], progress: Callable[[str], None], archives: Sequence[Path] | None = None) -> None:
    """Checks every extracted folder the install will link from (a changed one is removed, to be extracted
    again); with `archives` (one per package), each folder not there (or just removed) is extracted from its
    archive and judged (`landed_problems`) before the install links from it."""
    with ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1))) as pool:
        intact = list(pool.map(lambda item: _verify_one(cache, *item), packages))
        purged = [f"{p.name} {p.version}" for (p, _), ok in zip(packages, intact) if ok is False]
        if purged:
            progress(f"the package cache held changed files of {', '.join(purged)}: extracting them again")
        if archives is not None:
            missing = [(package, manifest, archive) for (package, manifest), archive, ok in zip(packages, archives, intact) if not ok]
            list(pool.map(lambda item: _extract_judged(cache, *item), missing))  # the first refusal is raised


def stamp(cache: Path, packages: Sequence[tuple[LockedPackage, PackageManifest]]) -> None:
    """Stamps the folders an install just linked from: each was checked before it (`verify_extracted`) or
    extracted by it from an archive lockgen verified."""
    for package, manifest in packages:
        folder = cache / _folder_name(package)
        if folder.is_dir():
            _write_stamp(cache / STAMPS / f"{folder.name}.json", manifest, _signatures(folder, manifest))
