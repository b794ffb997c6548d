"""Arch and driver rules for torch wheels from PyPI, from the facts.

Before resolving: which torch releases a target may take from pypi.org. Each release publishes one
build per platform there (a CUDA variant on x86_64, CPU-only on aarch64 before 2.11); a release is
admitted when that build's CUDA lies in the target's window and its arch list has native kernels
for the arch (PTX-only with `allow-ptx-jit`). The refused releases become a uv constraint.
Strict mode is strict by minor: a cu130 wheel built with CUDA 13.0.3 runs natively on 13.0 GA's driver
(580.65.06), since a 13.0.x runtime asks the driver for CUDA 13.0 and NVIDIA's Table 3 lists one GA
driver per minor release; the drivers bundled with updates (13.0.2's 580.95.05) are information only.
After resolving: the chosen wheel's CUDA is read from what came with it (the `cuda-toolkit` meta-package
of torch 2.13 on, the `nvidia-cuda-runtime` wheel's version before, or a `+cuXYZ` local version) and judged again, so an
index that serves another
variant than the facts say cannot slip a CPU-only or kernel-less torch into a GPU lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lockgen.core.gpu.arch_rules import coverage
from lockgen.core.gpu.explain import PYPI_SOURCE, Candidate, pinned_out
from lockgen.core.gpu.facts import arch_fact, is_tegra, minor_compat_ceiling
from lockgen.core.gpu.versions import as_tuple, major_minor
from lockgen.model.names import normalize
from lockgen.errors import TargetError
from lockgen.model.facts import GpuFacts
from lockgen.model.lock import LockedPackage
from lockgen.model.plan import CudaWindow
from lockgen.model.spec import Target

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# conda names of Python packages whose PyPI project is named differently (after PEP 503 normalisation)
CONDA_TO_PYPI = {
    "pytorch": "torch",
    "pytorch-cpu": "torch",
    "pytorch-gpu": "torch",
    "libtorch": "torch",
    "py-opencv": "opencv-python",
    "matplotlib-base": "matplotlib",
    "pyqt": "pyqt5",
}


@dataclass(frozen=True)
class TorchAdmission:
    allowed: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]  # (release, reason)

    def constraint(self, known: tuple[str, ...]) -> str:
        """One uv constraint line admitting exactly the allowed releases: every other minor release
        between the oldest and newest the facts know is excluded, unknown ones included."""
        if not known:
            return ""
        low, high = min((major_minor(k) for k in known)), max((major_minor(k) for k in known))
        allowed = {major_minor(a) for a in self.allowed}
        excluded = [
            f"!={major}.{minor}.*"
            for major in range(low[0], high[0] + 1)
            for minor in range(low[1] if major == low[0] else 0, (high[1] if major == high[0] else 99) + 1)
            if (major, minor) not in allowed
        ]
        return "torch" + ",".join([f">={low[0]}.{low[1]}", f"<{high[0]}.{high[1] + 1}"] + excluded)


def torch_admission(
    facts: GpuFacts,
    target: Target,
    platform: str,
    window: CudaWindow | None,
    unknown_refused: tuple[tuple[str, str], ...] = (),
) -> TorchAdmission:
    """Which torch releases on pypi.org a target may take on a platform (`facts` may hold releases inferred
    from the index; `unknown_refused` are newer releases no evidence admitted)."""
    allowed: list[str] = []
    refused: list[tuple[str, str]] = []
    for wheel in sorted(
        (w for w in facts.pytorch_pypi_wheels if w.platform == platform), key=lambda w: as_tuple(w.torch)
    ):
        ok, _, reason = judge_wheel(facts, target, window, wheel.variant, wheel.arch_list)
        inferred = (
            " (inferred)" if wheel.inferred and any(s.startswith("inferred by lockgen") for s in wheel.sources) else ""
        )
        if ok:
            allowed.append(wheel.torch)
        else:
            refused.append((wheel.torch, f"torch {wheel.torch} on PyPI ({platform}){inferred}: {reason}"))
    return TorchAdmission(tuple(allowed), tuple(refused) + unknown_refused)


def known_releases(
    facts: GpuFacts, platform: str, unknown_refused: tuple[tuple[str, str], ...] = ()
) -> tuple[str, ...]:
    return tuple(w.torch for w in facts.pytorch_pypi_wheels if w.platform == platform) + tuple(
        r for r, _ in unknown_refused
    )


def judge_wheel(
    facts: GpuFacts, target: Target, window: CudaWindow | None, variant: str, arch_list: str | None
) -> tuple[bool, str, str]:
    """(admitted, the rule that decided, why) for one torch build of a variant on a GPU target. Rules:
    `cpu-build`, `driver-floor` (its CUDA is newer than the driver runs), `arch-list-unknown`, `ptx-only`,
    `no-kernels` (also a CUDA past the arch's last one that the driver would run: a V100 on R580 and cu130 has no
    sm_70 code, whatever its driver), and `native-kernels` (admitted) or `ptx-jit` (admitted with allow-ptx-jit)."""
    if not target.is_gpu:
        return True, "cpu-target", "any build runs on a CPU"
    assert window is not None
    if variant == "cpu":
        return False, "cpu-build", "a CPU-only build"
    cuda = f"{variant[2:-1]}.{variant[-1]}"
    arch = arch_fact(facts, target.arch)
    if arch.last_cuda is not None and major_minor(arch.last_cuda) < major_minor(cuda) <= major_minor(
        _driver_ceiling(facts, target, window)
    ):
        listed = (
            f": {variant} ({arch_list}) has no sm_{arch.compute_capability.replace('.', '')} code"
            if arch_list is not None
            else ""
        )
        return (
            False,
            "no-kernels",
            f"built with CUDA {cuda}, which no longer targets {target.arch} (CUDA {arch.last_cuda} is the last "
            f"that does){listed}; driver {target.driver} would run it",
        )
    if major_minor(cuda) > major_minor(window.high):
        toolkit = facts.cuda_toolkits.get(cuda)
        needs = f" (needs driver >= {toolkit.min_driver})" if toolkit else ""
        return (
            False,
            "driver-floor",
            f"built with CUDA {cuda}{needs}, newer than the CUDA {window.high} driver {target.driver} allows",
        )
    if arch_list is None:
        return False, "arch-list-unknown", f"{variant} build with no known arch list"
    covered = coverage(arch_list, arch_fact(facts, target.arch).compute_capability)
    if covered == "sass":
        return True, "native-kernels", f"{variant}: {arch_list}"
    if covered == "ptx" and target.allow_ptx_jit:
        return True, "ptx-jit", f"{variant}: {arch_list}"
    what = "reaches it only through PTX JIT" if covered == "ptx" else "has no kernels for it"
    return False, "ptx-only" if covered == "ptx" else "no-kernels", f"{variant} ({arch_list}) {what} ({target.arch})"


def _driver_ceiling(facts: GpuFacts, target: Target, window: CudaWindow) -> str:
    """The newest CUDA the target's driver runs (natively, or through minor-version compatibility in `minor` mode),
    whatever its arch: the window before the arch's last CUDA caps it."""
    assert target.driver is not None
    if target.cuda_compat == "minor" and not is_tegra(facts, target.arch):
        return minor_compat_ceiling(facts, target.driver) or window.native
    return window.native


def _kernels(facts: GpuFacts, target: Target, arch_list: str) -> bool:
    covered = coverage(arch_list, arch_fact(facts, target.arch).compute_capability)
    return covered == "sass" or (covered == "ptx" and target.allow_ptx_jit)


def _newest_variant_build(
    facts: GpuFacts, target: Target, platform: str, high: str, specifier: SpecifierSet | None
) -> tuple[str, str] | None:
    """(release, variant) of the newest build PyTorch's variant indexes have on the platform (their lists: the
    official ones, and PyPI's wheels, which they promote) whose CUDA is at most `high` (and the arch's last) and
    whose list has the arch's kernels, the stack's pin allowing it."""
    arch = arch_fact(facts, target.arch)
    lists = {(o.torch, o.cuda_tag): o.arch_list for o in facts.pytorch_official_arch_lists if o.platform == platform}
    lists.update(
        {
            (w.torch, w.variant): w.arch_list
            for w in facts.pytorch_pypi_wheels
            if w.platform == platform and w.variant.startswith("cu") and w.arch_list
        }
    )
    fitting = [
        (release, variant)
        for (release, variant), arch_list in lists.items()
        if major_minor(f"{variant[2:-1]}.{variant[-1]}") <= min(major_minor(high), major_minor(arch.last_cuda or high))
        and _kernels(facts, target, arch_list)
        and not pinned_out(specifier, release)
    ]
    return max(fitting, key=lambda b: (as_tuple(b[0]), as_tuple(b[1][2:])), default=None)


def working_steps(
    facts: GpuFacts, target: Target, window: CudaWindow, platform: str, specifier: SpecifierSet | None
) -> list[str]:
    """What would give a GPU target a torch when no source of the stack fits, each step one that works by the
    facts: a variant index of PyTorch's with a build its driver runs, that under minor-version compatibility, a
    newer driver for PyPI's newest build with its kernels; for a Jetson module, the CUDA a compatibility package
    gives it (its driver's own numbering has no floors to raise to)."""
    assert target.driver is not None
    steps = []
    tegra = is_tegra(
        facts, target.arch
    )  # PyTorch's aarch64 builds are SBSA ones: a Jetson's own driver runs none before CUDA 13
    within = None if tegra else _newest_variant_build(facts, target, platform, window.high, specifier)
    if within is not None:
        steps.append(
            f"PyTorch's index has torch {within[0]} {within[1]} for {platform} with {target.arch} kernels: add "
            f'`torch-variants = ["{within[1]}"]` to [pypi-options]'
        )
    if within is None and not tegra and target.cuda_compat == "strict" and target.cuda is None:
        ceiling = minor_compat_ceiling(facts, target.driver)
        compat = _newest_variant_build(facts, target, platform, ceiling, specifier) if ceiling else None
        if compat is not None:
            steps.append(
                f"with minor-version compatibility (limited features, no PTX JIT) PyTorch's torch {compat[0]} "
                f'{compat[1]} runs on driver {target.driver}: set `cuda-compat = "minor"` and `torch-variants = '
                f'["{compat[1]}"]`'
            )

    def cuda_of(variant: str) -> str:
        return f"{variant[2:-1]}.{variant[-1]}"

    last = next((int(b.branch) for b in facts.last_driver_branches if target.arch in b.archs), None)
    beyond = [
        w
        for w in facts.pytorch_pypi_wheels
        if w.platform == platform
        and w.variant.startswith("cu")
        and w.arch_list
        and _kernels(facts, target, w.arch_list)
        and not pinned_out(specifier, w.torch)
        and major_minor(cuda_of(w.variant)) > major_minor(window.high)
        and cuda_of(w.variant) in facts.cuda_toolkits
        and (last is None or int(facts.cuda_toolkits[cuda_of(w.variant)].min_driver.split(".")[0]) <= last)
    ]
    nearest = min(
        beyond, key=lambda w: (major_minor(cuda_of(w.variant)), tuple(-n for n in as_tuple(w.torch))), default=None
    )  # the least CUDA, its newest release
    if nearest is not None:
        cuda = cuda_of(nearest.variant)
        if tegra and target.cuda is None:
            steps.append(
                f"if the module runs CUDA {cuda} or newer through NVIDIA's CUDA compatibility package, state it "
                f'(`cuda = "{cuda}"` in the target): PyPI\'s torch {nearest.torch} ({nearest.variant}) has '
                f"{target.arch} kernels"
            )
        elif not tegra:
            steps.append(
                f"raise `driver` to >= {facts.cuda_toolkits[cuda].min_driver} (CUDA {cuda}): PyPI's torch "
                f"{nearest.torch} ({nearest.variant}) has {target.arch} kernels"
            )
    return steps


def no_torch_error(
    target: Target,
    platform: str,
    candidates: Sequence[Candidate],
    specifier: SpecifierSet | None,
    unknown_refused: tuple[tuple[str, str], ...] = (),
    steps: Sequence[str] = (),
) -> TargetError:
    """No torch source fits: why PyPI's releases are out (those the stack's pin asks for, else the newest two),
    releases newer than the facts the evidence refused, each variant index's newest, and the `steps` that would
    work (`working_steps`), else the generic ones."""
    pypi = sorted(
        (c for c in candidates if c.source == PYPI_SOURCE and c.rule != "pin"), key=lambda c: as_tuple(c.release)
    )
    named = [c for c in pypi if specifier is not None and not pinned_out(specifier, c.release)]
    hints = [f"torch {c.release} on PyPI ({platform}): {c.reason}" for c in (named or pypi)[-2:]]
    hints += [reason for _, reason in unknown_refused[-1:]]
    others = [c for c in candidates if c.source != PYPI_SOURCE]
    for variant in dict.fromkeys(c.variant for c in others):
        newest = max((c for c in others if c.variant == variant), key=lambda c: as_tuple(c.release))
        hints.append(f"torch {newest.release} from {variant} @ {newest.source}: {newest.reason}")
    if others:
        hints.append("the stack's torch sources are PyPI and " + ", ".join(dict.fromkeys(c.variant for c in others)))
    if not pypi:
        hints.append("the stack's index serves no torch build the facts know for this platform and Python")
    hints += steps
    if not steps and any(c.rule == "driver-floor" for c in pypi):
        hints.append('raise the target\'s driver or set `cuda-compat = "minor"`')
    where = "any of the stack's torch sources" if others else "PyPI"
    return TargetError(
        f"target `{target.name}`: no torch release on {where} fits {target.arch} with driver {target.driver} on "
        f"{platform}",
        "; ".join(hints),
    )


def wheel_cuda(packages: list[LockedPackage]) -> tuple[str | None, str | None]:
    """(torch version, CUDA major.minor of its build or None for a CPU-only build), from a resolution."""
    by_name = {normalize(p.name): p for p in packages}
    torch = by_name.get("torch")
    if torch is None:
        return None, None
    local = re.search(r"\+cu(\d+)(\d)\Z", torch.version)
    if local:
        return torch.version, f"{int(local.group(1))}.{local.group(2)}"
    toolkit = resolved_toolkit(packages)
    if toolkit is not None:
        return torch.version, "{}.{}".format(*major_minor(toolkit))
    for name, package in by_name.items():
        if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", name):
            return torch.version, "{}.{}".format(*major_minor(package.version))
    return torch.version, None


def resolved_toolkit(packages: list[LockedPackage]) -> str | None:
    """The exact CUDA release a resolution's torch was built with, from the `cuda-toolkit` meta-package it
    pulls (torch 2.11 on: `cuda-toolkit[cudart,...]==13.0.2`; the file is versioned 13.0.2.0)."""
    toolkit = next((p for p in packages if normalize(p.name) == "cuda-toolkit"), None)
    return ".".join(str(n) for n in as_tuple(toolkit.version)[:3]) if toolkit else None


def check_resolved_torch(
    facts: GpuFacts,
    target: Target,
    platform: str,
    window: CudaWindow | None,
    packages: list[LockedPackage],
    arch_lists: tuple[tuple[str, str], ...] = (),
) -> None:
    """Refuses a resolution whose torch would not use the target's GPU natively (`arch_lists`: the lists a
    variant index's releases were admitted with, by release, when torch was routed to one)."""
    version, cuda = wheel_cuda(packages)
    if version is None or not target.is_gpu:
        return
    release = "{}.{}".format(*major_minor(version))
    if cuda is None:
        raise TargetError(
            f"target `{target.name}` on {platform} would get torch {version}, a CPU-only build",
            "pin a torch release with a CUDA build for this platform, or add the PyTorch wheel index",
        )
    variant = f"cu{cuda.replace('.', '')}"
    routed = dict(arch_lists).get(release) if re.search(rf"\+{variant}\Z", version) else None
    arch_list = routed or next(
        (
            w.arch_list
            for w in facts.pytorch_pypi_wheels
            if w.torch == release and w.platform == platform and w.variant == variant
        ),
        None,
    )
    if arch_list is None:
        arch_list = next(
            (
                o.arch_list
                for o in facts.pytorch_official_arch_lists
                if o.torch == release and o.cuda_tag == variant and o.platform == platform
            ),
            None,
        )
    ok, _, reason = judge_wheel(facts, target, window, variant, arch_list)
    if not ok:
        raise TargetError(
            f"target `{target.name}` on {platform} would get torch {version}: {reason}",
            "constrain torch in [pypi-dependencies] or change the target's driver",
        )
