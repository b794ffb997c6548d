"""Why a target gets the torch it gets: every candidate (release x variant x source x platform) with its verdict
and the rule that decided it, newest first; and the one-line decision that `resolve` prints and the lock keeps
(the release chosen, and the rule that kept out the nearest newer one).

The rules are the arch rules' own (`pypi_rules.judge_wheel`: `driver-floor`, `no-kernels`, `ptx-only`,
`cpu-build`, `arch-list-unknown`; admitted by `native-kernels` or `ptx-jit`), what each source's torch page shows
(`python`, `glibc`, `exclude-newer`), then the stack's own torch specifier (`pin`): the GPU candidates of every
source, PyPI's included, are judged in one place (`torch_choice.source_candidates`). A CPU target takes no PyPI
build (`cpu-target`, decided by the target alone): its torch comes from the CPU index (`torch_sources`).
Releases newer than the facts that the index's evidence refused are named by that evidence (`newer-than-facts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from lockgen.core.credentials import scrub_url
from lockgen.core.gpu.versions import as_tuple, major_minor, mm_text
from lockgen.model.facts import GpuFacts
from lockgen.model.names import normalize
from lockgen.model.spec import StackSpec, Target

PYPI_SOURCE = "pypi.org"


@dataclass(frozen=True)
class Candidate:
    """One build considered for a target, with its verdict and the rule that decided it."""

    package: str
    release: str
    variant: str
    source: str
    platform: str
    admitted: bool
    rule: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def torch_specifier(spec: StackSpec) -> SpecifierSet | None:
    text = ",".join(d.specifier for d in spec.pypi_dependencies if normalize(d.name) == "torch" and d.specifier)
    try:
        return SpecifierSet(text) if text else None
    except InvalidSpecifier:
        return None  # the spec parser has refused it already; nothing to judge here


def pinned_out(specifier: SpecifierSet | None, release: str) -> bool:
    """Whether the stack's torch specifier admits no patch of a major.minor release (patches 0-20 tried)."""
    return specifier is not None and not any(specifier.contains(f"{release}.{patch}") for patch in range(21))


def cpu_target_candidates(facts: GpuFacts, spec: StackSpec, target: Target) -> list[Candidate]:
    """Every torch build on pypi.org the facts know for a CPU target's platforms: none is taken; newest first."""
    reason = f"a CPU target takes torch from the CPU index ({scrub_url(spec.pypi_options.cpu_torch_index())})"
    return newest_first(
        [
            Candidate("torch", w.torch, w.variant, PYPI_SOURCE, platform, False, "cpu-target", reason)
            for platform in spec.platforms_of(target)
            for w in facts.pytorch_pypi_wheels
            if w.platform == platform
        ]
    )


def newest_first(candidates: list[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (as_tuple(c.release), c.platform, c.source, c.variant), reverse=True)


def decision(
    platform: str,
    chosen: str,
    candidates: Sequence[Candidate],
    refused_newer: tuple[tuple[str, str], ...] = (),
    routed: tuple[str, str] | None = None,
) -> str:
    """One line: the torch chosen on a platform (and the variant index it came from, `routed`), and the rule
    that kept out the nearest newer release of any source (`candidates`, every source's, judged), then releases
    newer than the facts that the index's evidence refused."""
    release = major_minor(chosen)
    mine = [c for c in candidates if c.platform == platform]
    head = f"torch {chosen}"
    if routed is not None:
        head += f" from {routed[0]} @ {scrub_url(routed[1])}"
        same = next(
            (c for c in mine if c.source == PYPI_SOURCE and major_minor(c.release) == release and not c.admitted), None
        )
        head += f" (PyPI's {same.release} build, {same.variant}: {same.rule})" if same else ""
    above = [c for c in mine if not c.admitted and as_tuple(c.release) > release]
    if above:
        nearest = min(above, key=lambda c: (as_tuple(c.release), c.source != PYPI_SOURCE))
        where = "" if nearest.source == PYPI_SOURCE else f" ({nearest.variant} @ {nearest.source})"
        return f"{head}; {nearest.release}{where} passed over by {nearest.rule}: {nearest.reason}"
    newer = sorted((r for r in refused_newer if as_tuple(r[0]) > release), key=lambda r: as_tuple(r[0]))
    if newer:
        return f"{head}; {newer[0][0]} passed over by newer-than-facts: {newer[0][1]}"
    return f"{head}; nothing newer than {mm_text(release)} was passed over"
