"""rattler's package cache (`$LOCKGEN_HOME/rattler-cache/<name>-<version>-<build>/`), checked before each
install: rattler links environments from the extracted folders it keeps there and never re-reads the
archive, so a file changed in the cache (or in an environment, since hard links share the cache's
inode) would reach every later environment. Each extracted file must have the hash its verified
archive's `paths.json` states; after each install every folder it used is made read-only (no write bit on its
files: a stray write through an environment's link is refused) and stamped with each file's fingerprint
(device, inode, size, mtime_ns, mode; with the link count and ctime seen beside them) and sha256, so the next
install re-hashes only what changed since. A hard link made or removed moves an inode's ctime and its link
count, and is no edit: the ctime is compared only where the link count is the recorded one, where a moved
ctime is an edit even with the size and mtime put back. The stamps catch accidents (an edit through an
environment's hard link); what a stat cannot see, and someone who can write the cache and its stamps, is for
the scrubs that read every byte: `lockgen store verify` (against the stamps' sha256) and `lockgen check --lock
--full` (against the archive's manifest). A folder that fails is moved into the quarantine (`store_scrub`),
the environments sharing its changed files named, and it is extracted again from the verified archive (below).

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

from lockgen.adapters.proof import store_scrub
from lockgen.adapters.store import file_guard
from lockgen.adapters.archive_safety import stays_inside
from lockgen.core.env.confined import file_name
from lockgen.digests import file_digest
from lockgen.errors import LockFormatError
from lockgen.model.lock import LockedPackage
from lockgen.model.manifests import ManifestFile, PackageManifest
from lockgen.model.names import shown
from lockgen.model.results import DamagedStoreFolder
from lockgen.core.env.stat_rules import ctime_stands

STAMPS = ".lockgen-verified"
STAMP_LAYOUT = (
    2  # 1 kept ctime among the fields that must match, and no sha256: every environment removed threw the stamps away
)
WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def _folder_name(package: LockedPackage) -> str:
    return file_name(f"{package.name}-{package.version}-{package.build or ''}", "a conda package's cache folder")


def _signature(path: str) -> list[int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode, info.st_nlink, info.st_ctime_ns]


def _unchanged(kept: object, now: list[int] | None) -> bool:
    """Whether a file's stamp still holds: the same five fields, and the same ctime where the link count is the one
    recorded (a link made or removed moves both)."""
    return (
        isinstance(kept, list)
        and now is not None
        and len(kept) == len(now)
        and kept[:5] == now[:5]
        and ctime_stands(kept[5], now[5], kept[6], now[6])
    )


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
    digests = {f.path: f.sha256 for f in manifest.files if f.path in signatures}
    partial.write_text(
        json.dumps({"layout": STAMP_LAYOUT, "archive": manifest.sha256, "files": signatures, "sha256": digests})
    )
    os.replace(partial, stamp_path)


def _signatures(folder: Path, manifest: PackageManifest) -> dict[str, list[int] | None]:
    top = str(folder)
    return {f.path: _signature(os.path.join(top, f.path)) for f in manifest.files if f.kind == "file" and f.sha256}


def _seal(folder: Path, manifest: PackageManifest) -> None:
    """Takes the write bits off the folder's regular files (the environment's hard links share the mode)."""
    for f in manifest.files:
        if f.kind == "file" and f.sha256:
            path = os.path.join(str(folder), f.path)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_mode & WRITE_BITS:
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~WRITE_BITS)


def _verify_one(cache: Path, package: LockedPackage, manifest: PackageManifest) -> DamagedStoreFolder | bool | None:
    """Whether the extracted folder of `package` is intact; None when there is none yet. A folder that is not
    intact is moved into the quarantine, and returned as damaged (the environments sharing its changed files named)."""
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
    kept = (
        stamp.get("files")
        if isinstance(stamp, dict) and stamp.get("layout") == STAMP_LAYOUT and stamp.get("archive") == manifest.sha256
        else None
    )
    if (
        isinstance(kept, dict)
        and kept.keys() == signatures.keys()
        and all(_unchanged(kept[path], now) for path, now in signatures.items())
    ):
        return True
    changed = [f.path for f in files if _sha256(folder / f.path) != f.sha256]
    if not changed:
        return True  # stamped after the install
    inodes = {(signature[0], signature[1]) for path in changed if (signature := signatures.get(path)) is not None}
    environments = store_scrub.sharing("conda", inodes, changed)
    stamp_path.unlink(missing_ok=True)
    return DamagedStoreFolder(
        "conda", folder, tuple(changed), store_scrub.quarantine(folder, "conda"), tuple(environments)
    )


def _landed_entry(path: str, info: os.stat_result, stated: ManifestFile | None, links: dict[str, str]) -> str | None:
    """Why one extracted path (not under `info/`) is not what paths.json states, or None."""
    if stat.S_ISDIR(info.st_mode):  # a folder above stated paths, or an empty one (a `directory` entry has no hash)
        return (
            f"`{shown(path)}` is a folder where paths.json states a file"
            if stated is not None and stated.sha256
            else None
        )
    if stated is None:
        return f"`{shown(path)}` landed, and paths.json does not state it"
    if stated.kind == "link":
        if not stat.S_ISLNK(info.st_mode):
            return f"`{shown(path)}` is not the link paths.json states"
        target = links[path]
        if stated.target is not None and target != stated.target:
            return (
                f"link `{shown(path)}` -> `{shown(target)}`, where the archive as lockgen read it says "
                f"`{shown(stated.target)}`"
            )
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
            if stat.S_ISLNK(info.st_mode) and (
                links[path].startswith("/") or not stays_inside(os.path.join(os.path.dirname(path), links[path]), links)
            ):
                problems.append(f"link `{shown(path)}` -> `{shown(links[path])}` points outside the package")
            elif not (stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                problems.append(f"`{shown(path)}` is neither a file, a link nor a folder")
            continue
        problem = _landed_entry(path, info, stated.get(path), links)
        if (
            problem is None
            and stated.get(path) is not None
            and stated[path].kind == "file"
            and stated[path].sha256
            and stat.S_ISREG(info.st_mode)
        ):
            if _sha256(folder / path) != stated[path].sha256:
                problem = f"`{shown(path)}` does not have the sha256 paths.json states"
        if problem:
            problems.append(problem)
    problems += [
        f"`{shown(path)}` is stated by paths.json and did not land" for path in sorted(stated.keys() - landed.keys())
    ]
    return problems


def _extract_judged(cache: Path, package: LockedPackage, manifest: PackageManifest, archive: Path) -> None:
    """Extracts `archive` with rattler's extractor into a staging folder of `cache`, judges what landed and
    renames it to the folder rattler links from; a package whose folder fails is refused (nothing renamed)."""
    import rattler.package_streaming

    folder = cache / _folder_name(package)
    staging = cache / f".extracting-{folder.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        # its stub says PathLike; it takes str only
        rattler.package_streaming.extract(str(archive), str(staging))  # type: ignore[arg-type]
        problems = landed_problems(staging, manifest)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise LockFormatError(
                f"`{package.name}` {package.version} ({shown(package.url)}) is refused: as rattler extracted it, "
                f"{problems[0]}{more}",
                "the archive reads differently to rattler than to lockgen's scan (malformed or crafted): nothing "
                "was linked into any environment",
            )
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def verify_extracted(
    cache: Path,
    packages: Sequence[tuple[LockedPackage, PackageManifest]],
    progress: Callable[[str], None],
    archives: Sequence[Path] | None = None,
) -> None:
    """Checks every extracted folder the install will link from (a changed one is moved into the quarantine, to be
    extracted again; the environments that share its changed files are named with the command that makes each
    again); with `archives` (one per package), each folder not there (or just moved out) is extracted from its
    archive and judged (`landed_problems`) before the install links from it."""
    with ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1))) as pool:
        intact = list(pool.map(lambda item: _verify_one(cache, *item), packages))
        damaged = [(p, found) for (p, _), found in zip(packages, intact) if isinstance(found, DamagedStoreFolder)]
        if damaged:
            names = ", ".join(f"{shown(p.name)} {shown(p.version)}" for p, _ in damaged)
            moved = ", ".join(shown(str(found.quarantined), 400) for _, found in damaged)
            progress(f"the package cache held changed files of {names}: moved to {moved}; extracting them again")
            for _, found in damaged:
                for environment in found.environments:
                    progress(
                        f"{shown(str(environment.prefix), 400)} shares the changed files; make it again: "
                        f"{shown(environment.repair, 800)}"
                    )
        if archives is not None:
            missing = [
                (package, manifest, archive)
                for (package, manifest), archive, found in zip(packages, archives, intact)
                if found is not True
            ]
            list(pool.map(lambda item: _extract_judged(cache, *item), missing))  # the first refusal is raised


def stamped_folders(cache: Path) -> list[tuple[Path, dict[str, str]]]:
    """Every extracted folder with a stamp that keeps sha256s: the folder and each stamped file (folder-relative)
    with the sha256 it was checked to have. A stamp naming a path outside its folder is left out."""
    found = []
    for stamp_path in sorted((cache / STAMPS).glob("*.json")):
        try:
            stamp = json.loads(stamp_path.read_text())
        except (OSError, ValueError):
            continue
        digests = stamp.get("sha256") if isinstance(stamp, dict) and stamp.get("layout") == STAMP_LAYOUT else None
        folder = cache / stamp_path.name.removesuffix(".json")
        if (
            isinstance(digests, dict)
            and folder.is_dir()
            and all(
                isinstance(v, str) and all(part not in ("", ".", "..") for part in k.split("/"))
                for k, v in digests.items()
            )
        ):
            found.append((folder, digests))
    return found


def forget(folder: Path) -> None:
    """Drops the stamp of an extracted folder (it was moved out of the cache)."""
    (folder.parent / STAMPS / f"{folder.name}.json").unlink(missing_ok=True)


def stamp(cache: Path, packages: Sequence[tuple[LockedPackage, PackageManifest]]) -> None:
    """Stamps the folders an install just linked from: each was checked before it (`verify_extracted`) or
    extracted by it from an archive lockgen verified."""
    for package, manifest in packages:
        folder = cache / _folder_name(package)
        if folder.is_dir():
            _seal(folder, manifest)
            _write_stamp(cache / STAMPS / f"{folder.name}.json", manifest, _signatures(folder, manifest))
