"""Package manifests kept on this machine (`$LOCKGEN_HOME/manifests/<sha256>.json`, one per archive
hash, written whole) and bundles of them (`lockgen manifests --out`, `--manifests FILE`).

A manifest is cached only after it was read from the package itself (a wheel's RECORD, a verified
archive's paths.json); the cache is keyed by the hash the lock pins, so a lock's package always meets
the manifest of exactly its archive.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path

from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.core.env.confined import child
from lockgen.digests import canonical_json
from lockgen.errors import UserError
from lockgen.model.manifests import ManifestBundle, PackageManifest, manifest_document, manifest_from_document


# bumped whenever what a manifest holds grows or means more (2: link targets, entry-point targets; 3: name and
# version proven from the file itself; 4: each file's exec bit), so a manifest read by an
# older lockgen is read again from its package rather than trusted for what it lacks
CACHE_LAYOUT = 4


def _folder() -> Path:
    return lockgen_home() / "manifests" / f"v{CACHE_LAYOUT}"


def cached(sha256: str) -> PackageManifest | None:
    path = child(_folder(), f"{sha256}.json", "a manifest's archive hash")
    if not path.is_file():
        return None
    try:  # kept by lockgen after the archive was checked: built again without a validator
        manifest = manifest_from_document(json.loads(path.read_bytes()))
    except (ValueError, KeyError, TypeError, AttributeError):
        path.unlink(missing_ok=True)  # a damaged entry is read again from the package
        return None
    return manifest if manifest.sha256 == sha256 else None


def keep(manifest: PackageManifest) -> None:
    write_bytes_atomic(
        child(_folder(), f"{manifest.sha256}.json", "a manifest's archive hash"),
        json.dumps(manifest_document(manifest), separators=(",", ":")).encode(),
    )


def _patched_path(sha256: str, prefix: str) -> Path:
    name = f"{sha256}-{hashlib.sha256(prefix.encode()).hexdigest()[:16]}.json"
    return child(_folder() / "patched", name, "a manifest's archive hash")


def cached_patched(sha256: str, prefix: str) -> dict[str, str] | None:
    """The hashes of a conda package's placeholder files once patched for `prefix`, when computed before."""
    path = _patched_path(sha256, prefix)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def keep_patched(sha256: str, prefix: str, digests: dict[str, str]) -> None:
    write_bytes_atomic(_patched_path(sha256, prefix), json.dumps(digests, sort_keys=True).encode())


def _placed_path(sha256: str, python: str, layout: int) -> Path:
    return child(_folder() / "placed", f"{sha256}-py{python}-p{layout}.json", "a wheel's hash and Python")


def cached_placed(sha256: str, python: str, layout: int) -> object | None:
    """The placement record kept for a wheel (by its sha256) in a venv of Python `X.Y` (`layout`: of the
    placement rules), as read (the caller checks it), or None."""
    try:
        return json.loads(_placed_path(sha256, python, layout).read_bytes())
    except (OSError, ValueError):
        return None


def keep_placed(sha256: str, python: str, layout: int, record: dict) -> None:
    write_bytes_atomic(_placed_path(sha256, python, layout), json.dumps(record, separators=(",", ":")).encode())


def write_bundle(path: Path, manifests: list[PackageManifest]) -> None:
    """A bundle file (gzip when `path` ends in `.gz`), manifests sorted by archive hash: byte-stable."""
    bundle = ManifestBundle(manifests=tuple(sorted({m.sha256: m for m in manifests}.values(), key=lambda m: m.sha256)))
    data = canonical_json({"format": bundle.format, "manifests": [manifest_document(m) for m in bundle.manifests]})
    data += b"\n"
    write_bytes_atomic(path, gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)


def read_bundle(path: Path) -> dict[str, PackageManifest]:
    """The manifests of a bundle file, by archive hash."""
    from lockgen.adapters.lock import lock_file

    return parse_bundle(lock_file.read_bundle(path).data, path)


def parse_bundle(raw: bytes, path: Path) -> dict[str, PackageManifest]:
    """The manifests of a bundle read as `raw` from `path`, by archive hash."""
    from pydantic import TypeAdapter  # a bundle is input: validated here, into the plain records

    try:
        # pydantic's own JSON reader: the H200 bundle's 49,444 files in 0.25 s against 0.32-0.47 s through json.loads
        bundle = TypeAdapter(ManifestBundle).validate_json(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (ValueError, EOFError, OSError, zlib.error):  # pydantic's ValidationError is a ValueError
        raise UserError(
            f"`{path}` is not a lockgen manifests bundle", "write one with lockgen manifests LOCK --out FILE"
        ) from None
    return {m.sha256: m for m in bundle.manifests}
