"""Use case `lockgen facts`: what the GPU facts are (their date, origin and sources), and `lockgen facts
check`: what an index publishes that they lack (torch releases newer than them, each with the CUDA its
metadata states and what the evidence decides; CUDA toolkits with no driver floor), or with `--stack`,
what that stack's PyPI index and conda channels offer that they lack."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lockgen.adapters import release_evidence
from lockgen.adapters.pypi_index import PYPI
from lockgen.api.steps.stack_steps import load_stack
from lockgen.core.arch_rules import ARCH_SPECIFIC_PACKAGES, arch_list_for, build_cuda
from lockgen.core.credentials import scrub_url
from lockgen.core.facts import load_facts, toolkits_ascending
from lockgen.core.facts_inference import cuda_of_requirements, infer_releases, newest_known
from lockgen.core.versions import as_tuple, mm_text
from lockgen.model.names import MACHINE_OF_PLATFORM


def summary() -> dict[str, Any]:
    """The facts' date, origin, what they cover, and every source document they cite (deduplicated)."""
    facts = load_facts()
    sources = sorted(
        {
            s
            for group in (facts.archs.values(), facts.cuda_toolkits.values(), facts.conda_forge_pytorch_arch_lists, facts.pytorch_official_arch_lists, facts.pytorch_pypi_wheels)
            for entry in group
            for s in entry.sources
        }
    )
    newest_toolkit = toolkits_ascending(facts)[-1]
    return {
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
        "archs": len(facts.archs),
        "cuda_toolkits": {"count": len(facts.cuda_toolkits), "newest": newest_toolkit.version, "newest_min_driver": newest_toolkit.min_driver},
        "pypi_torch_newest": {platform: mm_text(newest_known(facts, platform) or (0, 0)) for platform in MACHINE_OF_PLATFORM},
        "official_torch_newest": max((o.torch for o in facts.pytorch_official_arch_lists), key=as_tuple),
        "inferred_entries": sum(1 for group in (facts.pytorch_official_arch_lists, facts.pytorch_pypi_wheels) for entry in group if entry.inferred),
        "sources": sources,
        "unverifiable": list(facts.unverifiable),
    }


def check_stack(stack_path: Path, aliases: Sequence[str] = (), progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """`check` against what a stack reads: its PyPI index (when it has PyPI dependencies) for its platforms,
    with its Python and exclude-newer, and every pytorch/libtorch build its conda channels offer whose CUDA,
    arch list or release the facts lack."""
    stack, channels = load_stack(stack_path, aliases)
    spec = stack.spec
    platforms = tuple(dict.fromkeys(p for t in spec.targets if t.is_gpu for p in spec.platforms_of(t)))
    report: dict[str, Any] = {"index": None, "newer_releases": [], "unknown_cuda_toolkits": []}
    if spec.pypi_dependencies and platforms:
        options = spec.pypi_options
        report = check(options.index_url, platforms, spec.python_minor or "3.12", spec.pypi_exclude_newer, progress)
    facts = load_facts()
    builds, toolkits = [], {t["cuda"]: t["why"] for t in report["unknown_cuda_toolkits"]}
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
                            "decision": inferred or f"no arch list known for CUDA {cuda} builds from this channel: refused",
                        }
                    )
    return {
        **report,
        "valid_as_of": facts.valid_as_of or "undated",
        "origin": facts.origin,
        "conda_builds": builds,
        "unknown_cuda_toolkits": [{"cuda": c, "why": why} for c, why in sorted(toolkits.items(), key=lambda i: as_tuple(i[0]))],
    }


def check(
    index: str = PYPI, platforms: Sequence[str] = tuple(MACHINE_OF_PLATFORM), python: str = "3.12", exclude_newer: dt.date | None = None, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """What `index` publishes that the facts lack: torch releases newer than them per platform (with the
    CUDA their METADATA states and whether the evidence admits them) and CUDA toolkits with no driver floor."""
    facts = load_facts()
    releases, toolkits = [], {}
    progress(f"reading {scrub_url(index)} for torch releases newer than the facts")
    page = release_evidence.torch_page(index)
    for platform in platforms:
        known = newest_known(facts, platform) or (0, 0)
        evidence = release_evidence.newer_releases(page, platform, python, known, release_evidence.cutoff_of(exclude_newer))
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
        "unknown_cuda_toolkits": [{"cuda": c, "why": why} for c, why in sorted(toolkits.items(), key=lambda i: as_tuple(i[0]))],
    }
