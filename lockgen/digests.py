"""Digests, one home for all: canonical JSON (sorted keys, no spaces) and its sha256, and streaming
file digests (package archives, layer tars, blobs, installed files: the one file hasher; `follow=False` wherever
the file lies in a prefix that is not trusted).

A foundation module like `errors`: stdlib only, importable from every layer. `core` uses only the
pure half (`canonical_json`, `canonical_digest`); reading files is for adapters and use cases.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of `value`: sorted keys, no whitespace, ASCII with escapes (what OCI
    blobs, certificates, lock inputs and environment manifests hash); non-JSON values as `str`."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def canonical_json_with(value: Mapping[str, Any], encoded: Mapping[str, bytes]) -> bytes:
    """`canonical_json(value)` for a dict some of whose values are given already as their canonical JSON
    (`encoded`, by key: those of `value` are then not read): a large part shared by two documents (an
    environment manifest's files, in its digest and in the file written) is encoded once."""
    keys = sorted({*value, *encoded})
    return (
        b"{"
        + b",".join(
            canonical_json(key) + b":" + (encoded[key] if key in encoded else canonical_json(value[key]))
            for key in keys
        )
        + b"}"
    )


def canonical_digest(value: Any) -> str:
    """The hex sha256 of `canonical_json(value)`."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def canonical_list_digest(items: Iterable[Any], chunk: int = 1024) -> str:
    """`canonical_digest(list(items))`, the list's JSON made and hashed `chunk` items at a time: a long list (a
    300k-package lock's package set, about 100 MiB as one text) is never held whole, nor its JSON."""
    hasher = hashlib.sha256(b"[")
    remaining = iter(items)
    separator = b""
    while batch := list(itertools.islice(remaining, chunk)):
        hasher.update(separator + canonical_json(batch)[1:-1])  # a list's JSON is its items' joined by `,`
        separator = b","
    hasher.update(b"]")
    return hasher.hexdigest()


def file_digest(path: Path | str, algorithm: str = "sha256", *, follow: bool = True) -> str:
    """The hex digest of a file, read in 1 MiB blocks (plain `os.read`: faster than buffered reads on many
    small files). `follow=False` for a file of a prefix lockgen does not trust (an environment, an image tree):
    a link is never followed and anything but a regular file (a FIFO, which would block, or a device) is an
    OSError, checked on the descriptor opened, so nothing swapped in between is read."""
    flags = os.O_RDONLY if follow else os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags)
    try:
        if not follow and not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        hasher = hashlib.new(algorithm)
        while block := os.read(fd, 1 << 20):
            hasher.update(block)
        return hasher.hexdigest()
    finally:
        os.close(fd)
