"""Values read from an OCI image: one layer's tar member (its path and whether it is a folder, and what it
removes when it is a whiteout)."""

from __future__ import annotations

from dataclasses import dataclass

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class LayerEntry:
    """One tar member of a layer: its path (relative, no leading `/`) and whether it is a folder."""

    path: str
    folder: bool

    @property
    def removes(self) -> str | None:
        """What a whiteout removes from the layers below: `D/NAME` for `D/.wh.NAME`, `D/` (the folder's content,
        the folder kept) for the opaque `D/.wh..wh..opq`; None for any other member."""
        folder, _, name = self.path.rpartition("/")
        if name == OPAQUE:
            return f"{folder}/"
        if name.startswith(WHITEOUT):
            return f"{folder}/{name.removeprefix(WHITEOUT)}".lstrip("/")
        return None
