"""The lockfile: conda-lock's unified v1 format as lockgen's own plain frozen records.

A lock's entries are validated once, where its bytes are first seen (`adapters/lock/lockfile_yaml.v1_lock`, by
pydantic over these very dataclasses, then every field by its rule in `core.lock.lock_fields`); past that boundary
they travel as these records, which import nothing, so a resolve or a build of a kept lock loads no validator. Each
record refuses a field of the wrong type when built (`TypeError`): entries built from another tool's output
(`lockgen import`, conda-meta, uv's answers) are checked as the validator checked them, at the cost of a few
`isinstance` calls. conda-lock's own parser (`parse_conda_lock_file`) reads every lock written from these records
(a test proves it); conda-lock itself is kept off the resolve path because importing it is slow.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

LOCK_VERSION = 1
LOCKGEN_META_FORMAT = "1"
MANAGERS = ("conda", "pip")
_FORBID_EXTRA: dict[str, Any] = {"extra": "forbid"}  # pydantic's config for these records, where it validates them


def dependency_map(depends: list[str] | tuple[str, ...]) -> dict[str, str]:
    """conda-lock's `dependencies` map from conda `depends` strings: name -> the rest of the match spec
    (`*` when there is none); a name listed twice keeps its first spec."""
    result: dict[str, str] = {}
    for dep in depends:
        name, _, rest = dep.strip().partition(" ")
        result.setdefault(name, rest.strip() or "*")
    return result


def _refuse(record: str, name: str, value: object, kind: str) -> TypeError:
    return TypeError(f"{record}.{name} must be {kind}, not {type(value).__name__}")


def _text_or_none(record: str, name: str, value: object) -> None:
    if value is not None and type(value) is not str:
        raise _refuse(record, name, value, "a string or null")


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageHash:
    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    md5: str | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        md5, sha256 = self.md5, self.sha256
        if not ((md5 is None or type(md5) is str) and (sha256 is None or type(sha256) is str)):
            _text_or_none("hash", "md5", md5)
            _text_or_none("hash", "sha256", sha256)


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedPackage:
    """One package of one platform, as conda-lock's v1 `package` entries."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    name: str
    version: str
    manager: Literal["conda", "pip"]
    platform: str
    dependencies: dict[str, str] = field(default_factory=dict)
    url: str
    hash: PackageHash
    build: str | None = None
    category: str = "main"
    optional: bool = False

    def __post_init__(self) -> None:  # each test written out: a loop over the names was half of an entry's making
        if not (
            type(self.name) is str
            and type(self.version) is str
            and type(self.platform) is str
            and type(self.url) is str
            and type(self.category) is str
        ):
            for name in ("name", "version", "platform", "url", "category"):
                value = getattr(self, name)
                if type(value) is not str:
                    raise _refuse("package", name, value, "a string")
        if self.manager not in MANAGERS:
            raise TypeError(f"package.manager must be `conda` or `pip`, not {self.manager!r:.40}")
        dependencies = self.dependencies
        if type(dependencies) is not dict or (
            dependencies and not all(type(key) is str and type(value) is str for key, value in dependencies.items())
        ):
            raise TypeError("package.dependencies must map strings to strings")
        if type(self.hash) is not PackageHash:
            raise _refuse("package", "hash", self.hash, "a hash record")
        _text_or_none("package", "build", self.build)
        if type(self.optional) is not bool:
            raise _refuse("package", "optional", self.optional, "true or false")

    def sort_key(self) -> tuple[str, str, str, str, str]:
        return (self.platform, self.manager, self.name, self.version, self.build or "")


def pip_wheel(name: str, version: str, platform: str, url: str, sha256: str) -> LockedPackage:
    """The pip entry of one wheel pinned by its sha256 (a uv.lock's import holds 600k of them: slotted records,
    with no per-entry dict)."""
    return LockedPackage(
        name=name, version=version, manager="pip", platform=platform, url=url, hash=PackageHash(sha256=sha256)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LockChannel:
    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    url: str
    used_env_vars: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.url) is not str:
            raise _refuse("channel", "url", self.url, "a string")
        if type(self.used_env_vars) is not tuple or not all(type(v) is str for v in self.used_env_vars):
            raise TypeError("channel.used_env_vars must be a tuple of strings")


@dataclass(frozen=True, slots=True, kw_only=True)
class LockMetadata:
    """conda-lock's metadata block; lockgen's own facts live in `custom_metadata` (string values)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    content_hash: dict[str, str]
    channels: tuple[LockChannel, ...]
    platforms: tuple[str, ...]
    sources: tuple[str, ...]
    custom_metadata: dict[str, str]

    def __post_init__(self) -> None:
        for name in ("content_hash", "custom_metadata"):
            mapping = getattr(self, name)
            if type(mapping) is not dict or not all(type(k) is str and type(v) is str for k, v in mapping.items()):
                raise TypeError(f"metadata.{name} must map strings to strings")
        if type(self.channels) is not tuple or not all(type(c) is LockChannel for c in self.channels):
            raise TypeError("metadata.channels must be a tuple of channels")
        for name in ("platforms", "sources"):
            values = getattr(self, name)
            if type(values) is not tuple or not all(type(v) is str for v in values):
                raise TypeError(f"metadata.{name} must be a tuple of strings")


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock:
    """A whole lock for one target."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    version: int = LOCK_VERSION
    metadata: LockMetadata
    package: tuple[LockedPackage, ...]

    def __post_init__(self) -> None:
        if type(self.version) is not int:
            raise _refuse("lock", "version", self.version, "an integer")
        if type(self.metadata) is not LockMetadata:
            raise _refuse("lock", "metadata", self.metadata, "a metadata record")
        if type(self.package) is not tuple or not all(type(p) is LockedPackage for p in self.package):
            raise TypeError("lock.package must be a tuple of packages")

    def packages_for(self, platform: str) -> tuple[LockedPackage, ...]:
        return tuple(p for p in self.package if p.platform == platform)

    def meta(self, key: str, default: str = "") -> str:
        return self.metadata.custom_metadata.get(f"lockgen.{key}", default)


def lock_document(lock: Lock) -> dict[str, Any]:
    """A lock as plain JSON values, field for field (what `lock_from_document` builds again): the form a checked
    lock is kept in by its bytes' sha256 (`adapters/lock/kept_inputs.keep_lock`)."""
    meta = lock.metadata
    return {
        "version": lock.version,
        "metadata": {
            "content_hash": meta.content_hash,
            "channels": [{"url": c.url, "used_env_vars": list(c.used_env_vars)} for c in meta.channels],
            "platforms": list(meta.platforms),
            "sources": list(meta.sources),
            "custom_metadata": meta.custom_metadata,
        },
        "package": [
            {
                "name": p.name,
                "version": p.version,
                "manager": p.manager,
                "platform": p.platform,
                "dependencies": p.dependencies,
                "url": p.url,
                "hash": {"md5": p.hash.md5, "sha256": p.hash.sha256},
                "build": p.build,
                "category": p.category,
                "optional": p.optional,
            }
            for p in lock.package
        ],
    }


def lock_from_document(document: dict[str, Any]) -> Lock:
    """The lock `lock_document` gave `document` for, built without a validator (each record still refuses a field
    of the wrong type); a document not of that shape raises `KeyError`, `TypeError` or `AttributeError`."""
    if document.keys() != _LOCK_KEYS or document["metadata"].keys() != _METADATA_KEYS:
        raise KeyError("a lock document of another shape")
    meta = document["metadata"]
    channels = tuple(
        LockChannel(url=c["url"], used_env_vars=kept_tuple(c["used_env_vars"]))
        for c in (kept_shape(channel, _CHANNEL_KEYS) for channel in kept_tuple(meta["channels"]))
    )
    metadata = LockMetadata(
        content_hash=meta["content_hash"],
        channels=channels,
        platforms=kept_tuple(meta["platforms"]),
        sources=kept_tuple(meta["sources"]),
        custom_metadata=meta["custom_metadata"],
    )
    packages = tuple(_package_from_document(p) for p in kept_tuple(document["package"]))
    return Lock(version=document["version"], metadata=metadata, package=packages)


def kept_tuple(value: object) -> tuple[Any, ...]:
    """A JSON list as a tuple (a string or a mapping is no list: `tuple` of it would be its characters or keys)."""
    if type(value) is not list:
        raise TypeError(f"a list was kept here, not {type(value).__name__}")
    return tuple(value)


_LOCK_KEYS = frozenset(f.name for f in fields(Lock))
_METADATA_KEYS = frozenset(f.name for f in fields(LockMetadata))
_PACKAGE_KEYS = frozenset(f.name for f in fields(LockedPackage))
_CHANNEL_KEYS = frozenset(f.name for f in fields(LockChannel))
_HASH_KEYS = frozenset(f.name for f in fields(PackageHash))


def kept_shape(document: object, keys: frozenset[str]) -> dict[str, Any]:
    """A kept JSON object holding exactly `keys`, else `KeyError`: a kept value of another shape is read again
    from its bytes, never completed by a record's defaults."""
    if type(document) is not dict or document.keys() != keys:
        raise KeyError("a kept document of another shape")
    return document


def _package_from_document(p: dict[str, Any]) -> LockedPackage:
    if p.keys() != _PACKAGE_KEYS:
        raise KeyError("a package document of another shape")
    return LockedPackage(
        name=p["name"],
        version=p["version"],
        manager=p["manager"],
        platform=p["platform"],
        dependencies=p["dependencies"],
        url=p["url"],
        hash=PackageHash(**kept_shape(p["hash"], _HASH_KEYS)),
        build=p["build"],
        category=p["category"],
        optional=p["optional"],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedLock:
    """A lock as read from its file, once per command: the exact bytes, their sha256 (what certificates,
    manifests and images bind to) and the entries, every field checked (`core.lock.lock_fields`). The digest is
    of the bytes that were parsed, so nothing re-reads a file that may have changed since."""

    source: str
    data: bytes
    sha256: str
    lock: Lock
