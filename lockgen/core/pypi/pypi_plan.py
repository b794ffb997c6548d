"""Plans the PyPI layer of one target on one platform: the interpreter version, the requirements, and
the constraints (torch releases the arch rules admit; conda's Python packages held at their versions), and
the torch family's own index where it comes from one: a CPU target's (`torch_sources`), or the PyTorch variant
index a GPU target's torch is chosen from when it serves a newer admitted release than PyPI (`torch_choice`).

The torch constraint keeps out what only lockgen knows: the releases whose build the arch rules refuse (arch
list, CUDA window, driver floor), from the facts; what uv enforces itself from the same files (the stack's Python,
glibc, exclude-newer, the user's pins) is left to it, so the constraint does not move with an upload. Every
source's candidates, judged by all the rules, decide which source wins, the error when none fits, and the
decision line.

Names are matched after PEP 503 normalisation, with a short table of known renames (conda `pytorch`
is PyPI `torch`, see `pypi_rules.CONDA_TO_PYPI`). A conda package counts as a Python package when it
depends on `python`; it is pinned with `==` for uv and dropped from the pip entries, since conda
already provides it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lockgen.model.names import normalize
from lockgen.core.gpu.facts_inference import Inference, with_inferred
from lockgen.core.pypi.pypi_rules import CONDA_TO_PYPI, known_releases, no_torch_error, torch_admission, working_steps
from lockgen.core.gpu.explain import PYPI_SOURCE, Candidate, torch_specifier
from lockgen.core.pypi.torch_choice import SourceOffer, TorchSource, choose_source, source_candidates
from lockgen.core.pypi.torch_sources import cpu_routes, family_routes
from lockgen.core.gpu.versions import major_minor
from lockgen.errors import UserError
from lockgen.model.facts import GpuFacts
from lockgen.model.lock import LockedPackage
from lockgen.model.plan import CudaWindow
from lockgen.model.spec import StackSpec, Target

_PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


@dataclass(frozen=True)
class PypiPlan:
    python: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...]
    held: frozenset[str]
    inferred: tuple[str, ...] = ()  # what the index's evidence decided about releases newer than the facts
    routes: tuple[tuple[str, str], ...] = ()  # (package, index) taken from their own index: a CPU target's torch
    components: str = ""  # after resolving: the CUDA components held within the window (`cuda_components`)
    decision: str = ""  # after resolving: the torch chosen and the rule that kept out the nearest newer release
    source: TorchSource | None = None  # the variant index a GPU target's torch is routed to
    candidates: tuple[Candidate, ...] = ()  # every source's releases on the platform, judged (for the decision)


def held_by_conda(spec: StackSpec, conda_packages: list[LockedPackage]) -> tuple[str, dict[str, str]]:
    """(the Python major.minor, the conda Python packages uv must leave as they are, by PyPI name)."""
    python = spec.python_minor
    held: dict[str, str] = {}
    for package in conda_packages:
        if package.name == "python":
            python = "{}.{}".format(*major_minor(package.version))
        elif "python" in package.dependencies and _PEP440.fullmatch(package.version):
            held[normalize(CONDA_TO_PYPI.get(package.name, package.name))] = package.version
    if python is None:  # a pure-PyPI stack must name one (the spec model); a conda solution may hold none
        raise UserError(
            "[pypi-dependencies] need a Python, and the conda packages solved hold none and the stack names none",
            'add python to [dependencies] (python = "3.11.*"), or set python = "3.11" under [stack]',
        )
    return python, held


def needs_torch_rules(spec: StackSpec, target: Target, held: dict[str, str]) -> bool:
    """Whether the torch release rules apply: a GPU target whose torch comes from PyPI, not conda."""
    return target.is_gpu and "torch" not in held


def plan_pypi(
    facts: GpuFacts,
    spec: StackSpec,
    target: Target,
    platform: str,
    window: CudaWindow | None,
    conda_packages: list[LockedPackage],
    inference: Inference | None = None,
    offers: tuple[SourceOffer, ...] = (),
) -> PypiPlan:
    """What uv is asked for one target and platform; a GPU target no torch source fits is an error here.
    `inference` adds what the index showed of torch releases newer than the facts; `offers` are what the
    stack's torch sources serve on this platform (the stack's own index first)."""
    python, held = held_by_conda(spec, conda_packages)
    constraints = [f"{name}=={version}" for name, version in sorted(held.items())]
    wants_torch = any(d.name == "torch" for d in spec.pypi_dependencies)
    notes: tuple[str, ...] = ()
    source: TorchSource | None = None
    candidates: tuple[Candidate, ...] = ()
    routes = cpu_routes(spec, target, frozenset(held))
    if needs_torch_rules(spec, target, held):
        unknown = inference.refused if inference else ()
        notes = inference.notes if inference else ()
        facts = with_inferred(facts, inference) if inference else facts
        admission = torch_admission(facts, target, platform, window, unknown)
        candidates = tuple(source_candidates(facts, spec, target, window, platform, offers))
        if family_routes(spec, ""):
            source = choose_source(list(candidates), offers, facts, platform, spec.unknown_releases)
        pypi_fits = any(c.admitted for c in candidates if c.source == PYPI_SOURCE)
        if wants_torch and not pypi_fits and source is None:
            assert window is not None, "torch rules apply to GPU targets"
            raise no_torch_error(
                target,
                platform,
                candidates,
                torch_specifier(spec),
                unknown,
                working_steps(facts, target, window, platform, torch_specifier(spec)),
            )
        line = source.constraint if source else admission.constraint(known_releases(facts, platform, unknown))
        if line:
            constraints.append(line)
        if source is not None:
            routes = family_routes(spec, source.index)
            notes += source.inferred
    requirements = tuple(d.requirement() for d in spec.pypi_dependencies)
    if routes and not any(normalize(d.name) == "torch" for d in spec.pypi_dependencies):
        requirements += ("torch",)  # torchvision/torchaudio need it anyway: named, so it takes their index too
    return PypiPlan(
        python=python,
        requirements=requirements,
        constraints=tuple(constraints),
        held=frozenset(held),
        inferred=notes,
        routes=routes,
        source=source,
        candidates=candidates,
    )
