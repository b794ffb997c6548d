"""Which source a GPU target's torch comes from: PyPI, or one of PyTorch's per-variant indexes
(`[pypi-options] torch-variants`, `torch-indexes.<cuXYZ>`), chosen per target and platform.

Every source offers the releases its torch page serves for the platform and Python (read at resolve and explain
time: `adapters.pypi.release_evidence.served_releases`), PyPI's (the stack's own index) as well as each variant index's:
one path for every source. Each release is judged by the arch rules (`pypi_rules.judge_wheel`) with its build's
arch list, taken from the facts: for PyPI, the facts' build of that release on the platform (its variant and list;
releases newer than the facts are there when the index's evidence admitted them, `facts_inference`), a release the
facts do not know deciding nothing; for a variant index, PyPI's build of that release and variant on the platform
(PyPI carries the very wheel PyTorch's index promotes to it), else the official list of that release, variant and
platform (download.pytorch.org's x86_64 lists, and its aarch64 ones from 2.9 on: RELEASE.md, the aarch64 CI script); a
release newer than every list the
facts hold for the variant takes the newest such list, marked inferred (refused with `unknown-releases =
"refuse"`), as releases newer than the facts do on PyPI; any other build has no known list and is refused
(`arch-list-unknown`).

A release the index has for the platform but no wheel kept of is refused by the rule that kept it out: `python`
(none for the stack's Python), `exclude-newer` (none uploaded before the cut-off), `glibc` (its wheel needs a newer
glibc than the target states); the stack's torch specifier refuses by `pin`.

The newest admitted release wins; at the same release PyPI is kept (fewest sources), then the newest CUDA variant.
A V100 (sm70) on a 12.9 driver so takes 2.14's cu126 build, which still carries sm_70, over PyPI's 2.10 (cu128):
PyPI's 2.11 on are cu130 builds its driver cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockgen.core.credentials import scrub_url
from lockgen.core.gpu.explain import PYPI_SOURCE, Candidate, pinned_out, torch_specifier
from lockgen.core.gpu.facts_inference import base_list
from lockgen.core.pypi.pypi_rules import TorchAdmission, judge_wheel
from lockgen.core.gpu.versions import as_tuple
from lockgen.model.facts import GpuFacts, ServedRelease
from lockgen.model.plan import CudaWindow
from lockgen.model.spec import StackSpec, Target


@dataclass(frozen=True)
class SourceOffer:
    """What one torch source serves for one platform (and Python): a variant index (`variant` cu126), or the
    stack's own index (`variant` "": PyPI, each release's variant being the facts' build of it)."""

    variant: str
    index: str
    served: tuple[ServedRelease, ...]

    @property
    def is_pypi(self) -> bool:
        return self.variant == ""


@dataclass(frozen=True)
class TorchSource:
    """The variant index a target's torch is routed to on one platform, the constraint that admits exactly
    its admitted releases, and the arch list each of those was judged with."""

    variant: str
    index: str
    constraint: str
    arch_lists: tuple[tuple[str, str], ...]  # (release, arch list)
    inferred: tuple[str, ...] = ()  # the releases whose list was inferred, with where it came from


def index_arch_list(
    facts: GpuFacts, release: str, platform: str, variant: str, policy: str
) -> tuple[str | None, str, bool]:
    """(arch list or None, where it comes from or why there is none, inferred) for a variant index's build."""
    same = next(
        (
            w
            for w in facts.pytorch_pypi_wheels
            if w.torch == release and w.platform == platform and w.variant == variant and w.arch_list
        ),
        None,
    )
    if same is not None and same.arch_list:
        return same.arch_list, f"PyPI's {release} {variant} build on {platform} (the same wheel)", same.inferred
    official = [o for o in facts.pytorch_official_arch_lists if o.cuda_tag == variant and o.platform == platform]
    exact = next((o for o in official if o.torch == release), None)
    if exact is not None:
        return exact.arch_list, f"the official {release} {variant} list", exact.inferred
    known = [
        as_tuple(w.torch)
        for w in facts.pytorch_pypi_wheels
        if w.platform == platform and w.variant == variant and w.arch_list
    ] + [as_tuple(o.torch) for o in official]
    if known and as_tuple(release) > max(known):
        if policy == "refuse":
            return (
                None,
                f'{release} {variant} is newer than the facts; the stack says unknown-releases = "refuse"',
                False,
            )
        base = base_list(facts, platform, variant)
        if base is not None:
            return base[0], f"inferred: the list of {base[1]} on {platform}", True
    return None, f"the facts hold no arch list for {variant} builds of {release} on {platform}", False


_EXCLUDED = {
    "python": "no {release.torch} wheel for Python {spec.python} on the platform",
    "exclude-newer": (
        "no {release.torch} wheel uploaded before the cut-off ({spec.pypi_exclude_newer}; "
        "a file without an upload time counts as after it, as uv counts it)"
    ),
}


def _page_refusal(served: ServedRelease, spec: StackSpec, target: Target) -> tuple[str, str] | None:
    """(rule, reason) when what an index page shows of a release's wheel refuses it for this stack and target
    (its Python, its upload time, its glibc); None when the page leaves it in."""
    if served.excluded:
        return served.excluded, _EXCLUDED[served.excluded].format(spec=spec, release=served)
    if served.glibc and as_tuple(served.glibc) > as_tuple(target.glibc):
        return "glibc", f"its wheel ({served.wheel}) needs glibc >= {served.glibc}, the target states {target.glibc}"
    return None


def _build_of(
    facts: GpuFacts, offer: SourceOffer, served: ServedRelease, platform: str, policy: str
) -> tuple[str, str, str | None, str, bool] | None:
    """(variant, source, arch list, where the list comes from, inferred) of a served release; None for a PyPI
    release the facts do not know (older than them, or newer and not admitted on evidence)."""
    if offer.is_pypi:
        fact = next(
            (w for w in facts.pytorch_pypi_wheels if w.torch == served.release and w.platform == platform), None
        )
        return None if fact is None else (fact.variant, PYPI_SOURCE, fact.arch_list, "", fact.inferred)
    arch_list, how, inferred = index_arch_list(facts, served.release, platform, offer.variant, policy)
    return offer.variant, scrub_url(offer.index), arch_list, how, inferred


def source_candidates(
    facts: GpuFacts,
    spec: StackSpec,
    target: Target,
    window: CudaWindow | None,
    platform: str,
    offers: tuple[SourceOffer, ...],
) -> list[Candidate]:
    """Every release the torch sources serve for a GPU target on a platform, judged (oldest first per source)."""
    specifier = torch_specifier(spec)
    found = []
    for offer in offers:
        for served in offer.served:
            build = _build_of(facts, offer, served, platform, spec.unknown_releases)
            if build is None:
                continue
            variant, source, arch_list, how, inferred = build
            refused = _page_refusal(served, spec, target)
            if refused is not None:
                admitted, (rule, reason) = False, refused
            elif arch_list is None and not offer.is_pypi:
                admitted, rule, reason = False, "arch-list-unknown", how
            else:
                admitted, rule, reason = judge_wheel(facts, target, window, variant, arch_list)
                reason += f" ({how})" if how and (inferred or rule in ("native-kernels", "ptx-jit")) else ""
            if admitted and pinned_out(specifier, served.release):
                admitted, rule, reason = False, "pin", f"the stack asks for torch {specifier}"
            found.append(Candidate("torch", served.release, variant, source, platform, admitted, rule, reason))
    return found


def cpu_index_candidates(spec: StackSpec, target: Target, platform: str, offer: SourceOffer) -> list[Candidate]:
    """Every release the CPU index serves a CPU target on a platform, judged by what its page shows (`python`,
    `glibc`, `exclude-newer`) and the stack's pin; the others are admitted (`cpu-index`): uv takes the newest."""
    specifier = torch_specifier(spec)
    found = []
    for served in offer.served:
        refused = _page_refusal(served, spec, target)
        if refused is not None:
            admitted, (rule, reason) = False, refused
        elif pinned_out(specifier, served.release):
            admitted, rule, reason = False, "pin", f"the stack asks for torch {specifier}"
        else:
            admitted, rule, reason = (
                True,
                "cpu-index",
                f"a CPU build ({served.torch}), where a CPU target takes torch from",
            )
        found.append(
            Candidate("torch", served.release, "cpu", scrub_url(offer.index), platform, admitted, rule, reason)
        )
    return found


def choose_source(
    candidates: list[Candidate], offers: tuple[SourceOffer, ...], facts: GpuFacts, platform: str, policy: str
) -> TorchSource | None:
    """The variant index to route torch to on a platform, or None when PyPI's newest admitted release is at
    least as new as every index's (`candidates` are one platform's, of every source)."""
    best_pypi = max((as_tuple(c.release) for c in candidates if c.admitted and c.source == PYPI_SOURCE), default=None)
    sources = [c for c in candidates if c.source != PYPI_SOURCE]
    admitted = [c for c in sources if c.admitted]
    if not admitted:
        return None
    best = max(admitted, key=lambda c: (as_tuple(c.release), as_tuple(c.variant[2:])))
    if best_pypi is not None and best_pypi >= as_tuple(best.release):
        return None
    offer = next(o for o in offers if not o.is_pypi and o.variant == best.variant and scrub_url(o.index) == best.source)
    mine = [c for c in sources if c.variant == offer.variant and c.source == best.source]
    allowed = tuple(c.release for c in mine if c.admitted)
    lists, inferred = [], []
    for release in allowed:
        arch_list, how, was_inferred = index_arch_list(facts, release, platform, offer.variant, policy)
        assert arch_list is not None, "an admitted build was judged with a list"
        lists.append((release, arch_list))
        if was_inferred:
            inferred.append(f"torch {release} {offer.variant}: {how}")
    constraint = TorchAdmission(allowed, ()).constraint(tuple(c.release for c in mine))
    return TorchSource(offer.variant, offer.index, constraint, tuple(lists), tuple(inferred))
