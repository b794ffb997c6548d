"""The expected environment of a lock, pure: for each locked package, the files its own manifest (a
wheel's RECORD, a conda package's paths.json) says it installs into a prefix, with their content hashes and exec bits (a
conda member's mode; a wheel
member's Unix mode, and every `.data/scripts` file, which installers make executable).

The lock's Python (`lock_python`: its conda python, else the version it records) decides where wheels go.
Placement follows the installers: a wheel's files by its scheme (site-packages, `NAME.data/...`); a
noarch-python conda package's `site-packages/` and `python-scripts/` under the interpreter's folders.
A conda file with a prefix placeholder is expected with the hash of its bytes patched for the prefix
when the caller could compute it (`patched`), else by path only. Changes a lock accepts by name
(`accepted`: path -> sha256, recorded by `lockgen pin --accept-changed`) replace the stated hash.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING, Any

from lockgen.core.env.conformance import ExpectedFile, ExpectedPackage, ObservedFile
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.env.wheel_files import RecordRow, Scheme, expected_files, is_script, wheel_to_prefix
from lockgen.digests import canonical_digest
from lockgen.model.lock import Lock
from lockgen.model.manifests import PackageManifest

if TYPE_CHECKING:  # types only: pydantic-based, and a build of a kept lock imports neither
    from lockgen.model.inventory import InstalledDistribution
    from lockgen.model.json_values import JsonObject


def python_xy(version: str) -> str:
    """`X.Y` of a Python version `X.Y[.Z]`."""
    return ".".join(version.split(".")[:2])


def lock_python(lock: Lock, platform: str) -> str | None:
    """The Python `X.Y` of a lock on a platform: its conda python, else the version the lock records (a PyPI
    layer's, a frozen or pinned venv's). The conda package wins where both are there: it is the interpreter
    the environment runs, and the folder its wheels go into; the recorded version is what resolve read from it.
    Every reader of a lock's Python asks here (export, check, a team stack on a base lock)."""
    conda_python = next(
        (p.version for p in lock.packages_for(platform) if p.manager == "conda" and p.name == "python"), None
    )
    version = conda_python or LockgenMeta(lock).python(platform) or None
    return python_xy(version) if version else None


def site_packages_of(python: str) -> str:
    """`lib/pythonX.Y/site-packages` for a Python version `X.Y[.Z]`."""
    return f"lib/python{python_xy(python)}/site-packages"


def _key(manifest: PackageManifest) -> str:
    return f"{manifest.name} {manifest.version}"


def installed_expected(manifest: PackageManifest, accepted: Mapping[str, str] = {}) -> ExpectedPackage:
    """A check-only distribution: the files its installed RECORD states (already prefix-relative)."""
    files = tuple(
        ExpectedFile(f.path, accepted.get(f.path, f.sha256), None if f.path in accepted else f.size)
        for f in manifest.files
        if not f.path.endswith(".pyc")
    )
    return ExpectedPackage(_key(manifest), files, manifest.dist_info, manifest.scripts, _targets(manifest))


def _targets(manifest: PackageManifest) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(manifest.entry_points.items()))


def wheel_expected(manifest: PackageManifest, python: str, accepted: Mapping[str, str] = {}) -> ExpectedPackage:
    """The files a wheel installs, prefix-relative, for Python `X.Y`."""
    if manifest.kind == "installed":
        return installed_expected(manifest, accepted)
    site = site_packages_of(python)
    dist_name = (manifest.dist_info or manifest.name).removesuffix(".dist-info").rsplit("-", 1)[0]
    rows = tuple(RecordRow(f.path, f.sha256, f.size) for f in manifest.files)
    scheme = Scheme(site, python_xy(python), dist_name)
    placed = expected_files(rows, scheme)
    executable = {wheel_to_prefix(f.path, scheme): True if is_script(f.path) else f.executable for f in manifest.files}
    files = tuple(
        ExpectedFile(
            r.path,
            accepted.get(r.path, r.sha256),
            None if r.path in accepted else r.size,
            executable=executable.get(r.path),
        )
        for r in placed
    )
    dist_info = posixpath.join(site, manifest.dist_info) if manifest.dist_info else None
    return ExpectedPackage(_key(manifest), files, dist_info, manifest.scripts, _targets(manifest))


# bumped whenever where `wheel_expected` puts a wheel's files changes (the scheme, the checks on a path), so the
# placements kept on disk (`placed_record`) are worked out again from the manifest rather than trusted (2: each
# file's exec bit)
PLACEMENT_LAYOUT = 2


@dataclass(frozen=True)
class PlacedWheel:
    """What a wheel's manifest places into a venv (`wheel_expected` with nothing accepted), with the name and
    version the manifest was read with (a kept placement must name the locked package, as a kept manifest must)."""

    name: str
    version: str
    placed: ExpectedPackage


def placed_record(manifest: PackageManifest, python: str) -> tuple[PlacedWheel, JsonObject]:
    """A wheel's placement for Python `X.Y` and its record to keep (JSON), bound to the wheel's sha256, the
    Python and `PLACEMENT_LAYOUT`: a materialize of the wheel again reads it instead of its manifest."""
    placed = wheel_expected(manifest, python)
    record: JsonObject = {
        "layout": PLACEMENT_LAYOUT,
        "sha256": manifest.sha256,
        "python": python,
        "name": manifest.name,
        "version": manifest.version,
        "dist_info": placed.dist_info,
        "scripts": list(placed.scripts),
        "entry_points": [list(pair) for pair in placed.entry_points],
        "files": [[f.path, f.sha256, f.size, f.executable] for f in placed.files],
    }
    return PlacedWheel(manifest.name, manifest.version, placed), record


def placed_of_record(record: Any, sha256: str, python: str) -> PlacedWheel | None:
    """The placement a record of `placed_record` holds, when it is one, of this wheel, Python and layout;
    None for anything else (the caller works it out again)."""
    if not (
        isinstance(record, dict)
        and record.get("layout") == PLACEMENT_LAYOUT
        and record.get("sha256") == sha256
        and record.get("python") == python
    ):
        return None
    name, version, dist_info = record.get("name"), record.get("version"), record.get("dist_info")
    scripts, entry_points, rows = record.get("scripts"), record.get("entry_points"), record.get("files")
    if not (
        isinstance(name, str)
        and isinstance(version, str)
        and (dist_info is None or isinstance(dist_info, str))
        and isinstance(scripts, list)
        and all(isinstance(s, str) for s in scripts)
        and isinstance(entry_points, list)
        and all(isinstance(e, list) and len(e) == 2 and all(isinstance(v, str) for v in e) for e in entry_points)
        and isinstance(rows, list)
        and (columns := _placed_columns(rows)) is not None
    ):
        return None
    paths, digests, sizes, executables = columns  # each row made as `ExpectedFile._make` makes it, at C speed
    rows_of = zip(paths, digests, sizes, repeat("file"), repeat(None), executables)  # in `EXPECTED_FILE_ROW`'s order
    files = tuple(map(_EXPECTED_FILE, rows_of))
    targets = tuple((script, target) for script, target in entry_points)
    return PlacedWheel(name, version, ExpectedPackage(f"{name} {version}", files, dist_info, tuple(scripts), targets))


_NONE = type(None)
# `ExpectedFile`'s fields in the order the rows above are zipped: `tuple.__new__` checks no length, where
# `ExpectedFile._make` would, so a field added to `ExpectedFile` must be added here and to the zip (a test compares)
EXPECTED_FILE_ROW = ("path", "sha256", "size", "kind", "target", "executable")
_EXPECTED_FILE = partial(tuple.__new__, ExpectedFile)


def _placed_columns(rows: list[Any]) -> tuple[tuple[Any, ...], ...] | None:
    """The columns of the rows when each is `[path, sha256 or None, size or None, executable or None]`, judged a column
    at a time at C speed (a torch's 15,000 rows one by one: 0.02 s; a size is an int and not a bool, as `type` tells
    them apart); else None."""
    if not set(map(type, rows)) <= {list} or not set(map(len, rows)) <= {4}:
        return None
    columns = tuple(zip(*rows)) if rows else ((), (), (), ())
    paths, digests, sizes, executables = columns
    if (
        set(map(type, paths)) <= {str}
        and set(map(type, digests)) <= {str, _NONE}
        and set(map(type, sizes)) <= {int, _NONE}
        and set(map(type, executables)) <= {bool, _NONE}
    ):
        return columns
    return None


def _conda_path(path: str, noarch_python: bool, python: str) -> str:
    if noarch_python and path.startswith("site-packages/"):
        return posixpath.join(site_packages_of(python), path.removeprefix("site-packages/"))
    if noarch_python and path.startswith("python-scripts/"):
        return posixpath.join("bin", path.removeprefix("python-scripts/"))
    return path


def conda_expected(
    manifest: PackageManifest, python: str | None, patched: Mapping[str, str], accepted: Mapping[str, str] = {}
) -> ExpectedPackage:
    """The files a conda package links into a prefix; `patched` maps its placeholder files (archive paths)
    to the hash of their bytes with the prefix written in."""
    files: list[ExpectedFile] = []
    add, noarch = files.append, manifest.noarch_python
    for item in manifest.files:
        path = _conda_path(item.path, noarch, python or "") if noarch else item.path
        sha256, size = item.sha256, item.size
        if item.placeholder is not None:
            sha256, size = patched.get(item.path), None
        if accepted and path in accepted:
            sha256, size = accepted[path], None
        add(ExpectedFile(path, sha256, size, item.kind, item.target, item.executable))
    return ExpectedPackage(_key(manifest), tuple(files), None, manifest.scripts, _targets(manifest))


def package_expected(
    manifest: PackageManifest, python: str | None, accepted: Mapping[str, str], patched: Mapping[str, str] = {}
) -> ExpectedPackage:
    """The files a locked package puts into a prefix, by its manifest's kind: a wheel's (for Python `X.Y`) or
    a check-only distribution's installed RECORD, else a conda package's (`patched`: its placeholder files'
    hashes for the prefix)."""
    if is_wheel(manifest):
        return wheel_expected(manifest, python or "", accepted)
    return conda_expected(manifest, python, patched, accepted)


def is_wheel(manifest: PackageManifest) -> bool:
    """A wheel's manifest, or a check-only distribution's (its installed RECORD): placed by the wheel scheme."""
    return manifest.kind in ("wheel", "installed")


def from_installed_record(dist: InstalledDistribution, site_packages: str) -> list[ObservedFile]:
    """An installed RECORD read as if it were the files on disk (`lockgen pin` compares it with the
    wheel's: the re-hash of the files themselves is checked apart)."""
    return [
        ObservedFile(posixpath.normpath(posixpath.join(site_packages, r.path)), "file", r.size or 0, 0o644, r.sha256)
        for r in dist.record
    ]


def expected_digest(packages: Iterable[ExpectedPackage]) -> str:
    """One digest of an expected environment: every package's files and stated hashes (prefix-free for
    pure-PyPI locks, so a venv on bare metal and the same lock in an image share it)."""
    return canonical_digest(
        sorted([p.key, sorted((f.path, f.sha256, f.kind) for f in p.files), list(p.scripts)] for p in packages)
    )  # tuples: the same JSON as lists, made faster
