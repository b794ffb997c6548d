"""What use cases return: plain frozen values the CLI renders as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TargetResult:
    """What resolving one target produced."""

    target: str
    arch: str
    path: Path
    written: bool
    unchanged: bool
    packages: dict[str, int]
    highlights: dict[str, dict[str, str]]


@dataclass(frozen=True)
class Drift:
    """Files of an environment missing, extra or changed against what it should hold."""

    missing: list[str]
    extra: list[str]
    modified: list[str]

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.modified)


@dataclass(frozen=True)
class StoreEntry:
    """One environment in the store."""

    path: Path
    lock_sha256: str
    environment_digest: str
    platform: str
