"""PEP 751 `pylock.toml` read for lockgen's Linux platforms: the packages whose markers hold for the
platform, the CPython version and the chosen extras and dependency groups, each with the wheel that fits
(its sha256 kept). What cannot come over is listed with its reason (no wheel for the platform, an sdist,
a VCS, directory or archive source); a chosen wheel without a sha256 is returned as data, with the package's
`index`, for the import to find its hash there or refuse it. Recognised by its name (`pylock.*.toml`) or its
content (`lock-version` and `[[packages]]`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Set as AbstractSet
from typing import TypedDict, cast

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from lockgen.adapters.pypi.python_wheels import (
    PLATFORMS,
    UnhashedWheel,
    best_wheel,
    checked_glibc,
    environment_of,
    no_wheel_reason,
    python_within,
)
from lockgen.adapters.foreign.document_shape import TEXT, TOML, check_shape
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.names import shown
from lockgen.model.requests import ImportOptions


# a PEP 751 file by its content, whatever its name: each at a line's start (`starts_a_line`)
_PEP751 = re.compile(r"lock-version\s*=")
_PACKAGES = re.compile(r"\[\[packages\]\]")

# The parts of a pylock.toml read here (PEP 751's names), held to their TOML types by `_checked` before they are
# read: a file that breaks them is refused naming the key and what belongs there.
PylockWheel = TypedDict("PylockWheel", {"url": str, "hashes": dict[str, str]}, total=False)
PylockPackage = TypedDict(
    "PylockPackage",
    {
        "name": str,
        "version": str,
        "marker": str,
        "requires-python": str,
        "index": str,
        "wheels": list[PylockWheel],
        "sdist": dict[str, object],
        "vcs": dict[str, str],
        "directory": dict[str, str],
        "archive": dict[str, object],
    },
    total=False,
)
PylockDocument = TypedDict(
    "PylockDocument",
    {
        "lock-version": str,
        "requires-python": str,
        "environments": list[str],
        "extras": list[str],
        "dependency-groups": list[str],
        "default-groups": list[str],
        "packages": list[PylockPackage],
    },
    total=False,
)


class PylockToml:
    """A PEP 751 pylock.toml as a `ForeignFormat`."""

    name = "pylock.toml"
    described = "pylock.toml (PEP 751)"
    producer = "its installer"
    takes = frozenset({"python", "extras", "all_extras", "groups", "dev", "glibc", "allow_partial"})
    refuses: tuple[str, ...] = (
        "a package with no wheel for the platform",
        "a wheel that needs a newer glibc",
        "an sdist",
        "a VCS, directory or archive source",
    )

    def recognises(self, file: ForeignFile) -> bool:
        named = file.path.name.startswith("pylock.") and file.path.suffix == ".toml"
        found = (any(starts_a_line(pattern, piece) for piece in file.pieces) for pattern in (_PEP751, _PACKAGES))
        return named or all(found)  # a line's start is a piece's or follows a line end in it: no line is cut

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        return _read_pylock(_checked(tomllib.loads(file.text)), options, file.sha256)


def starts_a_line(pattern: re.Pattern[str], text: str) -> bool:
    """Whether `pattern` matches in `text` where a line starts, as `^` does under `re.M` (at the text's start or after
    a line end): found by its leading text, then its place judged. A pattern led by `^` was tried at every position,
    0.33 s CPU for a 100k-package uv.lock (70 MB), which every import of one tried first. (Each pattern here cannot
    match overlapping itself, so no match at a line's start is passed over.)"""
    return any(found.start() == 0 or text[found.start() - 1] == "\n" for found in pattern.finditer(text))


_REWRITE = "it was edited or cut short: use the file its installer wrote"


_TEXTS = TOML.array_of(TEXT)
_SOURCE = TOML.table_of(
    {"type": TEXT, "url": TEXT, "path": TEXT}
)  # a VCS's or a directory's, as a skipped line names it
_WHEEL = TOML.table_of({"url": TEXT, "hashes": TOML.table_of(each=TEXT)})
_PACKAGE = TOML.table_of(
    {
        "name": TEXT,
        "version": TEXT,
        "marker": TEXT,
        "requires-python": TEXT,
        "index": TEXT,
        "wheels": TOML.array_of(_WHEEL),
        "sdist": TOML.table_of(),
        "vcs": _SOURCE,
        "directory": _SOURCE,
        "archive": TOML.table_of(),
    },
    required=("name",),
)
_DOCUMENT = TOML.table_of(
    {
        "lock-version": TEXT,
        "requires-python": TEXT,
        "environments": _TEXTS,
        "extras": _TEXTS,
        "dependency-groups": _TEXTS,
        "default-groups": _TEXTS,
        "packages": TOML.array_of(_PACKAGE),
    }
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _checked(data: dict[str, object]) -> PylockDocument:
    """`data` as a pylock document, once every key read here has its TOML type (PEP 751's): else the key, by its
    place in the file, and what belongs there. Keys not read here are not judged."""
    check_shape(data, _DOCUMENT, "pylock.toml", _REWRITE, TOML)
    for index, package in enumerate(cast(list[dict[str, object]], data.get("packages", []))):
        for number, wheel in enumerate(cast(list[dict[str, object]], package.get("wheels", []))):
            sha256 = cast(dict[str, str], wheel.get("hashes", {})).get("sha256")
            if sha256 is not None and not _SHA256.fullmatch(sha256):
                raise LockFormatError(
                    f"the pylock.toml's `packages[{index}].wheels[{number}].hashes.sha256` is `{shown(sha256)}`, "
                    "not a sha256 (64 lowercase hex digits)",
                    _REWRITE,
                )
    return cast(PylockDocument, data)


def _read_pylock(data: PylockDocument, choices: ImportOptions, digest: str) -> Imported:
    """The packages for lockgen's platforms, what could not come over, the CPython X.Y chosen and the chosen
    wheels without a sha256, of the file whose bytes have the sha256 `digest`."""
    version = str(data.get("lock-version", ""))
    if not version.startswith("1."):
        raise LockFormatError(
            f"pylock.toml lock-version {TOML.value_of(version)} is not supported",
            "lockgen reads lock-version 1.x (PEP 751)",
        )
    glibc = checked_glibc(choices.glibc)
    python = python_within(str(data.get("requires-python", "")), choices.python)
    known_extras, known_groups = set(data.get("extras", [])), set(data.get("dependency-groups", []))
    for kind, chosen, known in (
        ("extra", set(choices.extras), known_extras),
        ("dependency group", set(choices.groups), known_groups),
    ):
        if chosen - known:
            raise UserError(
                f"the pylock.toml has no {kind} {', '.join(sorted(chosen - known))}",
                f"it has: {', '.join(sorted(known)) or 'none'}",
            )
    extras = known_extras if choices.all_extras else set(choices.extras)
    groups = set(choices.groups) | (set(data.get("default-groups", [])) if choices.dev else set())
    packages, skipped, unhashed = [], [], []
    for platform in PLATFORMS:
        environment: dict[str, str | AbstractSet[str]] = {
            **environment_of(platform, python),
            "extras": extras,
            "dependency_groups": groups,
        }
        environments = data.get("environments") or []
        if environments and not any(_holds(m, environment) for m in environments):
            skipped.append(f"{platform}: the file's environments do not include it ({'; '.join(environments)})")
            continue
        for entry in data.get("packages", []):
            if not _holds(entry.get("marker"), environment) or not _python_ok(
                entry.get("requires-python"), python.full
            ):
                continue
            label = f"{platform}: `{entry['name']}` {entry.get('version', '')}".rstrip()
            reason = _not_convertible(entry)
            if reason:
                skipped.append(f"{label} {reason}")
                continue
            wheels = [w for w in entry.get("wheels", []) if isinstance(w, dict) and "url" in w]
            wheel = best_wheel(wheels, platform, python, glibc)
            if wheel is None:
                skipped.append(f"{label} {no_wheel_reason(wheels, platform, python, glibc, 'sdist' in entry)}")
                continue
            sha256 = (wheel.get("hashes") or {}).get("sha256")
            if not sha256:
                unhashed.append(
                    UnhashedWheel(
                        platform,
                        entry["name"],
                        str(entry.get("version", "")),
                        wheel["url"],
                        str(entry.get("index", "")),
                    )
                )
                continue
            packages.append(
                LockedPackage(
                    name=entry["name"],
                    version=str(entry.get("version", "")),
                    manager="pip",
                    platform=platform,
                    url=wheel["url"],
                    hash=PackageHash(sha256=sha256),
                )
            )
    return Imported(
        f"pylock.toml (PEP 751, CPython {python.shown})",
        (),
        tuple(packages),
        digest,
        tuple(skipped),
        python=python.shown,
        unhashed=tuple(unhashed),
    )


def _holds(marker: str | None, environment: Mapping[str, str | AbstractSet[str]]) -> bool:
    if not marker:
        return True
    try:
        return Marker(marker).evaluate(environment, context="lock_file")
    except InvalidMarker:
        raise LockFormatError(
            f"pylock.toml has a marker lockgen cannot read: `{shown(marker)}`",
            f"a marker is PEP 508's (`sys_platform == 'linux'`); {_REWRITE}",
        ) from None


def _python_ok(requires: str | None, python: str) -> bool:
    if not requires:
        return True
    try:
        return SpecifierSet(requires).contains(python)
    except InvalidSpecifier:
        raise LockFormatError(
            f"pylock.toml has a requires-python lockgen cannot read: `{shown(requires)}`",
            f"requires-python is a version specifier (`>=3.10`); {_REWRITE}",
        ) from None


def _not_convertible(entry: PylockPackage) -> str | None:
    if "vcs" in entry:
        return (
            f"comes from {entry['vcs'].get('type', 'a VCS')} ({entry['vcs'].get('url', '?')}): build a wheel and pin it"
        )
    if "directory" in entry:
        return f"is a local directory ({entry['directory'].get('path', '?')}): build a wheel and pin it"
    if "archive" in entry:
        return "is an archive URL, not a wheel: build a wheel and pin it"
    if not entry.get("wheels") and "sdist" in entry:
        return "has an sdist only: it would be built on install"
    return None
