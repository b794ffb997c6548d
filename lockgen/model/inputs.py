"""The files a command reads, each read once and handed down as a value: a lock's bytes with their sha256
(`LockBytes`; parsed, it is a `model.lock.LoadedLock`), and a stack (`LoadedStack`: its text, its spec and its
team base, located once). Plain frozen dataclasses without pydantic, so a command that only hashes a lock (a
repeated `check --lock`, a found-unchanged `materialize`) loads no model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the lock's records and the spec's models, imported by whoever builds these values
    from lockgen.model.lock import LoadedLock
    from lockgen.model.spec import StackSpec

BaseKind = Literal["stack", "lock", "image"]


@dataclass(frozen=True)
class LockBytes:
    """A lock file's bytes as read once for a command, and their sha256 (what a kept verdict, a manifest and a
    certificate bind to), before and unless its entries are needed. `source` names the file in messages."""

    source: str
    data: bytes
    sha256: str


@dataclass(frozen=True)
class BundleBytes:
    """A manifests bundle (`--manifests FILE`) as read once for a command: a check of an image reads the
    manifests before the pull, and the conformance after it parses these same bytes and binds a kept verdict to
    their sha256."""

    source: Path
    data: bytes


@dataclass(frozen=True)
class StackBase:
    """Where a team stack's base is (`[stack] extends`, as written), located once: a base stack.toml (`kind`
    "stack", `path` the base's stack file), a lock (`path` the lock), or lockgen's image of a base (`path` the
    copy of the lock it carries, kept beside the team's locks; `image` the registry reference or layout folder)."""

    extends: str
    kind: BaseKind
    path: Path
    image: str | Path | None = None

    @property
    def is_lock(self) -> bool:
        """Whether the base is a lock (its own, or the one its image carries) rather than a stack."""
        return self.kind != "stack"


@dataclass(frozen=True)
class LoadedStack:
    """A stack file read once for a command: its path and text, its parsed spec, its base located once (None
    for a stack that extends none), and, when that base is a lock, the lock read once (its entries, bytes and
    sha256: what the spec took its target from and what resolve holds)."""

    path: Path
    text: str
    spec: StackSpec
    base: StackBase | None = None
    base_lock: LoadedLock | None = None
