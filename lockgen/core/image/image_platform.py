"""Which image of an image index (OCI's, or Docker's manifest list) a lock's platform runs: the entry whose
`platform` (image-spec `image-index.md`) is `linux` and the platform's architecture, an arm64 entry with no
variant or `v8` before any other variant. Pure: the callers read the index, from a layout or a registry."""

from __future__ import annotations

import re
from typing import Any

from lockgen.errors import LockFormatError, UserError
from lockgen.model.json_values import JsonObject

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_PLAIN_VARIANTS = (None, "", "v8")  # what a plain `linux/arm64` (or amd64) means


def choose_manifest(index: Any, architecture: str, where: str) -> JsonObject:
    """The descriptor of `index`'s linux/`architecture` image (the first such entry, the plainest variant
    first), its digest checked, the rest as the index holds it; one error naming the platforms it has when it
    has none."""
    entries = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(entries, list):
        raise LockFormatError(f"{where} is an image index that lists no manifests", "pass a well-formed image or index")
    platforms = [(e, e.get("platform")) for e in entries if isinstance(e, dict)]
    found = [
        (e, p)
        for e, p in platforms
        if isinstance(p, dict) and p.get("os") == "linux" and p.get("architecture") == architecture
    ]
    if not found:
        have = sorted({f"{p.get('os')}/{p.get('architecture')}" for _, p in platforms if isinstance(p, dict)})
        raise UserError(
            f"{where} is an image index with no linux/{architecture} image (it has {', '.join(have) or 'no platform'})",
            "pass a base that has an image for the lock's platform, or export the lock's other --platform",
        )
    found.sort(key=lambda pair: pair[1].get("variant") not in _PLAIN_VARIANTS)  # stable: index order otherwise
    entry = found[0][0]
    if not isinstance(entry.get("digest"), str) or not _DIGEST.fullmatch(entry["digest"]):
        raise LockFormatError(f"{where}'s linux/{architecture} entry has no sha256 digest", "pass a well-formed index")
    return entry
