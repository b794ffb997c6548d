"""The lockfile: conda-lock's unified v1 format as lockgen's own frozen models.

conda-lock's own parser (`parse_conda_lock_file`) reads every lock written from these models
(a test proves it); conda-lock itself is kept off the resolve path because importing it is slow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lockgen.model.base import Frozen

LOCK_VERSION = 1
LOCKGEN_META_FORMAT = "1"


def dependency_map(depends: list[str] | tuple[str, ...]) -> dict[str, str]:
    """conda-lock's `dependencies` map from conda `depends` strings: name -> the rest of the match spec
    (`*` when there is none); a name listed twice keeps its first spec."""
    result: dict[str, str] = {}
    for dep in depends:
        name, _, rest = dep.strip().partition(" ")
        result.setdefault(name, rest.strip() or "*")
    return result


class PackageHash(Frozen):
    md5: str | None = None
    sha256: str | None = None


class LockedPackage(Frozen):
    """One package of one platform, as conda-lock's v1 `package` entries."""

    name: str
    version: str
    manager: Literal["conda", "pip"]
    platform: str
    dependencies: dict[str, str] = Field(
        default_factory=dict
    )  # a new one each (a default pydantic deep-copies per entry)
    url: str
    hash: PackageHash
    build: str | None = None
    category: str = "main"
    optional: bool = False

    def sort_key(self) -> tuple[str, str, str, str, str]:
        return (self.platform, self.manager, self.name, self.version, self.build or "")


_WHEEL_FIELDS = {"name", "version", "manager", "platform", "url", "hash"}  # the fields `pip_wheel` gives
_SHA256_FIELDS = {"sha256"}


def pip_wheel(name: str, version: str, platform: str, url: str, sha256: str) -> LockedPackage:
    """The pip entry of one wheel pinned by its sha256, validated as `LockedPackage(...)` is, holding the one set of
    the fields given that every such entry shares (pydantic's own record of them, copied before any `model_copy`
    adds to it) instead of a set of its own: a 300k-package uv.lock's import holds 600k entries, 1.7 KiB each with
    their sets, 0.8 KiB without."""
    digest = PackageHash(sha256=sha256)
    package = LockedPackage(name=name, version=version, manager="pip", platform=platform, url=url, hash=digest)
    object.__setattr__(digest, "__pydantic_fields_set__", _SHA256_FIELDS)
    object.__setattr__(package, "__pydantic_fields_set__", _WHEEL_FIELDS)
    return package


class LockChannel(Frozen):
    url: str
    used_env_vars: tuple[str, ...] = ()


class LockMetadata(Frozen):
    """conda-lock's metadata block; lockgen's own facts live in `custom_metadata` (string values)."""

    content_hash: dict[str, str]
    channels: tuple[LockChannel, ...]
    platforms: tuple[str, ...]
    sources: tuple[str, ...]
    custom_metadata: dict[str, str]


class Lock(Frozen):
    """A whole lock for one target."""

    version: int = LOCK_VERSION
    metadata: LockMetadata
    package: tuple[LockedPackage, ...]

    def packages_for(self, platform: str) -> tuple[LockedPackage, ...]:
        return tuple(p for p in self.package if p.platform == platform)

    def meta(self, key: str, default: str = "") -> str:
        return self.metadata.custom_metadata.get(f"lockgen.{key}", default)


class LoadedLock(Frozen):
    """A lock as read from its file, once per command: the exact bytes, their sha256 (what certificates,
    manifests and images bind to) and the entries, every field checked (`core.lock.lock_fields`). The digest is
    of the bytes that were parsed, so nothing re-reads a file that may have changed since."""

    source: str
    data: bytes
    sha256: str
    lock: Lock
