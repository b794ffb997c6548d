"""Loads the packaged GPU facts and answers questions about drivers and archs.

The facts file is package data, read once per process; nothing here touches the network.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from lockgen.core.gpu.package_data import facts_document, facts_origin, facts_overridden
from lockgen.core.gpu.versions import as_tuple, major_minor, mm_text
from lockgen.errors import TargetError, UserError
from lockgen.model.facts import ArchFact, CudaToolkitFact, GpuFacts, TegraDriverFact
from lockgen.model.names import shown
from lockgen.model.spec import Target

if TYPE_CHECKING:
    from pydantic import TypeAdapter


def load_facts() -> GpuFacts:
    """The GPU facts: `$LOCKGEN_FACTS` when set, else those shipped in `lockgen/data/gpu_facts.json`."""
    key = _source()
    if key not in _PARSED:  # once per process and file
        raw, origin = facts_document()
        _PARSED[key] = _parsed(origin, raw)
    return _PARSED[key]


def remember(facts: GpuFacts) -> None:
    """Takes `facts`, a value the models accepted for the packaged document and kept since
    (`kept_inputs.gpu_facts`), as that document's: `load_facts` returns them without reading it."""
    _PARSED[(False, facts.origin)] = facts


def _source() -> tuple[bool, str]:
    """(whether `$LOCKGEN_FACTS` names the facts, where they come from): an override whose path is spelled as the
    packaged file's name (`lockgen/data/gpu_facts.json`, run from a checkout) is still that file, not the package's."""
    return facts_overridden(), facts_origin()


_PARSED: dict[tuple[bool, str], GpuFacts] = {}


@functools.cache
def _facts_validator() -> TypeAdapter[GpuFacts]:
    """pydantic's validator of the facts' records, built once per process, when a facts document is read."""
    from pydantic import TypeAdapter

    return TypeAdapter(GpuFacts)


def _parsed(origin: str, raw: Any) -> GpuFacts:
    """The facts document `raw` as the facts' records, every entry validated (the facts' one boundary)."""
    try:
        return _facts_validator().validate_python(
            {
                "archs": {name: _keyed(entry, name=name) for name, entry in raw["archs"].items()},
                "cuda_toolkits": {v: _keyed(e, version=v) for v, e in raw["cuda_toolkits"].items()},
                "minor_version_compat": {m: _keyed(e, major=m) for m, e in raw["minor_version_compat"].items()},
                "conda_forge_pytorch_arch_lists": raw["conda_forge_pytorch_arch_lists"],
                "pytorch_official_arch_lists": [
                    _keyed(entry, torch=torch, cuda_tag=tag, platform=platform)
                    for key, platform in (
                        ("pytorch_official_arch_lists", "linux-64"),
                        ("pytorch_official_aarch64_arch_lists", "linux-aarch64"),
                    )
                    for torch, by_tag in raw.get(key, {}).items()
                    for tag, entry in by_tag.items()
                ],
                "pytorch_pypi_wheels": raw["pytorch_pypi_wheels"],
                "pytorch_channel_arch_lists": raw.get("pytorch_channel_arch_lists", ()),
                "tegra_drivers": raw.get("tegra_drivers", ()),
                "package_cuda_rules": raw.get("package_cuda_rules", ()),
                "last_driver_branches": raw.get("last_driver_branches", ()),
                "unverifiable": tuple(raw.get("unverifiable", ())),
                "valid_as_of": str(raw.get("valid_as_of", "")),
                "origin": origin,
            }
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        first = _first_error(exc)
        raise UserError(
            f"the facts file {origin} does not follow the facts schema: {first}",
            "compare it with the packaged lockgen/data/gpu_facts.json, or unset LOCKGEN_FACTS",
        ) from None


def _keyed(entry: Any, **keyed: str) -> dict[str, Any]:
    """A facts entry with the fields its key gives (an arch's name, a toolkit's version...); an entry naming one
    of them itself is refused: the key decides (an aarch64 arch list never made a linux-64 one by its entry)."""
    named = sorted(keyed.keys() & entry.keys()) if isinstance(entry, dict) else []
    if named:
        raise ValueError(f"the entry of `{shown(next(iter(keyed.values())))}` names `{named[0]}`, which its key gives")
    return {**entry, **keyed}


def _first_error(exc: Exception) -> str:
    """The first thing wrong, by its place in the facts' records where pydantic found it."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        place = ".".join(str(step) for step in first["loc"])
        return f"`{shown(place)}`: {shown(first['msg'])}"
    return shown(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__


def sorted_archs(facts: GpuFacts) -> list[ArchFact]:
    return sorted(facts.archs.values(), key=lambda a: as_tuple(a.compute_capability))


def arch_fact(facts: GpuFacts, arch: str) -> ArchFact:
    """The facts for `arch`, or a TargetError listing the known ones."""
    try:
        return facts.archs[arch]
    except KeyError:
        known = ", ".join(a.name for a in sorted_archs(facts))
        raise TargetError(f"unknown arch `{arch}`", f"known archs: cpu, {known} (see `lockgen arch`)") from None


def toolkits_ascending(facts: GpuFacts) -> list[CudaToolkitFact]:
    return sorted(facts.cuda_toolkits.values(), key=lambda t: major_minor(t.version))


def native_cuda(facts: GpuFacts, driver: str) -> str | None:
    """The newest CUDA toolkit the driver runs natively, or None when it runs none we know."""
    best = None
    for toolkit in toolkits_ascending(facts):
        if as_tuple(driver) >= as_tuple(toolkit.min_driver):
            best = toolkit.version
    return best


def is_tegra(facts: GpuFacts, arch: str) -> bool:
    """Whether an arch is only found in Jetson modules (integrated GPUs with their own driver numbering)."""
    fact = facts.archs.get(arch)
    return fact is not None and bool(fact.gpus) and all(gpu.startswith("Jetson") for gpu in fact.gpus)


def tegra_branch(facts: GpuFacts, target: Target) -> TegraDriverFact | None:
    """The Tegra facts' branch a Jetson target's driver belongs to: the longest branch that is the driver or
    its leading components (`540.4` holds `540.4.0`, `35` holds `35.4.1`, `580` holds `580.00`), for its arch."""
    assert target.driver is not None
    found = [
        f
        for f in facts.tegra_drivers
        if target.arch in f.archs and (target.driver == f.branch or target.driver.startswith(f.branch + "."))
    ]
    return max(found, key=lambda f: len(f.branch.split(".")), default=None)


def target_native_cuda(facts: GpuFacts, target: Target) -> tuple[str | None, str]:
    """(the newest CUDA a GPU target's driver runs natively, how it was read). A Jetson target's is the CUDA it
    states (a module with NVIDIA's CUDA upgradable package runs a newer CUDA than its Jetson Linux), else its
    driver's branch in the Tegra facts, else None; never through Table 3's floors, which are dGPU drivers'. A dGPU
    driver past the newest floor the facts know reads as that newest CUDA, and says so."""
    assert target.driver is not None
    if is_tegra(facts, target.arch):
        if target.cuda is not None:
            return mm_text(
                major_minor(target.cuda)
            ), f"Jetson driver {target.driver} runs {target.cuda} (the target states it)"
        fact = tegra_branch(facts, target)
        if fact is None:
            return None, f"lockgen's Tegra facts know no branch of Jetson driver {target.driver} for {target.arch}"
        return fact.cuda, f"Jetson driver {target.driver} ({fact.release}) runs {fact.cuda}"
    native = native_cuda(facts, target.driver)
    newest = toolkits_ascending(facts)[-1]
    if native == newest.version and as_tuple(target.driver) > as_tuple(newest.min_driver):
        return native, (
            f"driver {target.driver} runs {native} natively ({native} is the newest CUDA lockgen's facts know: a "
            "newer one this driver may run is not used until the facts name its driver floor)"
        )
    return native, f"driver {target.driver} runs {native} natively"


def minor_compat_ceiling(facts: GpuFacts, driver: str) -> str | None:
    """The newest CUDA the driver may run through minor-version compatibility (same major as native)."""
    native = native_cuda(facts, driver)
    if native is None:
        return None
    major = str(major_minor(native)[0])
    compat = facts.minor_version_compat.get(major)
    if compat is None or as_tuple(driver) < as_tuple(compat.min_driver):
        return native
    same_major = [t.version for t in toolkits_ascending(facts) if major_minor(t.version)[0] == int(major)]
    return same_major[-1]
