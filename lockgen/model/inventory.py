"""The inventory: what an interpreter can say about its installed distributions without a network.

Gathered on the node by a stdlib-only probe run by the target interpreter, validated on the host. Paths
of RECORD rows stay as the RECORD writes them (relative to the folder holding the dist-info);
`dist_info` and `site_packages` are relative to the interpreter's `sys.prefix`.
"""

from __future__ import annotations

from typing import Literal

from lockgen.model.base import Frozen

INVENTORY_FORMAT = 1


class InstalledFile(Frozen):
    """One row of an installed RECORD: path, hex sha256 and size (None where the RECORD states none)."""

    path: str
    sha256: str | None = None
    size: int | None = None


class InstalledDistribution(Frozen):
    name: str
    version: str
    installer: str | None = None
    dist_info: str
    wheel_tags: tuple[str, ...] = ()
    record: tuple[InstalledFile, ...] = ()
    record_sha256: str | None = None
    scripts: tuple[str, ...] = ()
    direct_url: str | None = None  # the text of direct_url.json, as written

    @property
    def key(self) -> str:
        return f"{self.name} {self.version}"


class Inventory(Frozen):
    format: int = INVENTORY_FORMAT
    python: str
    platform: str
    site_packages: str
    distributions: tuple[InstalledDistribution, ...]


class RecordMismatch(Frozen):
    """An installed file whose bytes on disk are not what its RECORD row says (prefix-relative `path`)."""

    distribution: str
    path: str
    recorded: str
    problem: Literal["differs", "missing", "not a file", "outside the prefix"]
    found: str | None = None


class Rehash(Frozen):
    """The result of hashing every file the installed RECORDs list."""

    checked: int
    mismatches: tuple[RecordMismatch, ...]


class NodeInventory(Frozen):
    """What `lockgen freeze --inventory` writes on a node without network, for `lockgen pin` elsewhere:
    the interpreter's distributions and the re-hash of every file their RECORDs list."""

    format: int = INVENTORY_FORMAT
    inventory: Inventory
    rehash: Rehash
