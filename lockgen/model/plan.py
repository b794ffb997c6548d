"""Plans: what one solve (target x platform) is asked to do, stated explicitly.

These records are core's own computation (the plan of a stack already validated), never input: plain frozen
dataclasses, so a resolve builds no pydantic validator for them (validation belongs at the boundary). Fields are
given by keyword, as the models took them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: a plan is made before any lock is read
    from lockgen.model.lock import LockedPackage
    from lockgen.model.spec import Target


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualPackage:
    """A virtual package stated for a target, never detected from the host."""

    name: str
    version: str
    build: str = "0"

    def text(self) -> str:
        return f"{self.name}={self.version}={self.build}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaWindow:
    """The CUDA toolkit versions a target may use: at least `low`, at most `high` (major.minor)."""

    low: str
    high: str
    native: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateBuild:
    """A build of an arch-specific package (pytorch, libtorch) as the channel lists it."""

    name: str
    version: str
    build: str
    channel: str  # the package URL the lock would record: tells the build's origin
    depends: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildVerdict:
    """Whether an arch-specific build may be used on a target, and why."""

    candidate: CandidateBuild
    allowed: bool
    kind: str  # native | ptx | newer-cuda | not-pinned | no-kernels | unknown-arch-list | cpu-build | cuda-build
    cuda: str | None
    reason: str
    inferred: str = ""  # why its arch list is inferred (a release newer than the facts), empty when a fact states it


@dataclass(frozen=True, slots=True, kw_only=True)
class SolveRequest:
    """Everything a solver needs for one target on one platform."""

    target: str
    platform: str
    specs: tuple[str, ...]
    constraints: tuple[str, ...]
    virtual_packages: tuple[VirtualPackage, ...]
    excluded_builds: tuple[BuildVerdict, ...] = ()
    inferred_builds: tuple[str, ...] = ()  # admitted builds of releases newer than the facts, with why

    @property
    def label(self) -> str:
        return f"target `{self.target}` on {self.platform}"


@dataclass(frozen=True)
class SolvedRequest:
    """One solve request of a target with what conda solved for it (nothing for a stack without conda
    dependencies): what the PyPI layer resolves on top of."""

    target: Target
    window: CudaWindow | None
    request: SolveRequest
    packages: list[LockedPackage]
