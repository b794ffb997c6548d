"""Arch and driver rules: which CUDA a target may use and which arch-specific builds have its kernels.

A target names its arch and its fleet's driver. From the facts:
- the CUDA window: at least the first toolkit that targets the arch, at most the last that still
  does, and at most what the driver runs (natively in `strict` mode, through minor-version
  compatibility in `minor` mode); a `cuda` pin narrows it to one release. A Jetson (Tegra) driver is read
  by its own numbering (the facts' Tegra branches: Thor's `580.00` runs CUDA 13.0, Orin's `540.4.0` of
  JetPack 6.1/6.2 CUDA 12.6, a JetPack 5 module's Jetson Linux `35.x` CUDA 11.4), or from the `cuda` the target
  states (a module with NVIDIA's CUDA upgradable package); a driver of neither is refused, and Table 3's dGPU
  floors never judge it;
- a discrete GPU's driver must be of a branch that still supports its arch (the facts' `last_driver_branches`:
  R580 is the last for Maxwell, Pascal and Volta, so a V100 on 590.44.01 gets no lock);
- for packages whose kernels are compiled per arch (pytorch, libtorch), a build is admitted only if
  its CUDA lies in the window and its arch list has native kernels (SASS) for the target; a build
  that reaches the arch only through PTX JIT is admitted when the target says `allow-ptx-jit`.
  The arch list comes from the build's origin: official PyTorch lists for the `pytorch` channel,
  conda-forge's lists otherwise.
"""

from __future__ import annotations

import re

from lockgen.core.gpu.facts import arch_fact, is_tegra, minor_compat_ceiling, target_native_cuda
from lockgen.core.gpu.versions import as_tuple, major_minor, mm_text
from lockgen.errors import TargetError
from lockgen.model.facts import GpuFacts, LastDriverBranch
from lockgen.model.plan import BuildVerdict, CandidateBuild, CudaWindow
from lockgen.model.spec import Target

ARCH_SPECIFIC_PACKAGES = ("pytorch", "libtorch")
CUDA_VERSION_PACKAGES = ("cuda-version", "cudatoolkit", "pytorch-cuda")

_BUILD_CUDA = re.compile(r"cuda(\d+)\.(\d+)|cuda(\d{2,3})(?![\d.])")  # cuda12.1 | cuda129 (last digit: minor)
_DEPENDS_CUDA = re.compile(r"^(?:cuda-version|cudatoolkit|pytorch-cuda)\s+>=?\s*(\d+\.\d+)")


def cuda_window(facts: GpuFacts, target: Target) -> CudaWindow:
    """The CUDA releases a GPU target may use, or a TargetError saying why there are none."""
    arch = arch_fact(facts, target.arch)
    assert target.driver is not None
    retired = last_branch(facts, target)
    if retired is not None:
        raise TargetError(
            f"target `{target.name}`: driver {target.driver} is past R{retired.branch}, the last driver branch "
            f"that supports {retired.families} GPUs ({arch.name}: {arch.family})",
            f"state the fleet's R{retired.branch} (or older) driver in `driver`; no newer branch drives {arch.name}",
        )
    native, read = target_native_cuda(facts, target)
    if native is None and is_tegra(facts, target.arch):
        raise TargetError(f"target `{target.name}`: {read}", _driver_hint(facts, arch.first_cuda, target))
    if native is None:
        oldest = min(facts.cuda_toolkits.values(), key=lambda t: major_minor(t.version))
        raise TargetError(
            f"target `{target.name}`: driver {target.driver} runs no CUDA release lockgen knows ({arch.name} "
            f"needs CUDA >= {arch.first_cuda})",
            f"CUDA {oldest.version} needs driver >= {oldest.min_driver}; raise `driver`",
        )
    minor = target.cuda_compat == "minor" and not is_tegra(facts, target.arch)  # Table 3's ranges are dGPU drivers'
    ceiling = (minor_compat_ceiling(facts, target.driver) or native) if minor else native
    low = major_minor(arch.first_cuda)
    high = major_minor(ceiling)
    reason = f"{arch.name} needs CUDA >= {arch.first_cuda}; {read}"
    if target.allow_ptx_jit:
        low = min(major_minor(v) for v in facts.cuda_toolkits)
        reason = f"allow-ptx-jit: older CUDA reaches {arch.name} through PTX; {read}"
    if minor:
        reason += f", up to {ceiling} with minor-version compatibility"
    if arch.last_cuda is not None and major_minor(arch.last_cuda) < high:
        high = major_minor(arch.last_cuda)
        reason += f"; CUDA {arch.last_cuda} is the last release that targets {arch.name}"
    if low > high:
        raise TargetError(
            f"target `{target.name}`: driver {target.driver} runs CUDA <= {mm_text(major_minor(ceiling))} but "
            f"{arch.name} needs CUDA >= {arch.first_cuda}",
            _driver_hint(facts, arch.first_cuda, target),
        )
    if target.cuda is not None:
        pin = major_minor(target.cuda)
        if not low <= pin <= high:
            raise TargetError(
                f"target `{target.name}`: cuda = {target.cuda} is outside what it can use (CUDA {mm_text(low)} "
                f"to {mm_text(high)}: {reason})",
                "change `cuda`, or `driver` / `cuda-compat` if the fleet allows it",
            )
        low = high = pin
        reason += f"; pinned to CUDA {target.cuda}"
    return CudaWindow(low=mm_text(low), high=mm_text(high), native=native, reason=reason)


def last_branch(facts: GpuFacts, target: Target) -> LastDriverBranch | None:
    """The facts' last driver branch for a discrete GPU's arch when the target's driver is of a later branch."""
    assert target.driver is not None
    if is_tegra(facts, target.arch):
        return None
    branch = int(target.driver.split(".")[0])
    return next((b for b in facts.last_driver_branches if target.arch in b.archs and branch > int(b.branch)), None)


def _driver_hint(facts: GpuFacts, needed: str, target: Target) -> str:
    if is_tegra(facts, target.arch):
        known = [f"{t.branch}.x: CUDA {t.cuda} ({t.release})" for t in facts.tegra_drivers if target.arch in t.archs]
        return (
            f"Jetson drivers are numbered on their own and lockgen's Tegra facts know for {target.arch} "
            f'{"; ".join(known) or "no branch"}: state the CUDA the module\'s JetPack runs (`cuda = "{needed}"` '
            "or newer)"
        )
    toolkit = facts.cuda_toolkits.get(needed)
    if toolkit is None:
        return f"use a driver that runs CUDA {needed} or newer"
    hint = f"CUDA {needed} needs driver >= {toolkit.min_driver}"
    if target.cuda_compat == "strict":
        hint += '; or set `cuda-compat = "minor"` if the fleet may use minor-version compatibility'
    return hint


def window_constraints(window: CudaWindow) -> tuple[str, ...]:
    """Match specs that keep every CUDA-versioned package inside the window (constraints, not requirements)."""
    upper = f"{major_minor(window.high)[0]}.{major_minor(window.high)[1] + 1}"
    return tuple(f"{name} >={window.low},<{upper}" for name in CUDA_VERSION_PACKAGES)


def build_cuda(candidate: CandidateBuild) -> str | None:
    """The CUDA release a build was compiled with, from its build string or its CUDA dependencies."""
    found = _BUILD_CUDA.search(candidate.build)
    if found:
        if found.group(1):
            return f"{int(found.group(1))}.{int(found.group(2))}"
        digits = found.group(3)
        return f"{int(digits[:-1])}.{digits[-1]}"
    if candidate.build.startswith("cpu") or "cpu" in candidate.build.split("_"):
        return None
    for dep in candidate.depends:
        match = _DEPENDS_CUDA.match(dep)
        if match:
            return mm_text(major_minor(match.group(1)))
    return None


def build_variant(candidate: CandidateBuild) -> str | None:
    """conda-forge's build variant where its arch list differs: `tegra` (Jetson) builds depend on `arm-variant *
    tegra`."""
    for dep in candidate.depends:
        parts = dep.split()
        if parts and parts[0] == "arm-variant" and "tegra" in parts[1:]:
            return "tegra"
    return None


def arch_list_for(
    facts: GpuFacts, candidate: CandidateBuild, cuda: str, platform: str, unknown_releases: str = "infer"
) -> tuple[str | None, str]:
    """(the TORCH_CUDA_ARCH_LIST this build was made with, by its origin, or None when unknown; why it is
    inferred, empty when a fact states it). A `pytorch`-channel release newer than the facts takes the list
    of the newest known release with its CUDA variant, unless the stack refuses unknown releases."""
    if "/pytorch/" in candidate.channel or candidate.channel.rstrip("/").endswith("/pytorch"):
        tag = "cu" + cuda.replace(".", "")
        channel = [e for e in facts.pytorch_channel_arch_lists if e.cuda_tag == tag]
        if channel:
            return channel[0].arch_list, ""
        torch_mm = mm_text(major_minor(candidate.version))
        same_tag = [
            e for e in facts.pytorch_official_arch_lists if e.cuda_tag == tag and e.platform == "linux-64"
        ]  # the channel's builds: the wheels' x86_64 lists
        exact = [e for e in same_tag if e.torch == torch_mm]
        if exact:
            return exact[0].arch_list, ""
        newest = max(same_tag, key=lambda e: as_tuple(e.torch), default=None)
        if newest is not None and as_tuple(torch_mm) > as_tuple(newest.torch) and unknown_releases == "infer":
            return newest.arch_list, (
                f"{candidate.name} {candidate.version} is newer than lockgen's facts ({newest.torch} {tag}); "
                f"arch list of {newest.torch} {tag} (inferred)"
            )
        return None, ""
    variant = build_variant(candidate)  # a tegra build never takes the generic list
    same = [e for e in facts.conda_forge_pytorch_arch_lists if e.cuda == cuda and e.variant == variant]
    chosen = [e for e in same if e.platform == platform] or [e for e in same if e.platform is None]
    return (chosen[0].arch_list, "") if chosen else (None, "")


def coverage(arch_list: str, compute_capability: str) -> str | None:
    """`"sass"` when the list has a cubin that runs on the CC, `"ptx"` when only PTX JIT reaches it, else None."""
    major, minor = major_minor(compute_capability)
    ptx = False
    for item in arch_list.replace(" ", ";").split(";"):
        if not item:
            continue
        has_ptx = item.endswith("+PTX")
        entry = major_minor(item.removesuffix("+PTX"))
        if entry[0] == major and entry[1] <= minor:
            return "sass"
        if has_ptx and entry <= (major, minor):
            ptx = True
    return "ptx" if ptx else None


def judge_build(
    facts: GpuFacts,
    target: Target,
    window: CudaWindow | None,
    platform: str,
    candidate: CandidateBuild,
    unknown_releases: str = "infer",
) -> BuildVerdict:
    """Whether an arch-specific build may be locked for the target, with the reason."""
    cuda = build_cuda(candidate)
    label = f"{candidate.name} {candidate.version} {candidate.build}"
    inferred = ""

    def verdict(allowed: bool, kind: str, reason: str) -> BuildVerdict:
        return BuildVerdict(
            candidate=candidate, allowed=allowed, kind=kind, cuda=cuda, reason=f"{label}: {reason}", inferred=inferred
        )

    if not target.is_gpu:
        if cuda is None:
            return verdict(True, "cpu-build", "CPU build")
        return verdict(False, "cuda-build", f"CUDA {cuda} build on a cpu target")
    if cuda is None:
        return verdict(False, "cpu-build", f"CPU-only build on GPU target `{target.name}`")
    assert window is not None and target.driver is not None
    if major_minor(cuda) > major_minor(window.high):
        needs = facts.cuda_toolkits.get(cuda)
        driver = f" (needs driver >= {needs.min_driver})" if needs else ""
        return verdict(
            False,
            "newer-cuda",
            f"built with CUDA {cuda}{driver}, newer than the CUDA {window.high} driver {target.driver} allows "
            f"({target.cuda_compat})",
        )
    if target.cuda is not None and major_minor(cuda) != major_minor(target.cuda):
        return verdict(False, "not-pinned", f"built with CUDA {cuda}, not the pinned {target.cuda}")
    arch_list, inferred = arch_list_for(facts, candidate, cuda, platform, unknown_releases)
    if arch_list is None:
        variant = build_variant(candidate)
        what = f"CUDA {cuda}" + (f", {variant} variant" if variant else "")
        return verdict(
            False,
            "unknown-arch-list",
            f"no arch list known for this build ({what}), so its {target.arch} kernels are unproven; facts that "
            "list it (LOCKGEN_FACTS) would admit it",
        )
    cc = arch_fact(facts, target.arch).compute_capability
    covered = coverage(arch_list, cc)
    if covered == "sass":
        return verdict(True, "native", f"native {target.arch} kernels (CUDA {cuda}: {arch_list})")
    if covered == "ptx":
        if target.allow_ptx_jit:
            return verdict(True, "ptx", f"reaches {target.arch} through PTX JIT (allowed)")
        return verdict(False, "ptx", f"reaches {target.arch} only through PTX JIT (CUDA {cuda}: {arch_list})")
    return verdict(False, "no-kernels", f"no {target.arch} kernels (CUDA {cuda}: {arch_list})")


def no_build_error(target: Target, window: CudaWindow | None, name: str, verdicts: list[BuildVerdict]) -> TargetError:
    """The error for a requested arch-specific package none of whose builds fits the target."""
    kinds = {v.kind for v in verdicts}
    where = f"CUDA {window.low}..{window.high}" if window else "a CPU build"
    hints = []
    newer = [v for v in verdicts if v.kind == "newer-cuda"]
    if newer:
        best = max(newer, key=lambda v: (major_minor(v.cuda or "0"), as_tuple(v.candidate.version)))
        hints.append(
            best.reason.split(": ", 1)[1]
            .split(", newer")[0]
            .replace("built with", f"{best.candidate.name} {best.candidate.version} is built with")
        )
        if target.cuda_compat == "strict":
            hints.append('or set `cuda-compat = "minor"` if the fleet may use minor-version compatibility')
    if "ptx" in kinds:
        hints.append(
            f"builds that reach {target.arch} only through PTX JIT exist: set `allow-ptx-jit = true` to accept them"
        )
    if kinds <= {"cpu-build"} and target.is_gpu:
        hints.append("the channels offer only CPU builds: add a channel with CUDA builds")
    if not hints:
        hints.append("use channels or versions with builds for this target")
    arch = f"native {target.arch} kernels" if target.is_gpu else "a CPU build"
    return TargetError(
        f"target `{target.name}`: no {name} build in the channels has {arch} with {where} ({len(verdicts)} "
        "builds considered)",
        "; ".join(hints),
    )


def build_constraint(name: str, verdicts: list[BuildVerdict]) -> str:
    """A match spec admitting exactly the allowed builds of one package (a build string seen on a
    refused build is refused everywhere: conservative when two versions share a build string)."""
    refused = {v.candidate.build for v in verdicts if not v.allowed}
    allowed = sorted({v.candidate.build for v in verdicts if v.allowed} - refused)
    pattern = "|".join(re.escape(b) for b in allowed)  # empty: matches no real build
    return f"{name}[build='^({pattern})$']"
