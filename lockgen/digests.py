"""Digests, one home for all: canonical JSON (sorted keys, no spaces) and its sha256, and streaming
file digests (package archives, layer tars, blobs, installed files).

A foundation module like `errors`: stdlib only, importable from every layer. `core` uses only the
pure half (`canonical_json`, `canonical_digest`); reading files is for adapters and use cases.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of `value`: sorted keys, no whitespace, ASCII with escapes (what OCI
    blobs, certificates, lock inputs and environment manifests hash); non-JSON values as `str`."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def canonical_digest(value: Any) -> str:
    """The hex sha256 of `canonical_json(value)`."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file, read in 1 MiB blocks."""
    hasher = hashlib.new(algorithm)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()
