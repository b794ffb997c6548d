"""The PyPI layer of resolve, a step of that use case (not one of its own): plans each target x platform
(core, with what the stack's torch sources serve, PyPI's own index included, and the releases newer than the facts
its evidence shows: `torch_source_steps`), resolves it with uv (adapter, several at once), and judges the torch it
got (core)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.pypi import local_source, uv_resolver
from lockgen.api.steps.torch_source_steps import TorchSources
from lockgen.core.gpu.cuda_components import by_owner_rule, components_text, window_constraints
from lockgen.core.gpu.explain import decision
from lockgen.core.gpu.facts_inference import Inference, with_inferred
from lockgen.core.pypi.pypi_plan import PypiPlan, held_by_conda, needs_torch_rules, plan_pypi
from lockgen.core.pypi.pypi_rules import check_resolved_torch, torch_admission
from lockgen.core.pypi.torch_sources import check_cpu_lock, routes_text
from lockgen.errors import ChannelError, UnsatisfiableError
from lockgen.model.facts import GpuFacts
from lockgen.model.lock import LockedPackage
from lockgen.model.names import normalize
from lockgen.model.plan import CudaWindow, SolvedRequest
from lockgen.model.spec import StackSpec, Target


@dataclass(frozen=True)
class PypiJob:
    """One target x platform's PyPI resolution: what it was planned with, and the request uv resolves."""

    target: Target
    window: CudaWindow | None
    platform: str
    plan: PypiPlan
    inference: Inference | None
    request: uv_resolver.PypiRequest


def _explained(
    exc: UnsatisfiableError,
    facts: GpuFacts,
    spec: StackSpec,
    target: Target,
    window: CudaWindow | None,
    platform: str,
    inference: Inference | None,
) -> UnsatisfiableError:
    """Adds the torch releases the arch rules kept out (those the requirement names, else the newest),
    when torch is part of the conflict."""
    if "torch" not in exc.packages or not target.is_gpu:
        return exc
    if inference is not None:
        facts = with_inferred(facts, inference)
    refused = torch_admission(facts, target, platform, window, inference.refused if inference else ()).refused
    asked = " ".join(d.specifier for d in spec.pypi_dependencies if d.name == "torch")
    named = [reason for release, reason in refused if release in asked]
    reasons = "; ".join(named or [reason for _, reason in refused[-3:]])
    return UnsatisfiableError(
        exc.message, f"the arch rules keep out: {reasons}. uv said: {exc.hint}"[:1800], exc.request_label, exc.packages
    )


def _decision(target: Target, platform: str, torch: str, plan: PypiPlan, inference: Inference | None) -> str:
    """The line resolve prints and the lock keeps: the torch chosen and why the nearest newer one is out (empty
    for a torch held at its version, which the lock of a team on a base keeps as it was)."""
    if plan.routes and not target.is_gpu:
        return f"torch {torch} from {routes_text(plan.routes)}: a CPU target takes no PyPI build (cpu-target)"
    if not target.is_gpu:
        return f"torch {torch} from the stack's indexes"
    if any(normalize(line.split("==")[0]) == "torch" for line in plan.constraints if "==" in line):
        return ""  # held at its version (a base's, or --update's holds): this resolve decided nothing about it
    routed = (plan.source.variant, plan.source.index) if plan.source else None
    return decision(platform, torch, plan.candidates, inference.refused if inference else (), routed)


def _compat_floor(facts: GpuFacts, window: CudaWindow) -> str | None:
    """The driver minor-version compatibility needs for the window's newest CUDA major (NVIDIA's Table 1)."""
    compat = facts.minor_version_compat.get(window.high.split(".")[0])
    return compat.min_driver if compat else None


def resolve_pypi(
    facts: GpuFacts,
    spec: StackSpec,
    stack_folder: Path,
    solved: list[SolvedRequest],
    progress: Callable[[str], None],
    held: dict[tuple[str, str], tuple[str, ...]] | None = None,
    stand_ins: dict[tuple[str, str], tuple[tuple[str, str], ...]] | None = None,
    preferred: dict[tuple[str, str], tuple[LockedPackage, ...]] | None = None,
    require_held: bool = False,
) -> dict[tuple[str, str], tuple[PypiPlan, list[LockedPackage]]]:
    """Pip entries per (target, platform), on top of the conda packages solved for it; `held` pins
    (`--update`: every pip package but the updated ones) are added to uv's constraints; `stand_ins` (a base's
    check-only builds, name and version) are offered to uv as empty wheels, so what requires them is solved
    against their versions;
    `preferred` versions (a base's, in the solve without its holds) are kept unless the requirements move them.
    With `require_held` the held pins are requirements too (a base that is a lock: no base stack requests
    them, and the whole environment must be consistent, not only what the team's dependencies reach). Local
    packages (`path`) are read in their folder below `stack_folder` (the stack file's): uv locks their dependencies, and
    each gets the
    entry that pins its folder (`local_source`)."""
    options = spec.pypi_options
    local_sources = tuple(
        (d.name, str(local_source.folder_of(stack_folder, d.path, d.name)))
        for d in spec.pypi_dependencies
        if d.path is not None
    )
    extra_indexes = tuple(
        dict.fromkeys(options.extra_index_urls + tuple(d.index for d in spec.pypi_dependencies if d.index))
    )
    sources = TorchSources(facts, spec, progress)
    jobs = []
    for solve in solved:
        target, window, request, conda_packages = solve.target, solve.window, solve.request, solve.packages
        python, held_here = held_by_conda(spec, conda_packages)
        ruled = needs_torch_rules(spec, target, held_here)
        inference = sources.inference(target, request.platform, python) if ruled else None
        offers = sources.offers(target, request.platform, python) if ruled else ()
        plan = plan_pypi(facts, spec, target, request.platform, window, conda_packages, inference, offers)
        pins = tuple(
            p for p in (held or {}).get((target.name, request.platform), ()) if p.split("==")[0] not in plan.held
        )
        if window is not None:  # every CUDA-versioned wheel within the window, but those a base holds
            pinned = frozenset(normalize(p.split("==")[0]) for p in pins) | frozenset(plan.held)
            by_owner = frozenset(by_owner_rule(facts, target, window))
            plan = dataclasses.replace(
                plan, constraints=plan.constraints + window_constraints(window, pinned, by_owner)
            )
        if pins:
            plan = dataclasses.replace(
                plan,
                constraints=plan.constraints + pins,
                requirements=plan.requirements + (pins if require_held else ()),
            )
        jobs.append(
            PypiJob(
                target,
                window,
                request.platform,
                plan,
                inference,
                uv_resolver.PypiRequest(
                    label=f"target `{target.name}` on {request.platform}",
                    platform=request.platform,
                    glibc=target.glibc,
                    python=plan.python,
                    requirements=plan.requirements,
                    constraints=plan.constraints,
                    stand_ins=(stand_ins or {}).get((target.name, request.platform), ()),
                    preferred=(preferred or {}).get((target.name, request.platform), ()),
                    index_url=options.index_url,
                    extra_index_urls=extra_indexes,
                    exclude_newer=spec.pypi_exclude_newer,
                    no_build=options.no_build,
                    routes=plan.routes,
                    local_sources=local_sources,
                ),
            )
        )

    def run(job: PypiJob) -> tuple[list[LockedPackage], float]:
        started = time.perf_counter()
        return uv_resolver.resolve(job.request), time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(jobs)))) as pool:
        futures = [pool.submit(run, job) for job in jobs]
        outcomes = []
        for job, future in zip(jobs, futures):  # request order: the first failing job in order is reported
            try:
                outcomes.append(future.result())
            except UnsatisfiableError as exc:
                raise _explained(exc, facts, spec, job.target, job.window, job.platform, job.inference) from None
            except ChannelError as exc:
                if not job.plan.routes:
                    raise
                variant = job.plan.source.variant if job.plan.source else "cpu"
                raise ChannelError(
                    exc.message,
                    f"{routes_text(job.plan.routes)} is where target `{job.target.name}`'s torch "
                    f"comes from: make it reachable or set [pypi-options] torch-indexes.{variant} or "
                    f"torch-mirror to a mirror; {exc.hint}",
                ) from None
    local_entries = (
        local_source.locked_entries(
            stack_folder, spec.pypi_dependencies, tuple(dict.fromkeys(job.platform for job in jobs))
        )
        if local_sources
        else {}
    )
    return {
        (job.target.name, job.platform): _judged(
            facts, spec, job, packages + local_entries.get(job.platform, []), seconds, progress
        )
        for job, (packages, seconds) in zip(jobs, outcomes)
    }


def _judged(
    facts: GpuFacts,
    spec: StackSpec,
    job: PypiJob,
    packages: list[LockedPackage],
    seconds: float,
    progress: Callable[[str], None],
) -> tuple[PypiPlan, list[LockedPackage]]:
    """One resolution judged (its torch against the arch rules, a CPU target's against any CUDA package), told
    to the user with the decision, and without the packages conda holds."""
    target, window, platform, plan, inference = job.target, job.window, job.platform, job.plan, job.inference
    check_resolved_torch(
        with_inferred(facts, inference) if inference else facts,
        target,
        platform,
        window,
        packages,
        plan.source.arch_lists if plan.source else (),
    )
    check_cpu_lock(target, platform, packages, plan.routes)
    kept = [p for p in packages if normalize(p.name) not in plan.held]
    torch = next((p.version for p in kept if normalize(p.name) == "torch"), None)
    progress(
        f"resolved PyPI for {target.name} on {platform}: {len(kept)} wheels"
        + (f", torch {torch}" if torch else "")
        + f" in {seconds:.2f}s"
    )
    if window is not None and (
        components := components_text(
            window, packages, target.driver or "", _compat_floor(facts, window), by_owner_rule(facts, target, window)
        )
    ):
        plan = dataclasses.replace(plan, components=components)
    if torch is not None:
        plan = dataclasses.replace(plan, decision=_decision(target, platform, torch, plan, inference))
        progress(f"{target.name} on {platform}: {plan.decision or f'torch {torch}, held at its version'}")
    return plan, kept
