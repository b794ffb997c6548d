"""Use case `lockgen facts`: what the GPU facts are (their date, origin and sources), and `lockgen facts
check`: what an index publishes that they lack (torch releases newer than them, each with the CUDA its
metadata states and what the evidence decides; the CUDA-variant builds of a PyTorch index, `+cu130`, whose
arch list the facts do not hold, with the list the resolver would judge them by; CUDA toolkits with no driver
floor), or with `--stack`, what that stack's PyPI index, PyTorch variant indexes and conda channels offer that
they lack. What it reports as admitted is what resolve admits on the same evidence (the same functions decide)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypedDict

from lockgen.adapters.pypi import release_evidence
from lockgen.adapters.pypi.pypi_index import PYPI, IndexedWheel
from lockgen.api.steps.stack_steps import load_stack
from lockgen.core.gpu.arch_rules import ARCH_SPECIFIC_PACKAGES, arch_list_for, build_cuda
from lockgen.core.credentials import scrub_url
from lockgen.core.gpu.facts import load_facts, toolkits_ascending
from lockgen.core.gpu.facts_inference import cuda_of_requirements, infer_releases, newest_known, variant_cuda
from lockgen.core.pypi.torch_choice import index_arch_list
from lockgen.core.gpu.versions import as_tuple, mm_text
from lockgen.model.facts import GpuFacts
from lockgen.model.names import MACHINE_OF_PLATFORM


class ToolkitCount(TypedDict):
    """How many CUDA toolkits the facts hold, the newest and its driver floor."""

    count: int
    newest: str
    newest_min_driver: str


class FactsSummary(TypedDict):
    """`lockgen facts`: what the facts are and cover (`--json` prints it as it is)."""

    valid_as_of: str
    origin: str
    archs: int
    cuda_toolkits: ToolkitCount
    pypi_torch_newest: dict[str, str]  # platform -> newest torch minor the facts know
    official_torch_newest: str
    inferred_entries: int
    sources: list[str]
    unverifiable: list[str]


class NewerRelease(TypedDict):
    """A torch release an index publishes, newer than the facts, and what the evidence decides of it."""

    torch: str
    platform: str
    wheel: str
    uploaded: str | None
    cuda: str | None
    evidence: str
    admitted: bool
    decision: str


class VariantBuild(TypedDict):
    """A CUDA-variant build (`+cu130`) of a PyTorch index whose arch list the facts do not hold."""

    torch: str
    platform: str
    variant: str
    index: str
    wheel: str
    cuda: str
    arch_list: str | None
    admitted: bool
    decision: str


class CondaBuild(TypedDict):
    """A pytorch/libtorch build of a stack's conda channels whose arch list the facts lack or infer."""

    build: str
    platform: str
    cuda: str
    channel: str
    decision: str


class UnknownToolkit(TypedDict):
    """A CUDA toolkit something names that has no driver floor in the facts, and what names it."""

    cuda: str
    why: str


class IndexCheck(TypedDict):
    """`lockgen facts check` of an index: what it publishes that the facts lack."""

    index: str | None
    valid_as_of: str
    origin: str
    newer_releases: list[NewerRelease]
    variant_builds: list[VariantBuild]
    unknown_cuda_toolkits: list[UnknownToolkit]


class StackCheck(IndexCheck):
    """`lockgen facts check --stack`: the index check of its PyPI sources, and its conda channels' builds."""

    conda_builds: list[CondaBuild]


def summary() -> FactsSummary:
    """The facts' date, origin, what they cover, and every source document they cite (deduplicated)."""
    facts = load_facts()
    sources = sorted(
        {
            s
            for group in (
                facts.archs.values(),
                facts.cuda_toolkits.values(),
                facts.conda_forge_pytorch_arch_lists,
                facts.pytorch_official_arch_lists,
                facts.pytorch_pypi_wheels,
            )
            for entry in group
            for s in entry.sources
        }
    )
    newest_toolkit = toolkits_ascending(facts)[-1]
    return {
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
        "archs": len(facts.archs),
        "cuda_toolkits": {
            "count": len(facts.cuda_toolkits),
            "newest": newest_toolkit.version,
            "newest_min_driver": newest_toolkit.min_driver,
        },
        "pypi_torch_newest": {
            platform: mm_text(newest_known(facts, platform) or (0, 0)) for platform in MACHINE_OF_PLATFORM
        },
        "official_torch_newest": max((o.torch for o in facts.pytorch_official_arch_lists), key=as_tuple),
        "inferred_entries": sum(
            1
            for group in (facts.pytorch_official_arch_lists, facts.pytorch_pypi_wheels)
            for entry in group
            if entry.inferred
        ),
        "sources": sources,
        "unverifiable": list(facts.unverifiable),
    }


def check_stack(
    stack_path: Path, aliases: Sequence[str] = (), progress: Callable[[str], None] = lambda _: None
) -> StackCheck:
    """`check` against what a stack reads: its PyPI index (when it has PyPI dependencies) for its platforms,
    with its Python and exclude-newer, and every pytorch/libtorch build its conda channels offer whose CUDA,
    arch list or release the facts lack."""
    stack, channels = load_stack(stack_path, aliases)
    spec = stack.spec
    platforms = tuple(dict.fromkeys(p for t in spec.targets if t.is_gpu for p in spec.platforms_of(t)))
    facts = load_facts()
    report: IndexCheck = {
        "index": None,
        "newer_releases": [],
        "variant_builds": [],
        "unknown_cuda_toolkits": [],
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
    }
    if spec.pypi_dependencies and platforms:
        options = spec.pypi_options
        python = spec.python_minor or "3.12"
        report = check(options.index_url, platforms, python, spec.pypi_exclude_newer, progress)
        cutoff = release_evidence.cutoff_of(spec.pypi_exclude_newer)
        for variant, index in options.gpu_torch_sources():
            progress(f"reading {scrub_url(index)} for {variant} torch builds the facts hold no arch list of")
            found = variant_builds(
                facts, release_evidence.torch_page(index), index, (variant,), platforms, python, cutoff
            )
            report["variant_builds"] += found
    builds: list[CondaBuild] = []
    toolkits = {t["cuda"]: t["why"] for t in report["unknown_cuda_toolkits"]}
    for build in report["variant_builds"]:
        if build["cuda"] not in facts.cuda_toolkits:
            toolkits.setdefault(
                build["cuda"], f"named by torch {build['torch']} of {build['index']}; no driver floor in the facts"
            )
    if channels is not None:
        for platform in platforms:
            progress(f"reading the stack's channels for pytorch/libtorch builds on {platform}")
            for candidate in channels.candidates(platform, ARCH_SPECIFIC_PACKAGES):
                cuda = build_cuda(candidate)
                if cuda is None:
                    continue
                label = f"{candidate.name} {candidate.version} {candidate.build}"
                if cuda not in facts.cuda_toolkits:
                    toolkits.setdefault(cuda, f"named by {label}; no driver floor in the facts")
                arch_list, inferred = arch_list_for(facts, candidate, cuda, platform, spec.unknown_releases)
                if arch_list is None or inferred:
                    builds.append(
                        {
                            "build": label,
                            "platform": platform,
                            "cuda": cuda,
                            "channel": scrub_url(candidate.channel),
                            "decision": inferred
                            or f"no arch list known for CUDA {cuda} builds from this channel: refused",
                        }
                    )
    return {
        **report,
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
        "conda_builds": builds,
        "unknown_cuda_toolkits": [
            {"cuda": c, "why": why} for c, why in sorted(toolkits.items(), key=lambda i: as_tuple(i[0]))
        ],
    }


def check(
    index: str = PYPI,
    platforms: Sequence[str] = tuple(MACHINE_OF_PLATFORM),
    python: str = "3.12",
    exclude_newer: dt.date | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> IndexCheck:
    """What `index` publishes that the facts lack: torch releases newer than them per platform (with the
    CUDA their METADATA states and whether the evidence admits them) and CUDA toolkits with no driver floor."""
    facts = load_facts()
    releases: list[NewerRelease] = []
    toolkits: dict[str, str] = {}
    progress(f"reading {scrub_url(index)} for torch releases newer than the facts")
    page = release_evidence.torch_page(index)
    builds = variant_builds(
        facts,
        page,
        index,
        release_evidence.cuda_variants(page),
        platforms,
        python,
        release_evidence.cutoff_of(exclude_newer),
    )
    for build in builds:
        if build["cuda"] not in facts.cuda_toolkits:
            toolkits[build["cuda"]] = f"named by torch {build['torch']}; no driver floor in the facts"
    for platform in platforms:
        known = newest_known(facts, platform) or (0, 0)
        evidence = release_evidence.newer_releases(
            page, platform, python, known, release_evidence.cutoff_of(exclude_newer)
        )
        decided = infer_releases(facts, evidence, python, "infer")
        for item, note in zip(sorted(evidence, key=lambda e: as_tuple(e.torch)), decided.notes):
            cuda, _, said = cuda_of_requirements(item.requires, platform, python)
            if cuda not in (None, "?") and cuda not in facts.cuda_toolkits:
                toolkits[cuda] = f"named by torch {item.torch} (`{said}`); no driver floor in the facts"
            releases.append(
                {
                    "torch": item.torch,
                    "platform": platform,
                    "wheel": item.wheel,
                    "uploaded": item.uploaded,
                    "cuda": cuda if cuda != "?" else None,
                    "evidence": said,
                    "admitted": "refused:" not in note,
                    "decision": note,
                }
            )
    return {
        "index": scrub_url(index),
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
        "newer_releases": releases,
        "variant_builds": builds,
        "unknown_cuda_toolkits": [
            {"cuda": c, "why": why} for c, why in sorted(toolkits.items(), key=lambda i: as_tuple(i[0]))
        ],
    }


def variant_builds(
    facts: GpuFacts,
    page: dict[str, IndexedWheel],
    index: str,
    variants: Sequence[str],
    platforms: Sequence[str],
    python: str,
    cutoff: dt.datetime | None,
) -> list[VariantBuild]:
    """The CUDA-variant builds (`2.16.0+cu130`) a PyTorch index's torch `page` serves whose arch list the facts do
    not hold: each with the CUDA its tag names and the list resolve would judge it by (`index_arch_list`, inferred
    from the newest known build of the variant), or why it is refused. Older builds the facts have no list of are
    left out: they are not news."""
    found: list[VariantBuild] = []
    for platform in platforms:
        for variant in variants:
            known = [
                as_tuple(w.torch)
                for w in facts.pytorch_pypi_wheels
                if w.platform == platform and w.variant == variant and w.arch_list
            ]
            known += [
                as_tuple(o.torch)
                for o in facts.pytorch_official_arch_lists
                if o.cuda_tag == variant and o.platform == platform
            ]
            for served in release_evidence.served_releases(page, variant, platform, python, cutoff):
                arch_list, how, inferred = index_arch_list(facts, served.release, platform, variant, "infer")
                stale = arch_list is None and known and as_tuple(served.release) < max(known)
                if not served.wheel or stale or (arch_list is not None and not inferred):
                    continue
                cuda = variant_cuda(variant)
                newer = f"torch {served.torch} ({scrub_url(index)}) has no arch list in lockgen's facts"
                if cuda not in facts.cuda_toolkits:
                    decision = f"{newer}; refused: its CUDA {cuda} has no driver floor in the facts"
                elif arch_list is None:
                    decision = f"{newer}; refused: {how}"
                else:
                    decision = f"{newer}; admitted with arch list {arch_list} ({how})"
                admitted = arch_list is not None and cuda in facts.cuda_toolkits
                found.append(
                    {
                        "torch": served.torch,
                        "platform": platform,
                        "variant": variant,
                        "index": scrub_url(index),
                        "wheel": served.wheel,
                        "cuda": cuda,
                        "arch_list": arch_list if admitted else None,
                        "admitted": admitted,
                        "decision": decision,
                    }
                )
    return found
