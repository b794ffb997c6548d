"""torch releases newer than the facts, admitted on evidence or refused with a reason, never dropped
in silence.

For a release the facts do not list, the evidence is its wheel's own METADATA for the platform: the CUDA
it was built with comes from its requirements (`cuda-toolkit[...]==13.0.3` since 2.13, the
`nvidia-cuda-runtime[-cuXY]==X.Y.*` wheel before), no CUDA requirement at all meaning a CPU-only build.
Its arch list is taken from the newest known release with the same CUDA variant on the same platform, and
the admitted fact is marked inferred, with that reason, in the lock. A CUDA the facts do not know (no
driver floor) or a variant with no known build on the platform decides nothing: the release is refused,
naming what would admit it. With `unknown-releases = "refuse"` every newer release is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement

from lockgen.core.gpu.versions import as_tuple, major_minor, mm_text
from lockgen.model.facts import GpuFacts, PypiWheelFact, ReleaseEvidence
from lockgen.model.names import normalize
from lockgen.model.names import MACHINE_OF_PLATFORM

POLICIES = ("infer", "refuse")
_RUNTIME = re.compile(r"nvidia-cuda-runtime(-cu\d+)?")
_EXACT = re.compile(r"^(?:==|===|~=|>=)\s*(\d+\.\d+)")


@dataclass(frozen=True)
class Inference:
    """What the evidence decided for one platform: facts to add (inferred), releases refused, and one
    line per release for the user."""

    admitted: tuple[PypiWheelFact, ...]
    refused: tuple[tuple[str, str], ...]  # (release major.minor, reason)
    notes: tuple[str, ...]


def newest_known(facts: GpuFacts, platform: str) -> tuple[int, int] | None:
    """The newest torch release the facts list on PyPI for a platform."""
    known = [major_minor(w.torch) for w in facts.pytorch_pypi_wheels if w.platform == platform]
    return max(known) if known else None


def cuda_of_requirements(requires: tuple[str, ...], platform: str, python: str) -> tuple[str | None, str | None, str]:
    """(the CUDA major.minor a torch wheel's requirements pin, or None for a CPU-only build; the exact CUDA
    release when `cuda-toolkit==X.Y.Z` names it; the requirement that says so). Markers are evaluated for Linux
    on the platform's machine and `python`; `"?"` when the requirements name CUDA libraries but no runtime
    version (nothing decides the variant)."""
    environment = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": MACHINE_OF_PLATFORM[platform],
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    cuda_named = ""
    for line in requires:
        try:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue  # a line this reader cannot judge decides nothing
        name = normalize(requirement.name)
        if name == "cuda-toolkit" or _RUNTIME.fullmatch(name):
            for clause in requirement.specifier:
                found = _EXACT.match(f"{clause.operator}{clause.version}")
                if found:
                    exact = clause.version if name == "cuda-toolkit" and clause.operator == "==" else None
                    return mm_text(major_minor(found.group(1))), exact, f"{requirement.name}{requirement.specifier}"
        if name.startswith("nvidia-") or name.startswith("cuda-"):
            cuda_named = cuda_named or line.split(";")[0].strip()
    return ("?", None, cuda_named) if cuda_named else (None, None, "no CUDA requirement")


def variant_cuda(variant: str) -> str:
    """The CUDA major.minor a PyTorch variant tag names (`cu130` -> 13.0, `cu126` -> 12.6)."""
    return f"{variant[2:-1]}.{variant[-1]}"


def base_list(facts: GpuFacts, platform: str, variant: str) -> tuple[str, str] | None:
    """(arch list, what it is) of the newest known build with this variant on this platform: a PyPI wheel,
    else an official build of that platform (download.pytorch.org's)."""
    same = [w for w in facts.pytorch_pypi_wheels if w.platform == platform and w.variant == variant and w.arch_list]
    wheel = max(same, key=lambda w: as_tuple(w.torch), default=None)
    if wheel is not None:
        return wheel.arch_list or "", f"{wheel.torch} {variant}"
    official = [o for o in facts.pytorch_official_arch_lists if o.cuda_tag == variant and o.platform == platform]
    best = max(official, key=lambda o: as_tuple(o.torch), default=None)
    return (best.arch_list, f"the official {best.torch} {variant} build") if best else None


def infer_releases(facts: GpuFacts, evidence: tuple[ReleaseEvidence, ...], python: str, policy: str) -> Inference:
    """Admits or refuses each release in `evidence` (all of one platform, newer than the facts)."""
    admitted: list[PypiWheelFact] = []
    refused: list[tuple[str, str]] = []
    notes: list[str] = []
    for item in sorted(evidence, key=lambda e: as_tuple(e.torch)):
        release = mm_text(major_minor(item.torch))
        known = newest_known(facts, item.platform)
        newer = (
            f"torch {item.torch} is newer than lockgen's facts ({mm_text(known) if known else 'none'} on "
            f"{item.platform})"
        )
        fix = (
            "point LOCKGEN_FACTS at facts that list it (`lockgen facts check` shows what is missing), or keep it "
            f"out with torch<{release}"
        )
        if policy == "refuse":
            reason = f'{newer}; refused: the stack says unknown-releases = "refuse"'
            refused.append((release, reason))
            notes.append(reason)
            continue
        cuda, toolkit, said = cuda_of_requirements(item.requires, item.platform, python)
        if cuda is None:
            wheel = PypiWheelFact(
                torch=release,
                platform=item.platform,
                variant="cpu",
                arch_list=None,
                inferred=True,
                sources=(f"inferred by lockgen from {item.wheel}: {said}, a CPU-only build",),
            )
            admitted.append(wheel)
            notes.append(f"{newer}; admitted from its metadata: a CPU-only build ({said})")
            continue
        if cuda == "?":
            reason = (
                f"{newer}; refused: its requirements name CUDA libraries (`{said}`) but no CUDA runtime version; {fix}"
            )
            refused.append((release, reason))
            notes.append(reason)
            continue
        variant = "cu" + cuda.replace(".", "")
        if cuda not in facts.cuda_toolkits:
            reason = (
                f"{newer}; refused: it is built with CUDA {cuda} (`{said}`), which the facts do not know (no driver "
                f"floor); {fix}"
            )
            refused.append((release, reason))
            notes.append(reason)
            continue
        base = base_list(facts, item.platform, variant)
        if base is None:
            reason = (
                f"{newer}; refused: it is built with CUDA {cuda} (`{said}`) and no known {variant} build on "
                f"{item.platform} gives an arch list; {fix}"
            )
            refused.append((release, reason))
            notes.append(reason)
            continue
        admitted.append(
            PypiWheelFact(
                torch=release,
                platform=item.platform,
                variant=variant,
                arch_list=base[0],
                inferred=True,
                toolkit=toolkit,
                sources=(
                    f"inferred by lockgen from {item.wheel}: CUDA {cuda} from `{said}`; arch list of {base[1]} "
                    f"on {item.platform}",
                ),
            )
        )
        notes.append(f"{newer}; admitted from its metadata: CUDA {cuda} (`{said}`), arch list of {base[1]} (inferred)")
    return Inference(tuple(admitted), tuple(refused), tuple(notes))


def with_inferred(facts: GpuFacts, inference: Inference) -> GpuFacts:
    """The facts with the inferred releases added (the packaged facts are never changed)."""
    if not inference.admitted:
        return facts
    return replace(facts, pytorch_pypi_wheels=facts.pytorch_pypi_wheels + inference.admitted)
