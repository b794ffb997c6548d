"""What `lockgen resolve` returns of each target, apart from the other use cases' results (`model/results.py`):
resolve loads this module alone, not the 17 frozen dataclasses of every command's results (8.5 ms of a resolve's
CPU to create, issue 43 item 4)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

LockState = Literal["wrote", "would write", "unchanged"]  # what resolve did with a target's lock


class TargetJson(TypedDict):
    """A `resolve --json` entry."""

    target: str
    arch: str
    path: str
    written: bool
    unchanged: bool
    packages: dict[str, int]
    highlights: dict[str, dict[str, str]]


@dataclass(frozen=True)
class TargetResult:
    """What resolving one target produced: its lock `state` (written, one a dry run would write, or
    the same bytes already there), and per platform the package counts and headline picks."""

    target: str
    arch: str
    path: Path
    state: LockState
    packages: dict[str, int]
    highlights: dict[str, dict[str, str]]

    @property
    def written(self) -> bool:
        return self.state == "wrote"

    @property
    def unchanged(self) -> bool:
        return self.state == "unchanged"

    def to_dict(self) -> TargetJson:
        """The `resolve --json` entry (its two booleans kept as they were: `written`, `unchanged`)."""
        return {
            "target": self.target,
            "arch": self.arch,
            "path": str(self.path),
            "written": self.written,
            "unchanged": self.unchanged,
            "packages": self.packages,
            "highlights": self.highlights,
        }
