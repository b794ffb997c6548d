"""The environment manifest's JSON shape: every file of a prefix (`adapters/store/env_manifest.py` builds, writes
and reads it; `core/env/drift.py` compares two), and the fingerprints kept beside it, which differ by machine."""

from __future__ import annotations

from typing import Literal, Required, TypedDict


class ManifestEntry(TypedDict, total=False):
    """One path of the prefix: a file (size, mode, sha256), a link (target) or a special file (mode: its kind)."""

    path: Required[str]
    type: Required[Literal["file", "link", "special"]]
    size: int
    mode: str  # a file's "755" or "644"; a special file's kind, in octal
    sha256: str
    target: str


class EnvironmentManifest(TypedDict, total=False):
    """The manifest: its files, sorted by path; as written to the prefix, also what binds it to its lock."""

    format: int
    files: Required[list[ManifestEntry]]
    environment_digest: str  # the sha256 of the manifest without this record
    lock_sha256: str
    platform: str
    prefix: str
    conformance_digest: str  # an existing environment's, recorded by `export --prefix`


class ManifestStats(TypedDict):
    """Each file's fingerprint (`env_manifest.fingerprint`) and the prefix's folders; None: stats not lockgen's."""

    files: dict[str, list[int]]
    dirs: list[str] | None
