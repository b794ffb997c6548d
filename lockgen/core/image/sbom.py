"""A CycloneDX 1.5 SBOM of a lock's packages for one platform, with package URLs, byte-stable: no
timestamp, and a serial number derived from the lock's sha256."""

from __future__ import annotations

import uuid
from typing import Any

from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.model.json_values import JsonObject, JsonValue
from lockgen.model.lock import Lock


def _purl(package: Any, platform: str) -> str:
    if package.manager == "pip":
        return f"pkg:pypi/{package.name}@{package.version}"
    parts = package.url.split("/")
    channel = parts[-3] if len(parts) >= 3 else "unknown"
    subdir = parts[-2] if len(parts) >= 2 else platform
    return f"pkg:conda/{channel}/{package.name}@{package.version}?build={package.build or ''}&subdir={subdir}"


def cyclonedx(lock: Lock, platform: str, lock_sha256: str, environment_digest: str) -> JsonObject:
    components: list[tuple[str, JsonObject]] = []  # (purl, component)
    for package in lock.packages_for(platform):
        hashes: list[JsonValue] = [{"alg": "SHA-256", "content": package.hash.sha256}] if package.hash.sha256 else []
        hashes += [{"alg": "MD5", "content": package.hash.md5}] if package.hash.md5 else []
        purl = _purl(package, platform)
        components.append(
            (
                purl,
                {
                    "type": "library",
                    "name": package.name,
                    "version": package.version,
                    "purl": purl,
                    "hashes": hashes,
                    "externalReferences": [{"type": "distribution", "url": package.url}],
                },
            )
        )
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "serialNumber": f"urn:uuid:{uuid.UUID(lock_sha256[:32])}",
        "metadata": {
            "component": {
                "type": "container",
                "name": f"{LockgenMeta(lock).stack} {LockgenMeta(lock).target}".strip(),
                "version": f"sha256:{environment_digest}",
            },
            "tools": {"components": [{"type": "application", "name": "lockgen"}]},
            "properties": [
                {"name": "lockgen:lock.sha256", "value": lock_sha256},
                {"name": "lockgen:platform", "value": platform},
            ],
        },
        "components": [component for _, component in sorted(components, key=lambda pair: pair[0])],
    }
