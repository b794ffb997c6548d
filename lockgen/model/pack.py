"""A pack archive's index (`lockgen pack`): every member after the index, in archive order, with its size and
sha256; the platform whose artifacts it holds. Parsed and checked by `core.pack_rules`."""

from __future__ import annotations

from lockgen.model.base import Frozen

PACK_FORMAT = "lockgen-pack/1"


class PackMember(Frozen):
    """One member of the archive: its path inside it, its size in bytes and its sha256."""

    path: str
    size: int
    sha256: str


class PackIndex(Frozen):
    """The index member: the lock first, then the artifacts the lock pins for `platform`, sorted by path."""

    format: str = PACK_FORMAT
    platform: str
    members: tuple[PackMember, ...]
