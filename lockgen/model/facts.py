"""GPU facts as data: compute capabilities, CUDA toolkits, drivers and PyTorch arch lists.

Loaded from `lockgen/data/gpu_facts.json`, which re-expresses the sourced matrix in
`shared/reference/gpu-matrix.json`; every entry keeps the sources it came from.
"""

from __future__ import annotations

from lockgen.model.base import Frozen


class ArchFact(Frozen):
    """What lockgen knows about one compute capability (e.g. sm90)."""

    name: str
    compute_capability: str
    family: str
    gpus: tuple[str, ...]
    first_cuda: str
    last_cuda: str | None
    tensor_cores: dict[str, bool | str | None]  # str: a qualified answer such as "partial"
    inferred: bool
    sources: tuple[str, ...]


class CudaUpdateFact(Frozen):
    """A CUDA update release (12.6.3 is 12.6 Update 3) and the driver its installer bundles: information only,
    never a floor (a 12.6.x runtime asks the driver for CUDA 12.6, which the 12.6 GA driver runs natively)."""

    min_driver: str
    sources: tuple[str, ...]


class CudaToolkitFact(Frozen):
    """A CUDA toolkit release (major.minor), the oldest Linux driver that runs it natively (Table 3's GA driver:
    the floor for every update of that minor), and the drivers its updates bundle (information)."""

    version: str
    min_driver: str
    sources: tuple[str, ...]
    updates: dict[str, CudaUpdateFact] = {}


class MinorCompatFact(Frozen):
    """The oldest driver that runs every minor release of one CUDA major (minor-version compatibility)."""

    major: str
    min_driver: str
    note: str
    sources: tuple[str, ...]


class CondaForgeArchList(Frozen):
    """The arch list of conda-forge's pytorch builds for one CUDA version (and platform, when it differs;
    and build variant, e.g. `tegra`, told apart by an `arm-variant * tegra` dependency)."""

    cuda: str
    platform: str | None
    variant: str | None = None
    arch_list: str
    sources: tuple[str, ...]


class OfficialArchList(Frozen):
    """The arch list of the official PyTorch builds (pytorch channel, PyPI, download.pytorch.org) for a release,
    CUDA variant and platform (linux-64's and linux-aarch64's builds differ)."""

    torch: str
    cuda_tag: str
    arch_list: str
    inferred: bool
    sources: tuple[str, ...]
    platform: str = "linux-64"


class PypiWheelFact(Frozen):
    """Which torch build a release publishes on pypi.org for a platform (`cpu` or a CUDA variant) and its arch list."""

    torch: str
    platform: str
    variant: str
    arch_list: str | None
    inferred: bool
    sources: tuple[str, ...]
    toolkit: str | None = None  # the exact CUDA release it was built with (13.0.3), when its metadata says


class ChannelArchList(Frozen):
    """The arch list of the `pytorch` conda channel's builds for one CUDA variant, where it differs from the wheels'."""

    cuda_tag: str
    arch_list: str
    inferred: bool
    sources: tuple[str, ...]


class TegraDriverFact(Frozen):
    """A Jetson driver branch and the CUDA it runs natively: Tegra drivers (Jetson Linux's, e.g. Thor's `580.00`)
    are numbered on their own and are never read through the discrete-GPU Table 3."""

    branch: str
    archs: tuple[str, ...]
    cuda: str
    release: str
    sources: tuple[str, ...]


class PackageCudaRule(Frozen):
    """A rule the owner of a CUDA-versioned package states for the drivers it runs on, in place of the toolkit
    window: `minor-version-compatibility` (NVIDIA's cuda-bindings: X.y runs on any driver of major X at or above
    that major's minor-version compatibility floor)."""

    packages: tuple[str, ...]
    rule: str
    note: str
    sources: tuple[str, ...]


class LastDriverBranch(Frozen):
    """The last discrete-GPU driver branch that supports some archs (R580 for Maxwell, Pascal and Volta)."""

    archs: tuple[str, ...]
    branch: str
    families: str
    sources: tuple[str, ...]


class GpuFacts(Frozen):
    """All facts, indexed by name."""

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


class ReleaseEvidence(Frozen):
    """What an index says of one torch release the facts do not list: the wheel read for a platform and
    the requirements its METADATA states (environment markers kept)."""

    torch: str
    platform: str
    wheel: str
    requires: tuple[str, ...]
    uploaded: str | None = None


class ServedRelease(Frozen):
    """One torch release a PyTorch variant index serves for a platform: its newest patch and the wheel read."""

    torch: str  # 2.14.1+cu126
    release: str  # 2.14
    wheel: str  # "" when none is kept
    glibc: str | None = None  # the oldest glibc the kept wheel installs on
    excluded: str = ""  # why the index's builds of this release are out: `python` or `exclude-newer`
