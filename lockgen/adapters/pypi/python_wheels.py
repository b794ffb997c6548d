"""What a Linux installer of CPython would take from a universal Python lock (uv.lock, pylock.toml): the
Python the import is judged for, the marker environment of each Linux platform, and the wheel a release's
files offer for it, or why none fits.

The Python is X.Y or X.Y.Z: a lock whose requires-python is `>=3.13.14, <3.14` admits `--python 3.13.14`
and `--python 3.13` (judged as 3.13.14, the oldest patch release it admits), and markers see that full
version. Wheels are chosen by the compatibility-tag order of `core.pypi.wheel_names.best_for_target` (plain
`linux_<arch>` wheels, as PyTorch's +cpu index and release pages publish, included); a release whose only
fitting wheel needs a newer glibc than the one asked for is named with that glibc and the flag admitting it.
A chosen wheel the lock gives no sha256 for is returned as data (`UnhashedWheel`), with the index it came from,
for the import to look its hash up there or refuse it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from lockgen.core.pypi.wheel_names import best_for_target, wheel_file_name
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash, pip_wheel
from lockgen.model.names import MACHINE_OF_PLATFORM as MACHINE

PLATFORMS = ("linux-64", "linux-aarch64")
PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))
_PYTHON = re.compile(r"3\.(\d{1,2})(\.\d{1,3})?")
_NEWEST_GLIBC = 99


@dataclass(frozen=True)
class Python:
    """The CPython an import is judged for: `minor` (X.Y, wheel tags and the lock) and `full` (X.Y.Z, markers)."""

    minor: str
    full: str

    @property
    def shown(self) -> str:
        """X.Y, or X.Y.Z where the patch release is not the first."""
        return self.minor if self.full == f"{self.minor}.0" else self.full


def python_within(requires: str, wanted: str | None) -> Python:
    """`--python` (X.Y or X.Y.Z), which must lie inside the lock's `requires-python`; else the oldest X.Y inside
    it. An X.Y stands for its oldest patch release the range admits."""
    try:
        allowed = SpecifierSet(requires)
    except InvalidSpecifier:
        raise LockFormatError(
            f"the lock's requires-python `{requires}` is not a version range", "use the file its tool wrote"
        ) from None
    inside = [Python(minor, full) for minor in PYTHONS if (full := _oldest_patch(allowed, minor))]
    hint = f"pass one of: {', '.join(p.minor for p in inside) or 'none (the range is empty)'}"
    if wanted is None:
        if not inside:
            raise UserError(f"the lock's requires-python `{requires}` admits no CPython 3.8-3.15", "pass --python X.Y")
        return inside[0]
    found = _PYTHON.fullmatch(wanted)
    minor = f"3.{found.group(1)}" if found else ""
    if found is None or minor not in PYTHONS:
        raise UserError(f"--python {wanted} is not a CPython 3.8-3.15 version (X.Y or X.Y.Z)", hint)
    full = wanted if found.group(2) else _oldest_patch(allowed, minor)
    if full is None or not allowed.contains(full):
        raise UserError(f"--python {wanted} is outside the lock's requires-python `{requires}`", hint)
    return Python(minor, full)


def checked_glibc(glibc: str) -> str:
    """`--glibc`, a glibc 2.NN (the newest manylinux_2_NN a wheel may need)."""
    if not re.fullmatch(r"2\.\d{1,2}", glibc):
        raise UserError(
            f"--glibc {glibc} is not a glibc version 2.NN", "e.g. --glibc 2.28 (manylinux_2_28) or --glibc 2.35"
        )
    return glibc


def _oldest_patch(allowed: SpecifierSet, minor: str) -> str | None:
    return next((f"{minor}.{patch}" for patch in range(100) if allowed.contains(f"{minor}.{patch}")), None)


def environment_of(platform: str, python: Python) -> dict[str, str]:
    """PEP 508's marker variables for CPython `python` on Linux `platform`."""
    return {
        "implementation_name": "cpython",
        "implementation_version": python.full,
        "os_name": "posix",
        "platform_machine": MACHINE[platform],
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": python.full,
        "python_version": python.minor,
        "sys_platform": "linux",
    }


_Wheel = TypeVar("_Wheel", bound=Mapping[str, Any])  # a lock's wheel table, as its format reads it


def best_wheel(wheels: Sequence[_Wheel], platform: str, python: Python, glibc: str) -> _Wheel | None:
    """The wheel (a table with its `url`) an installer takes on `platform` with CPython `python` and `glibc`."""
    return best_named_wheel(by_file_name(wheels), platform, python, glibc)


def by_file_name(wheels: Sequence[_Wheel]) -> dict[str, _Wheel]:
    """A release's wheels (tables with their `url`) by file name, as their URLs end, decoded, in file-name order:
    what `best_named_wheel` chooses among, made once where a release is chosen for several platforms."""
    named = {wheel_file_name(wheel["url"]): wheel for wheel in wheels}
    return {name: named[name] for name in sorted(named)}


def best_named_wheel(named: Mapping[str, _Wheel], platform: str, python: Python, glibc: str) -> _Wheel | None:
    """`best_wheel` of a release's wheels given `by_file_name`."""
    chosen = best_for_target(list(named), python.minor, MACHINE[platform], glibc)
    return named[chosen] if chosen else None


def no_wheel_reason(
    wheels: Sequence[Mapping[str, Any]], platform: str, python: Python, glibc: str, has_sdist: bool
) -> str:
    """Why no wheel of a release fits (best_wheel gave None): the glibc its wheels need, else no wheel at all."""
    names = sorted(wheel_file_name(wheel["url"]) for wheel in wheels)
    floor = int(glibc.split(".")[1])
    needed = next(
        (
            minor
            for minor in range(floor + 1, _NEWEST_GLIBC + 1)
            if best_for_target(names, python.minor, MACHINE[platform], f"2.{minor}")
        ),
        None,
    )
    if needed is not None:
        return (
            f"needs glibc 2.{needed} on {platform} (its wheel is manylinux_2_{needed}, newer than --glibc {glibc}): "
            f"pass --glibc 2.{needed} to admit it"
        )
    return f"has no wheel for {platform} at CPython {python.minor}" + (
        " (an sdist only: it would be built on install)" if has_sdist else ""
    )


@dataclass(frozen=True)
class UnhashedWheel:
    """The wheel a lock chose for a package on a platform, which the lock gives no sha256 for, and the index its
    package came from (a PEP 503/691 base URL; "" for a package from a direct URL, which no index lists).

    A lock that names no index per package gives the ones its tool would ask, in order: `index` first, then
    `later_indexes` (pixi.lock: its environment's `indexes`). `entry` is the lock's own entry where it says more
    than these fields (conda-lock's dependencies and category): pinned, it keeps them."""

    platform: str
    name: str
    version: str
    url: str
    index: str
    later_indexes: tuple[str, ...] = ()
    entry: LockedPackage | None = None
    unindexed: str = "it comes from a direct URL, which no index lists"  # why, where no index is named

    @property
    def filename(self) -> str:
        return wheel_file_name(self.url)

    @property
    def indexes(self) -> tuple[str, ...]:
        """Every index that may list it, in the order its tool asks them; none for a direct URL."""
        return tuple(index for index in (self.index, *self.later_indexes) if index)

    def locked(self, sha256: str) -> LockedPackage:
        """The lock entry, pinned by the sha256 its index lists for this very file."""
        if self.entry is not None:
            return replace(self.entry, hash=PackageHash(sha256=sha256))
        return pip_wheel(self.name, self.version, self.platform, self.url, sha256)

    def left_out(self, why: str) -> str:
        """The line naming it as left out, and why no hash was found."""
        return f"{self.platform}: `{self.name}` {self.version} has a wheel without a sha256 ({self.filename}): {why}"
