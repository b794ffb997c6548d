"""GPU facts as data: compute capabilities, CUDA toolkits, drivers and PyTorch arch lists.

Loaded from `lockgen/data/gpu_facts.json`, which re-expresses the sourced matrix in
`shared/reference/gpu-matrix.json`; every entry keeps the sources it came from. The facts are plain frozen records:
a facts document is validated once, where it is read (`core.gpu.facts`, by pydantic over these very dataclasses,
unknown keys refused as `__pydantic_config__` says), and the packaged facts' checked value is kept and rebuilt
without a validator (`kept_inputs.gpu_facts`), so a resolve that finds them kept imports no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

_FORBID_EXTRA: dict[str, Any] = {"extra": "forbid"}  # pydantic's config for these records, where it validates them


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchFact:
    """What lockgen knows about one compute capability (e.g. sm90)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    name: str
    compute_capability: str
    family: str
    gpus: tuple[str, ...]
    first_cuda: str
    last_cuda: str | None
    tensor_cores: dict[str, bool | str | None]  # str: a qualified answer such as "partial"
    inferred: bool
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaUpdateFact:
    """A CUDA update release (12.6.3 is 12.6 Update 3) and the driver its installer bundles: information only,
    never a floor (a 12.6.x runtime asks the driver for CUDA 12.6, which the 12.6 GA driver runs natively)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    min_driver: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaToolkitFact:
    """A CUDA toolkit release (major.minor), the oldest Linux driver that runs it natively (Table 3's GA driver:
    the floor for every update of that minor), and the drivers its updates bundle (information)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    version: str
    min_driver: str
    sources: tuple[str, ...]
    updates: dict[str, CudaUpdateFact] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class MinorCompatFact:
    """The oldest driver that runs every minor release of one CUDA major (minor-version compatibility)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    major: str
    min_driver: str
    note: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CondaForgeArchList:
    """The arch list of conda-forge's pytorch builds for one CUDA version (and platform, when it differs;
    and build variant, e.g. `tegra`, told apart by an `arm-variant * tegra` dependency)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    cuda: str
    platform: str | None
    variant: str | None = None
    arch_list: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OfficialArchList:
    """The arch list of the official PyTorch builds (pytorch channel, PyPI, download.pytorch.org) for a release,
    CUDA variant and platform (linux-64's and linux-aarch64's builds differ)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    torch: str
    cuda_tag: str
    arch_list: str
    inferred: bool
    sources: tuple[str, ...]
    platform: str = "linux-64"


@dataclass(frozen=True, slots=True, kw_only=True)
class PypiWheelFact:
    """Which torch build a release publishes on pypi.org for a platform (`cpu` or a CUDA variant) and its arch list."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    torch: str
    platform: str
    variant: str
    arch_list: str | None
    inferred: bool
    sources: tuple[str, ...]
    toolkit: str | None = None  # the exact CUDA release it was built with (13.0.3), when its metadata says


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelArchList:
    """The arch list of the `pytorch` conda channel's builds for one CUDA variant, where it differs from the wheels'."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    cuda_tag: str
    arch_list: str
    inferred: bool
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TegraDriverFact:
    """A Jetson driver branch and the CUDA it runs natively: Tegra drivers (Jetson Linux's, e.g. Thor's `580.00`)
    are numbered on their own and are never read through the discrete-GPU Table 3."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    branch: str
    archs: tuple[str, ...]
    cuda: str
    release: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageCudaRule:
    """A rule the owner of a CUDA-versioned package states for the drivers it runs on, in place of the toolkit
    window: `minor-version-compatibility` (NVIDIA's cuda-bindings: X.y runs on any driver of major X at or above
    that major's minor-version compatibility floor)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    packages: tuple[str, ...]
    rule: str
    note: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LastDriverBranch:
    """The last discrete-GPU driver branch that supports some archs (R580 for Maxwell, Pascal and Volta)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    archs: tuple[str, ...]
    branch: str
    families: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuFacts:
    """All facts, indexed by name."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _FORBID_EXTRA

    archs: dict[str, ArchFact]
    cuda_toolkits: dict[str, CudaToolkitFact]
    minor_version_compat: dict[str, MinorCompatFact]
    conda_forge_pytorch_arch_lists: tuple[CondaForgeArchList, ...]
    pytorch_official_arch_lists: tuple[OfficialArchList, ...]
    pytorch_pypi_wheels: tuple[PypiWheelFact, ...]
    pytorch_channel_arch_lists: tuple[ChannelArchList, ...] = ()
    tegra_drivers: tuple[TegraDriverFact, ...] = ()
    package_cuda_rules: tuple[PackageCudaRule, ...] = ()
    last_driver_branches: tuple[LastDriverBranch, ...] = ()
    unverifiable: tuple[str, ...] = ()  # what could not be read from an authoritative source, and what follows
    valid_as_of: str = ""  # the date the facts' sources were last read
    origin: str = "lockgen/data/gpu_facts.json"  # the file they came from ($LOCKGEN_FACTS when set)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseEvidence:
    """What an index says of one torch release the facts do not list: the wheel read for a platform and
    the requirements its METADATA states (environment markers kept)."""

    torch: str
    platform: str
    wheel: str
    requires: tuple[str, ...]
    uploaded: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedRelease:
    """One torch release a PyTorch variant index serves for a platform: its newest patch and the wheel read."""

    torch: str  # 2.14.1+cu126
    release: str  # 2.14
    wheel: str  # "" when none is kept
    glibc: str | None = None  # the oldest glibc the kept wheel installs on
    excluded: str = ""  # why the index's builds of this release are out: `python` or `exclude-newer`
