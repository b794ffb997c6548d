"""The CUDA components of a GPU target's PyPI layer held within its CUDA window, and what the lock says of them.

NVIDIA versions a set of its wheels by the CUDA release they belong to (`nvidia-nvjitlink` 13.0.88 is CUDA 13.0's,
13.5.37 CUDA 13.5's; `cuda-bindings` 13.5.0 binds CUDA 13.5's API): the runtime, NVRTC, nvJitLink, CUPTI, NVTX,
the compiler parts, cuda-bindings and cuda-toolkit. torch pins some of them exactly (through `cuda-toolkit==13.0.3`)
and others not at all (the `nvidia-cusparse` wheel asks for any `nvidia-nvjitlink`), so an unconstrained solve
took CUDA 13.5's nvJitLink and cuda-bindings into a lock for a CUDA 13.0 driver. A newer minor of the same major
runs there only through minor-version compatibility (NVIDIA's CUDA Compatibility guide: limited features, no PTX
JIT), which a `strict` target has not accepted, and for a `minor` one only minors the facts know have a floor. So
every such name is constrained to the window's newest minor (`nvidia-nvjitlink<13.1`, with its `-cuXX` name too),
but where the package's owner states another rule (the facts' `package_cuda_rules`): NVIDIA's cuda-python says
cuda-bindings X.y runs on any driver of major X at or above that major's minor-version compatibility floor (12.x:
525.60.13), so on a driver past that floor it is held to the major only (`cuda-bindings<13` on R570, where torch
2.10.0+cu128 pins `cuda-bindings==12.9.4`). A Jetson driver is numbered on its own and keeps the window.
Libraries versioned on their own (cuBLAS 13.1 ships with CUDA 13.0 Update 2) are pinned by the toolkit that names
them and are not judged here. triton bundles its own ptxas, whose CUDA no metadata states: the lock says so.
"""

from __future__ import annotations

from lockgen.core.gpu.facts import is_tegra
from lockgen.core.gpu.versions import as_tuple, major_minor
from lockgen.model.facts import GpuFacts
from lockgen.model.lock import LockedPackage
from lockgen.model.names import normalize
from lockgen.model.plan import CudaWindow
from lockgen.model.spec import Target

CUDA_VERSIONED = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-cupti",
    "nvidia-nvjitlink",
    "nvidia-nvtx",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-cccl",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-cuda-sanitizer-api",
    "nvidia-cuda-opencl",
    "nvidia-cuda-cuobjdump",
    "nvidia-cuda-nvdisasm",
    "cuda-bindings",
    "cuda-toolkit",
)


def _names(window: CudaWindow) -> list[str]:
    """The CUDA-versioned names of the window's newest major (older majors' wheels lie below it anyway)."""
    major = major_minor(window.high)[0]
    return [
        name + suffix
        for name in CUDA_VERSIONED
        for suffix in ("", f"-cu{major}")
        if not (suffix and name.startswith("cuda-"))
    ]


def by_owner_rule(facts: GpuFacts, target: Target, window: CudaWindow) -> dict[str, str]:
    """{name: the driver floor} of the window's CUDA-versioned names whose owner's rule (minor-version
    compatibility) admits any minor of the window's major on this target's driver; empty for a Jetson target."""
    assert target.driver is not None
    compat = facts.minor_version_compat.get(str(major_minor(window.high)[0]))
    if compat is None or is_tegra(facts, target.arch) or as_tuple(target.driver) < as_tuple(compat.min_driver):
        return {}
    ruled = {
        normalize(name)
        for rule in facts.package_cuda_rules
        if rule.rule == "minor-version-compatibility"
        for name in rule.packages
    }
    return {name: compat.min_driver for name in _names(window) if name in ruled}


def window_constraints(
    window: CudaWindow, held: frozenset[str] = frozenset(), ruled: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """uv constraints holding every CUDA-versioned wheel at or below the window's newest CUDA minor, those its
    owner's rule admits (`ruled`, from `by_owner_rule`) at or below its major only (`held`: names a base holds at its
    build, which stay as they are and are judged in the lock instead)."""
    major, minor = major_minor(window.high)
    return tuple(
        f"{name}<{major + 1}" if name in ruled else f"{name}<{major}.{minor + 1}"
        for name in _names(window)
        if name not in held
    )


def components_text(
    window: CudaWindow,
    packages: list[LockedPackage],
    driver: str,
    compat_floor: str | None,
    ruled: dict[str, str] | None = None,
) -> str:
    """What the lock records: the CUDA-versioned wheels held within the window, each one above it with the rule
    that admits it (its owner's, `ruled` from `by_owner_rule`; minor-version compatibility for a base's held build)
    or that none does, and triton's own ptxas. `compat_floor` is the driver minor-version compatibility needs for
    the window's major (NVIDIA's Table 1), None when the facts have none."""
    names, high = set(_names(window)), major_minor(window.high)
    within, above = [], []
    for package in sorted(packages, key=lambda p: normalize(p.name)):
        if normalize(package.name) not in names:
            continue
        cuda = major_minor(package.version)
        floor = (ruled or {}).get(normalize(package.name))
        if cuda <= high:
            within.append(f"{package.name} {package.version}")
        elif floor is not None and cuda[0] == high[0]:
            above.append(
                f"{package.name} {package.version} (CUDA {cuda[0]}.{cuda[1]}): admitted by its owner's rule, "
                f"{cuda[0]}.x runs on any driver >= {floor} (driver {driver})"
            )
        elif compat_floor is not None and as_tuple(driver) >= as_tuple(compat_floor):
            above.append(
                f"{package.name} {package.version} (CUDA {cuda[0]}.{cuda[1]}, a held build): admitted by "
                f"minor-version compatibility, driver {driver} >= {compat_floor} (no PTX JIT)"
            )
        else:
            above.append(
                f"{package.name} {package.version} (CUDA {cuda[0]}.{cuda[1]}, a held build): beyond the window, "
                "no compatibility rule admits it"
            )
    parts = [f"within CUDA <= {window.high} (the window): {', '.join(within)}"] if within else []
    parts += above
    triton = next((p for p in packages if normalize(p.name) in ("triton", "pytorch-triton")), None)
    if triton is not None:
        parts.append(f"{triton.name} {triton.version} bundles its own ptxas, whose CUDA no metadata states: not judged")
    return "; ".join(parts)
