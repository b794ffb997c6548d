"""The entries the conda-side formats (an @EXPLICIT file, conda-lock.yml, pixi.lock) share: a conda archive's
subdir, name, version and build from its URL, and a pip package of such a lock as a lockgen entry, a wheel without
a hash to be pinned from the indexes that may list it, or why it cannot be one.
"""

from __future__ import annotations

import re

from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.core.pypi.wheel_names import parse_wheel_filename, wheel_file_name
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.names import shown

_SDIST = re.compile(r"\.(tar\.gz|zip|tar\.bz2)$")


def split_conda_file(url: str) -> tuple[str, str, str, str]:
    """(subdir, name, version, build) from a conda package URL."""
    parts = url.rstrip("/").split("/")
    file_name = parts[-1].split("#")[0]
    stem = re.sub(r"\.(conda|tar\.bz2)$", "", file_name)
    pieces = stem.rsplit("-", 2)
    if len(parts) < 2 or len(pieces) != 3:
        raise LockFormatError(
            f"`{shown(url)}` does not name a conda archive (subdir/name-version-build.conda)",
            "each conda entry's URL ends in its archive's file name",
        )
    return parts[-2], pieces[0], pieces[1], pieces[2]


def pip_entry(
    name: str,
    version: str | None,
    url: str,
    hashes: PackageHash,
    platform: str,
    indexes: tuple[str, ...],
    dependencies: dict[str, str] | None = None,
    category: str = "main",
    optional: bool = False,
    unindexed: str = "",
) -> LockedPackage | UnhashedWheel | str:
    """A pip package of a conda-side lock as a lockgen entry (its version from the wheel's name when the line
    gives none); a wheel the lock gives no hash for, with the `indexes` that may list it (none for a direct URL;
    `unindexed`: why none, where that is not the reason), for the import to pin it from there or refuse it; or
    why it cannot be one (an sdist is built on install)."""
    file_name = wheel_file_name(url)
    label = f"{platform}: `{name}` {version or ''}".rstrip()
    try:
        wheel = parse_wheel_filename(file_name)
    except UserError:
        what = "an sdist (it would be built on install)" if _SDIST.search(file_name) else "no wheel"
        return f"{label} is {what}: {shown(file_name)}; lockgen locks wheels only"
    package = LockedPackage(
        name=name,
        version=version or wheel.version,
        manager="pip",
        platform=platform,
        url=url,
        hash=hashes,
        dependencies=dependencies or {},
        category=category,
        optional=optional,
    )
    if hashes.sha256 or hashes.md5:
        return package
    first, *later = indexes or ("",)
    if unindexed:
        return UnhashedWheel(platform, name, package.version, url, first, tuple(later), package, unindexed)
    return UnhashedWheel(platform, name, package.version, url, first, tuple(later), package)


def folder_of(url: str) -> tuple[str, ...]:
    """Where conda-lock's pip wheel without a hash may be listed: conda-lock names no index, and one that serves
    no hashes (PyPI always does) is in practice PyTorch's, whose wheels lie beside their project pages
    (download.pytorch.org/whl/cu121/torch-....whl, listed by download.pytorch.org/whl/cu121/torch/)."""
    return (url.rsplit("/", 1)[0],) if "/" in url else ()


def sort_into(
    found: LockedPackage | UnhashedWheel | str,
    packages: list[LockedPackage],
    skipped: list[str],
    unhashed: list[UnhashedWheel],
) -> None:
    """An entry converted into lockgen's, kept; a wheel without a hash, kept to be pinned from its index; or why
    it cannot be one, kept to be named."""
    if isinstance(found, LockedPackage):
        packages.append(found)
    elif isinstance(found, UnhashedWheel):
        unhashed.append(found)
    else:
        skipped.append(found)
