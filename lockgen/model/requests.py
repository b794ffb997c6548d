"""What a command asks of a use case, as values: the environment a command names (a prefix, an
interpreter, an image), built once by the CLI from its flags, so the one-of rule is checked once there
and a use case takes one of three shapes instead of three optional arguments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Prefix:
    """An environment's folder."""

    path: Path


@dataclass(frozen=True)
class Python:
    """An interpreter, whose environment is meant."""

    interpreter: str


@dataclass(frozen=True)
class Image:
    """The environment inside an image: an OCI layout folder or `docker://REF`; `insecure` for a plain-HTTP or
    self-signed registry; `prefix` where in it the environment is (None: the one its config runs)."""

    source: str
    insecure: bool = False
    prefix: str | None = None


CheckTarget = Prefix | Python | Image  # what `lockgen check` checks
Environment = Prefix | Python | Image  # what `lockgen verify` certifies



@dataclass(frozen=True)
class CheckRequest:
    """`lockgen check`: the environment, and with `lock` the lock it must be (conformance; `manifests` a bundle
    to take the packages' manifests from, `platform` which of the lock's, `allow_foreign` files accepted by
    name); without, its drift from what it recorded. `full` re-hashes every file."""

    target: CheckTarget
    lock: Path | None = None
    manifests: Path | None = None
    platform: str | None = None
    allow_foreign: tuple[str, ...] = ()
    full: bool = False
