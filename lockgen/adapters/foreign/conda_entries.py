"""The entries the conda-side formats (an @EXPLICIT file, conda-lock.yml, pixi.lock) share: a conda archive's
subdir, name, version and build from its URL, and a pip package of such a lock as a lockgen entry, or why it
cannot be one.
"""

from __future__ import annotations

import re

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
    dependencies: dict[str, str] | None = None,
    category: str = "main",
    optional: bool = False,
) -> LockedPackage | str:
    """A pip package of a conda-side lock as a lockgen entry (its version from the wheel's name when the line
    gives none), or why it cannot be one: not a wheel (an sdist is built on install), or no hash."""
    file_name = wheel_file_name(url)
    label = f"{platform}: `{name}` {version or ''}".rstrip()
    try:
        wheel = parse_wheel_filename(file_name)
    except UserError:
        what = "an sdist (it would be built on install)" if _SDIST.search(file_name) else "no wheel"
        return f"{label} is {what}: {shown(file_name)}; lockgen locks wheels only"
    if not (hashes.sha256 or hashes.md5):
        return f"{label} has no hash in the file ({shown(file_name)}): lockgen pins every archive by its hash"
    return LockedPackage(
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


def sort_into(found: LockedPackage | str, packages: list[LockedPackage], skipped: list[str]) -> None:
    """An entry converted into lockgen's, kept; or why it cannot be one, kept to be named."""
    if isinstance(found, LockedPackage):
        packages.append(found)
    else:
        skipped.append(found)
