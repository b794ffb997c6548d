"""The PyPI layer of resolve, a step of that use case (not one of its own): plans each target x platform
(core), resolves it with uv (adapter, several at once), and judges the torch it got (core)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from lockgen.adapters import uv_resolver
from lockgen.core.pypi_plan import PypiPlan, plan_pypi
from lockgen.core.pypi_rules import check_resolved_torch, torch_admission
from lockgen.errors import UnsatisfiableError
from lockgen.model.facts import GpuFacts
from lockgen.model.lock import LockedPackage
from lockgen.model.names import normalize
from lockgen.model.plan import CudaWindow, SolveRequest
from lockgen.model.spec import StackSpec, Target

Solved = list[tuple[Target, CudaWindow | None, SolveRequest, list[LockedPackage]]]


def _explained(exc: UnsatisfiableError, facts: GpuFacts, spec: StackSpec, target: Target, window: CudaWindow | None,
               platform: str) -> UnsatisfiableError:
    """Adds the torch releases the arch rules kept out (those the requirement names, else the newest),
    when torch is part of the conflict."""
    if "torch" not in exc.packages or not target.is_gpu:
        return exc
    refused = torch_admission(facts, target, platform, window).refused
    asked = " ".join(d.specifier for d in spec.pypi_dependencies if d.name == "torch")
    named = [reason for release, reason in refused if release in asked]
    reasons = "; ".join(named or [reason for _, reason in refused[-3:]])
    return UnsatisfiableError(exc.message, f"the arch rules keep out: {reasons}. uv said: {exc.hint}"[:1800],
                              exc.request_label, exc.packages)


def resolve_pypi(facts: GpuFacts, spec: StackSpec, solved: Solved, progress: Callable[[str], None],
                 held: dict[tuple[str, str], tuple[str, ...]] | None = None
                 ) -> dict[tuple[str, str], tuple[PypiPlan, list[LockedPackage]]]:
    """Pip entries per (target, platform), on top of the conda packages solved for it; `held` pins
    (`--update`: every pip package but the updated ones) are added to uv's constraints."""
    options = spec.pypi_options
    extra_indexes = tuple(dict.fromkeys(options.extra_index_urls + tuple(d.index for d in spec.pypi_dependencies if d.index)))
    jobs = []
    for target, window, request, conda_packages in solved:
        plan = plan_pypi(facts, spec, target, request.platform, window, conda_packages)
        pins = tuple(p for p in (held or {}).get((target.name, request.platform), ()) if p.split("==")[0] not in plan.held)
        if pins:
            plan = dataclasses.replace(plan, constraints=plan.constraints + pins)
        jobs.append((target, window, request.platform, plan, uv_resolver.PypiRequest(
            label=f"target `{target.name}` on {request.platform}", platform=request.platform, glibc=target.glibc,
            python=plan.python, requirements=plan.requirements, constraints=plan.constraints,
            index_url=options.index_url,
            extra_index_urls=extra_indexes, exclude_newer=options.exclude_newer, no_build=options.no_build)))

    def run(job: tuple) -> tuple[list[LockedPackage], float]:
        started = time.perf_counter()
        return uv_resolver.resolve(job[4]), time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(jobs)))) as pool:
        futures = [pool.submit(run, job) for job in jobs]
        outcomes = []
        for job, future in zip(jobs, futures):  # request order: the first failing job in order is reported
            try:
                outcomes.append(future.result())
            except UnsatisfiableError as exc:
                raise _explained(exc, facts, spec, job[0], job[1], job[2]) from None
    results = {}
    for (target, window, platform, plan, _), (packages, seconds) in zip(jobs, outcomes):
        check_resolved_torch(facts, target, platform, window, packages)
        kept = [p for p in packages if normalize(p.name) not in plan.held]
        torch = next((p.version for p in kept if normalize(p.name) == "torch"), None)
        progress(f"resolved PyPI for {target.name} on {platform}: {len(kept)} wheels"
                 + (f", torch {torch}" if torch else "") + f" in {seconds:.2f}s")
        results[(target.name, platform)] = (plan, kept)
    return results
