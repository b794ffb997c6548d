"""Reports about archs for `lockgen arch`: the facts and what the rules derive from them."""

from __future__ import annotations

from typing import TypedDict

from lockgen.core.gpu.arch_rules import coverage
from lockgen.core.gpu.facts import arch_fact, is_tegra, load_facts, sorted_archs
from lockgen.model.facts import GpuFacts


class ArchRow(TypedDict):
    """One arch in `lockgen arch`'s table (and its `--json` list)."""

    arch: str
    compute_capability: str
    family: str
    gpus: list[str]
    first_cuda: str
    last_cuda: str | None


ArchReport = dict[str, str | bool | list[str]]  # one arch's facts and derivations, printed key by key in order


def arch_table() -> list[ArchRow]:
    """One row per known arch, oldest first."""
    facts = load_facts()
    return [
        {
            "arch": a.name,
            "compute_capability": a.compute_capability,
            "family": a.family,
            "gpus": list(a.gpus),
            "first_cuda": a.first_cuda,
            "last_cuda": a.last_cuda,
        }
        for a in sorted_archs(facts)
    ]


def arch_report(name: str) -> ArchReport:
    """Everything lockgen knows and derives about one arch (`cpu`: the target without a GPU)."""
    facts = load_facts()
    if name == "cpu":
        return {
            "arch": "cpu",
            "compute_capability": "none",
            "family": "no GPU",
            "gpus": [],
            "first_cuda": "none",
            "last_cuda": "none",
            "min_driver": "none (no NVIDIA driver needed)",
            "tensor_cores": "none",
            "resolves_to": "CPU builds of torch (no CUDA, cuDNN or NCCL packages), for any driver or none",
            "verify": "lockgen verify --arch cpu runs the kernel on the CPU (gloo for several processes)",
        }
    arch = arch_fact(facts, name)
    first = facts.cuda_toolkits.get(arch.first_cuda)
    conda_forge = []
    for entry in facts.conda_forge_pytorch_arch_lists:
        covered = coverage(entry.arch_list, arch.compute_capability)
        where = f" ({entry.platform})" if entry.platform else ""
        conda_forge.append(f"CUDA {entry.cuda}{where}: {covered or 'no kernels'}")
    official = []
    for release in sorted(facts.pytorch_official_arch_lists, key=lambda e: (_numeric(e.torch), _numeric(e.cuda_tag))):
        covered = coverage(release.arch_list, arch.compute_capability)
        where = "" if release.platform == "linux-64" else f" ({release.platform})"
        official.append(f"torch {release.torch} {release.cuda_tag}{where}: {covered or 'no kernels'}")
    return {
        "arch": arch.name,
        "compute_capability": arch.compute_capability,
        "family": arch.family,
        "gpus": list(arch.gpus),
        "first_cuda": arch.first_cuda,
        "last_cuda": arch.last_cuda or "still supported by the newest CUDA known",
        "min_driver": _min_driver(facts, arch.name, first.min_driver if first else None, arch.first_cuda),
        "tensor_cores": ", ".join(k for k, v in sorted(arch.tensor_cores.items()) if v) or "none",
        "conda_forge_pytorch": conda_forge,
        "official_pytorch": official,
        "inferred": arch.inferred,
        "sources": list(arch.sources),
    }


def _min_driver(facts: GpuFacts, arch: str, dgpu_floor: str | None, first_cuda: str) -> str:
    """The driver an arch needs: Table 3's floor of its first CUDA, or for a Jetson arch its Tegra branches."""
    if is_tegra(facts, arch):
        branches = [f"Jetson R{t.branch} ({t.release}): CUDA {t.cuda}" for t in facts.tegra_drivers if arch in t.archs]
        return (
            "; ".join(branches) or f"a Jetson driver (numbered on its own): state the target's `cuda` (>= {first_cuda})"
        )
    return f"{dgpu_floor} (CUDA {first_cuda})" if dgpu_floor else "unknown"


def _numeric(text: str) -> tuple[int, ...]:
    """`2.10` after `2.9`, `cu130` after `cu128`: versions compared as numbers, not text."""
    import re

    return tuple(int(part) for part in re.findall(r"\d+", text))
