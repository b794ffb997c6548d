"""Plans the solves of a stack: one `SolveRequest` per target and platform, virtual packages stated.

Virtual packages are decided by the target, never detected: `__linux`, `__unix`, `__glibc` (the
target's glibc), `__archspec` (the platform's baseline microarchitecture), and for GPU targets
`__cuda` (the newest CUDA the driver runs natively) and `__cuda_arch` (the compute capability,
as proposed for conda in CEP 46; build string is the arch name).
"""

from __future__ import annotations

from lockgen.core.gpu.arch_rules import (
    ARCH_SPECIFIC_PACKAGES,
    build_constraint,
    judge_build,
    no_build_error,
    window_constraints,
)
from lockgen.core.gpu.facts import arch_fact
from lockgen.model.facts import GpuFacts
from lockgen.model.plan import BuildVerdict, CandidateBuild, CudaWindow, SolveRequest, VirtualPackage
from lockgen.model.names import MACHINE_OF_PLATFORM
from lockgen.model.spec import StackSpec, Target

LINUX_KERNEL = "4.18"


def virtual_packages(
    facts: GpuFacts, target: Target, platform: str, window: CudaWindow | None
) -> tuple[VirtualPackage, ...]:
    """The virtual packages a target states for one platform, sorted by name."""
    packages = [
        VirtualPackage(name="__archspec", version="1", build=MACHINE_OF_PLATFORM[platform]),
        VirtualPackage(name="__glibc", version=target.glibc),
        VirtualPackage(name="__linux", version=LINUX_KERNEL),
        VirtualPackage(name="__unix", version="0"),
    ]
    if target.is_gpu:
        assert window is not None
        cc = arch_fact(facts, target.arch).compute_capability
        packages.append(VirtualPackage(name="__cuda", version=window.native))
        packages.append(VirtualPackage(name="__cuda_arch", version=cc, build=target.arch))
    return tuple(sorted(packages, key=lambda v: v.name))


def plan_request(
    facts: GpuFacts,
    spec: StackSpec,
    target: Target,
    platform: str,
    window: CudaWindow | None,
    candidates: list[CandidateBuild],
) -> SolveRequest:
    """The solve for one target on one platform: specs, arch constraints and stated virtual packages."""
    constraints: list[str] = list(window_constraints(window)) if window else []
    excluded: list[BuildVerdict] = []
    inferred: set[str] = set()
    requested = {d.name for d in spec.dependencies}
    for name in ARCH_SPECIFIC_PACKAGES:
        builds = [c for c in candidates if c.name == name]
        if not builds:
            continue
        verdicts = [judge_build(facts, target, window, platform, c, spec.unknown_releases) for c in builds]
        if name in requested and not any(v.allowed for v in verdicts):
            raise no_build_error(target, window, name, verdicts)
        constraints.append(build_constraint(name, verdicts))
        excluded.extend(v for v in verdicts if not v.allowed)
        inferred.update(v.inferred for v in verdicts if v.allowed and v.inferred)
    return SolveRequest(
        target=target.name,
        platform=platform,
        specs=tuple(d.match_spec() for d in spec.dependencies),
        constraints=tuple(constraints),
        virtual_packages=virtual_packages(facts, target, platform, window),
        excluded_builds=tuple(sorted(excluded, key=lambda v: v.reason)),
        inferred_builds=tuple(sorted(inferred)),
    )


def explain_exclusions(request: SolveRequest) -> str:
    """Why arch-specific builds were kept out of a solve, grouped by reason, for an unsatisfiable error's hint."""
    if not request.excluded_builds:
        return ""
    groups: dict[str, list[str]] = {}
    for verdict in request.excluded_builds:
        groups.setdefault(verdict.kind, []).append(verdict.reason)
    parts = [f"{len(reasons)} {kind} (e.g. {reasons[-1]})" for kind, reasons in sorted(groups.items())]
    return f"the arch rules kept out {len(request.excluded_builds)} builds: " + "; ".join(parts)
