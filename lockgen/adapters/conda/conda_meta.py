"""The one reader and writer of `conda-meta/*.json`, the records conda, micromamba, pixi and rattler
keep per installed package: what a prefix holds, where each package came from, which files it owns.

Some fields name the machine that linked the prefix (its package store, how files were linked, the
request); they are dropped from images and left out of environment digests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockgen.adapters import user_files
from lockgen.core import nesting
from lockgen.digests import canonical_json, file_digest
from lockgen.errors import UserError

if TYPE_CHECKING:
    from lockgen.model.lock import LockedPackage

FOLDER = "conda-meta"
# fields that name the build host (its package store, how files were linked, the request)
BUILD_HOST_FIELDS = ("extracted_package_dir", "package_tarball_full_path", "link", "requested_spec", "requested_specs")
_VOLATILE_FIELDS = BUILD_HOST_FIELDS + ("url", "channel")
_DAMAGED = (
    "the environment's conda-meta was damaged: reinstall that package (a lockgen environment: materialize it again)"
)


def is_record(relative: str) -> bool:
    """Whether a prefix-relative path is a conda-meta record."""
    return relative.startswith(f"{FOLDER}/") and relative.endswith(".json")


def records(prefix: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Each record file of `prefix` and its content, by file name; one that is not a regular file holding a JSON
    object (a FIFO, which would be waited on; JSON nested past the bound) is refused by name."""
    for path in sorted((prefix / FOLDER).glob("*.json")):
        try:
            record = nesting.loads(user_files.read_bytes(path))
        except (OSError, ValueError) as exc:
            raise UserError(
                f"`{path}` is no conda-meta record: {exc.strerror if isinstance(exc, OSError) else exc}", _DAMAGED
            ) from None
        if not isinstance(record, dict):
            raise UserError(f"`{path}` is no conda-meta record: not a JSON object", _DAMAGED)
        yield path, record


def _write(path: Path, record: dict[str, Any]) -> None:
    path.write_bytes(canonical_json(record) + b"\n")


def record_origins(prefix: Path, packages: Iterable[LockedPackage]) -> None:
    """Each record names where its package came from: the lock's URL, not the local store file rattler read."""
    by_name = {p.name: p for p in packages}
    for path, record in records(prefix):
        package = by_name.get(record.get("name") or "")
        if package is not None:
            record["url"] = package.url
            record["channel"] = package.url.rsplit("/", 2)[0]
            _write(path, record)


def drop_build_host_fields(prefix: Path) -> None:
    """Removes the fields that name the machine which linked the prefix (for images)."""
    for path, record in records(prefix):
        for key in BUILD_HOST_FIELDS:
            record.pop(key, None)
        _write(path, record)


def digest_content(data: bytes) -> bytes:
    """A record's bytes as environment digests cover them: without machine-specific fields, canonical."""
    record = json.loads(data)
    for key in _VOLATILE_FIELDS:
        record.pop(key, None)
    return canonical_json(record)


def owned_files(prefix: Path) -> dict[str, list[str]]:
    """Per record (its file stem), the files it lists that exist, and the record itself."""
    owned = {}
    for path, record in records(prefix):
        files = [f for f in record.get("files", []) if (prefix / f).exists() or (prefix / f).is_symlink()]
        files.append(f"{FOLDER}/{path.name}")
        owned[path.stem] = sorted(set(files))
    return owned


def listed_paths(prefix: Path) -> dict[str, dict[str, Any]]:
    """Every `paths_data` entry of every record, by prefix-relative path."""
    expected: dict[str, dict[str, Any]] = {}
    for _, record in records(prefix):
        for entry in record.get("paths_data", {}).get("paths", []):
            expected[entry["_path"]] = entry
    return expected


def changed_files(prefix: Path, expected: dict[str, dict[str, Any]], paths: Iterable[str]) -> list[str]:
    """Those of `paths` (prefix-relative, listed in `expected`: `listed_paths`) whose content is not the sha256
    their record states (in the prefix, else of the package); links, and files stating none, are not judged."""
    changed = []
    for relative in sorted(paths):
        entry, path = expected[relative], prefix / relative
        digest = entry.get("sha256_in_prefix") or entry.get("sha256")
        if entry.get("path_type") == "softlink" or path.is_symlink() or digest is None:
            continue
        if file_digest(path) != digest:
            changed.append(relative)
    return changed


def locked_packages(prefix: Path, platform: str) -> list[LockedPackage]:
    """Lock entries for the records that name their origin (URL and hashes)."""
    from lockgen.model.lock import LockedPackage, PackageHash, dependency_map  # the models only where they are made

    packages = []
    for _, record in records(prefix):
        if not record.get("url"):
            continue
        packages.append(
            LockedPackage(
                name=record["name"],
                version=str(record["version"]),
                manager="conda",
                platform=platform,
                dependencies=dependency_map(record.get("depends", [])),
                url=record["url"],
                hash=PackageHash(md5=record.get("md5"), sha256=record.get("sha256")),
                build=record.get("build"),
            )
        )
    return packages
