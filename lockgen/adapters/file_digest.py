"""Streaming digests of files (package archives, layer tars, blobs, installed files): one reader for all."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file, read in 1 MiB blocks."""
    hasher = hashlib.new(algorithm)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()
