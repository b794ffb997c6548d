"""Package manifests: what a package's own archive says it installs (a wheel's `RECORD`, a conda
package's `info/paths.json`), keyed by the archive's sha256, the hash the lock pins. A bundle of them
lets a machine without network check an environment against its lock.

Paths are as the archive writes them: wheel-relative for wheels (placed by the installer's scheme at
check time), prefix-relative for conda packages (`site-packages/...` and `python-scripts/...` placed for
noarch-python ones). A distribution no index publishes (`installed`) has the rows of its installed RECORD,
already prefix-relative, and its dist-info folder likewise.

Plain frozen records, as the lock's (`model/lock.py`): pydantic validates a manifest where its bytes come from
outside (a bundle a user gives, `manifest_store.parse_bundle`), and a manifest kept in lockgen's store is built
again from its JSON without a validator (`manifest_from_document`), so a build of a kept lock imports none. Each
record refuses a field of the wrong type when built (`TypeError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from lockgen.model.lock import kept_shape, kept_tuple

MANIFESTS_FORMAT = 1
_FORBID_EXTRA: dict[str, Any] = {"extra": "forbid"}  # pydantic's config for these records, where it validates them
_FILE_KINDS = ("file", "link")
_PACKAGE_KINDS = ("wheel", "conda", "installed")


def _optional(record: str, name: str, value: object, kind: type) -> None:
    if value is not None and type(value) is not kind:
        raise TypeError(f"{record}.{name} must be {kind.__name__} or null, not {type(value).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    """One file of a package: path, hex sha256 and size as the archive states them; a conda file with a
    prefix placeholder names it (its installed bytes are the archive's with the prefix written in)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    path: str
    sha256: str | None = None
    size: int | None = None
    kind: Literal["file", "link"] = "file"
    placeholder: str | None = None
    text_mode: bool = True
    target: str | None = None  # a link's target, as the archive holds it
    # installed with an exec bit (the archive member's mode); None: not known (a bundle or an installed RECORD)
    executable: bool | None = None

    def __post_init__(self) -> None:
        if type(self.path) is not str:
            raise TypeError(f"file.path must be str, not {type(self.path).__name__}")
        for name in ("sha256", "placeholder", "target"):
            _optional("file", name, getattr(self, name), str)
        _optional("file", "size", self.size, int)
        _optional("file", "executable", self.executable, bool)
        if self.kind not in _FILE_KINDS or type(self.text_mode) is not bool:
            raise TypeError(f"file `{self.path[:80]}` has a kind or text mode of another type")


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageManifest:
    """Everything needed to say which files a package puts into a prefix, and with which content."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    sha256: str
    name: str
    version: str
    kind: Literal["wheel", "conda", "installed"]
    files: tuple[ManifestFile, ...]
    dist_info: str | None = None  # the `NAME-VERSION.dist-info` folder (prefix-relative when installed)
    scripts: tuple[str, ...] = ()  # console/gui scripts (wheels) or entry points (noarch python)
    entry_points: dict[str, str] = field(default_factory=dict)  # script name -> `module:attr`, what its launcher calls
    noarch_python: bool = False
    source: str = ""  # where it was read: a wheel URL, an archive in the store

    def __post_init__(self) -> None:
        for name in ("sha256", "name", "version", "source"):
            value = getattr(self, name)
            if type(value) is not str:
                raise TypeError(f"manifest.{name} must be str, not {type(value).__name__}")
        _optional("manifest", "dist_info", self.dist_info, str)
        if self.kind not in _PACKAGE_KINDS or type(self.noarch_python) is not bool:
            raise TypeError("manifest.kind or manifest.noarch_python is of another type")
        if type(self.files) is not tuple or not all(type(f) is ManifestFile for f in self.files):
            raise TypeError("manifest.files must be a tuple of files")
        if type(self.scripts) is not tuple or not all(type(s) is str for s in self.scripts):
            raise TypeError("manifest.scripts must be a tuple of strings")
        if type(self.entry_points) is not dict or not all(
            type(k) is str and type(v) is str for k, v in self.entry_points.items()
        ):
            raise TypeError("manifest.entry_points must map strings to strings")


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestBundle:
    """Manifests for `lockgen check --manifests` on a machine that cannot read the packages themselves."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    format: int = MANIFESTS_FORMAT
    manifests: tuple[PackageManifest, ...]


def manifest_document(manifest: PackageManifest) -> dict[str, Any]:
    """A manifest as plain JSON values, every field (what `manifest_from_document` builds again)."""
    return {
        "sha256": manifest.sha256,
        "name": manifest.name,
        "version": manifest.version,
        "kind": manifest.kind,
        "files": [
            {
                "path": f.path,
                "sha256": f.sha256,
                "size": f.size,
                "kind": f.kind,
                "placeholder": f.placeholder,
                "text_mode": f.text_mode,
                "target": f.target,
                "executable": f.executable,
            }
            for f in manifest.files
        ],
        "dist_info": manifest.dist_info,
        "scripts": list(manifest.scripts),
        "entry_points": manifest.entry_points,
        "noarch_python": manifest.noarch_python,
        "source": manifest.source,
    }


def manifest_from_document(document: dict[str, Any]) -> PackageManifest:
    """The manifest `manifest_document` gave `document` for, built without a validator (each record still refuses
    a field of the wrong type); a document not of that shape raises `KeyError`, `TypeError` or `AttributeError`."""
    if document.keys() != _MANIFEST_KEYS:
        raise KeyError("a manifest document of another shape")
    return PackageManifest(
        sha256=document["sha256"],
        name=document["name"],
        version=document["version"],
        kind=document["kind"],
        files=tuple(ManifestFile(**kept_shape(file, _FILE_KEYS)) for file in kept_tuple(document["files"])),
        dist_info=document["dist_info"],
        scripts=kept_tuple(document["scripts"]),
        entry_points=document["entry_points"],
        noarch_python=document["noarch_python"],
        source=document["source"],
    )


_MANIFEST_KEYS = frozenset(f.name for f in fields(PackageManifest))
_FILE_KEYS = frozenset(f.name for f in fields(ManifestFile))
