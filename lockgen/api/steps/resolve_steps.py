"""A step below `lockgen resolve` and `lockgen add`/`remove`: a stack, read once (its text may be the one an
edit is about to write), solved per target (conda with rattler, then the PyPI layer with uv) and each target's
lock written only when every selected target solved; the locks it wrote, with what they hold."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters.atomic_files import check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import checked_lock_text
from lockgen.adapters.lock.kept_inputs import gpu_facts
from lockgen.api.steps import team_steps
from lockgen.api.steps.stack_steps import load_stack
from lockgen.core.lock import lock_builder, lock_meta
from lockgen.core.stack import stack_layout, team
from lockgen.core.gpu.arch_rules import ARCH_SPECIFIC_PACKAGES, cuda_window
from lockgen.core.gpu.facts import arch_fact
from lockgen.core.stack.plan import explain_exclusions, plan_request
from lockgen.errors import UnsatisfiableError, UserError
from lockgen.model.facts import GpuFacts
from lockgen.model.inputs import LoadedStack, StackBase
from lockgen.model.lock import LoadedLock, Lock, LockedPackage, LockMetadata
from lockgen.model.names import normalize
from lockgen.model.plan import CandidateBuild, CudaWindow, SolvedRequest, SolveRequest
from lockgen.model.resolved import LockState, TargetResult
from lockgen.model.spec import StackSpec, Target

if TYPE_CHECKING:  # imported when used: rattler only for conda stacks, uv only for PyPI ones
    from lockgen.adapters.conda.rattler_solver import ChannelSet
    from lockgen.core.pypi.pypi_plan import PypiPlan
    from lockgen.api.steps.torch_source_steps import TorchSources

Progress = Callable[[str], None]
RESOLVED_FIX = (
    "the stack or a channel's index gave this value: correct the stack (or the mirror's index) and resolve again"
)
HIGHLIGHTS = (
    "python",
    "pytorch",
    "libtorch",
    "cuda-version",
    "pytorch-cuda",
    "cudatoolkit",
    "cudnn",
    "nccl",
    "torch",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
)


@dataclass(frozen=True)
class LockedTarget:
    """One target's lock as resolve made it: what is said of it, and the lock itself (for a diff)."""

    result: TargetResult
    lock: Lock


@dataclass
class ResolveContext:
    stack: LoadedStack
    channels: "ChannelSet | None"  # None for pure-PyPI stacks; every use is behind spec.has_conda
    facts: GpuFacts = field(default_factory=gpu_facts)  # the packaged facts: validated once per install
    _candidates: dict[str, list[CandidateBuild]] = field(default_factory=dict)
    _sources: "TorchSources | None" = None

    @property
    def conda_channels(self) -> "ChannelSet":
        """The channels, asked for only behind spec.has_conda (load_stack reads them for every such stack)."""
        assert self.channels is not None, "a stack with conda dependencies has its channels read"
        return self.channels

    def candidates(self, platform: str) -> list[CandidateBuild]:
        if platform not in self._candidates:
            self._candidates[platform] = self.conda_channels.candidates(platform, ARCH_SPECIFIC_PACKAGES)
        return self._candidates[platform]

    def torch_sources(self, progress: Progress) -> "TorchSources":
        """One reader of the stack's torch sources per run (each page read once)."""
        from lockgen.api.steps.torch_source_steps import TorchSources

        if self._sources is None:
            self._sources = TorchSources(self.facts, self.spec, progress)
        return self._sources

    @property
    def spec(self) -> StackSpec:
        return self.stack.spec

    @property
    def stack_path(self) -> Path:
        return self.stack.path

    @property
    def base_is_lock(self) -> bool:
        """Whether the stack extends a lock (an adopted environment) rather than a base stack."""
        return self.stack.base is not None and self.stack.base.is_lock

    def lock_path(self, target: Target) -> Path:
        return stack_layout.lock_path(self.stack_path.parent, target.name)

    def plan(self, target: Target) -> tuple[CudaWindow | None, list[SolveRequest]]:
        window = None
        if target.is_gpu:
            arch_fact(self.facts, target.arch)
            window = cuda_window(self.facts, target)
        requests = [
            plan_request(
                self.facts,
                self.spec,
                target,
                platform,
                window,
                self.candidates(platform) if self.spec.has_conda else [],
            )
            for platform in self.spec.platforms_of(target)
        ]
        return window, requests

    def metadata(
        self,
        target: Target,
        window: CudaWindow | None,
        requests: list[SolveRequest],
        pypi: dict[str, PypiPlan] | None = None,
        base: tuple[str, str] | None = None,
        moved: dict[str, list[str]] | None = None,
        base_lock: Lock | None = None,
    ) -> LockMetadata:
        """What a lock records; without `pypi` (resolve --check, which solves nothing) the per-platform
        PyPI keys, which depend on the conda solution, are left out and not compared."""
        digests: dict[str, str] = {}
        hashes: dict[str, str] = {}
        for request in requests:
            platform_digests = (
                self.conda_channels.index_digests(request.platform, request.specs) if self.spec.has_conda else {}
            )
            digests.update(platform_digests)
            plan = (pypi or {}).get(request.platform)
            extra: dict[str, str | list[str]] = (
                {"python": plan.python, "pypi-constraints": list(plan.constraints)} if plan else {}
            )
            hashes[request.platform] = lock_meta.content_hash(self.spec, target, request, {**platform_digests, **extra})
        return lock_builder.resolved_metadata(
            self.spec,
            target,
            window,
            requests,
            digests,
            hashes,
            self.stack_path.name,
            pypi,
            self.facts.valid_as_of,
            base,
            moved,
            base_lock,
        )


def context(
    stack_path: Path,
    aliases: Sequence[str],
    insecure: bool = False,
    progress: Progress = lambda _: None,
    text: str | None = None,
) -> ResolveContext:
    """The stack, read once, and its channels; a base named by its image has the lock it carries fetched as the
    stack is read (kept beside the team's locks, an input like a channel's index, so even --check and --dry-run
    keep it). `text`: the stack's text as an edit would write it, parsed instead of the file's."""

    def fetch_image_base(base: StackBase) -> bytes:
        from lockgen.api.steps.image_base_steps import fetch_base_lock  # registries and layouts: only for an image base

        return fetch_base_lock(base, insecure, progress)

    stack, channels = load_stack(stack_path, aliases, fetch_image_base, text)
    return ResolveContext(stack, channels)


def selected(spec: StackSpec, names: Sequence[str]) -> list[Target]:
    known = {t.name for t in spec.targets}
    for name in names:
        if name not in known:
            raise UserError(f"no target `{name}` in stack `{spec.name}`", f"targets: {', '.join(sorted(known))}")
    return [t for t in spec.targets if not names or t.name in names]


def lock_targets(
    context: ResolveContext,
    targets: Sequence[str] = (),
    updates: Sequence[str] = (),
    current: dict[str, LoadedLock] | None = None,
    dry_run: bool = False,
    progress: Progress = lambda _: None,
    lock_if_any: Callable[[Target], LoadedLock | None] = lambda _: None,
) -> list[LockedTarget]:
    """Solves every selected target and writes its lock; nothing is written unless all succeed. A team stack
    (`extends`) is solved with every package of the base's lock for the target held. `current`: for `--update`,
    each selected target's existing lock, read once by the use case (its holds, and its bytes kept when nothing
    moved); `lock_if_any`: the target's existing lock, the use case reads it where it asks (None: none)."""
    current = current or {}
    chosen = selected(context.spec, targets)
    unwritable = {} if dry_run else _unwritable_locks(context, chosen, current, lock_if_any)
    plans = []
    for target in chosen:
        window, requests = context.plan(target)
        plans.append(PlannedTarget(target, window, requests))
        for request in requests:
            progress(f"resolving {target.name} ({target.arch}) for {request.platform}")
            for note in request.inferred_builds:
                progress(f"  {note}")
    bases = (
        {p.target.name: team_steps.base_lock(context.stack, p.target) for p in plans} if context.spec.extends else {}
    )
    released: dict[str, set[str]] = {}
    moved: dict[tuple[str, str], dict[str, str]] = {}
    try:
        conda, pypi = _solve(context, plans, updates, current, bases, released, progress)
    except UnsatisfiableError as exc:
        if not bases:
            raise
        moved = _moved_by_team(context, plans, updates, current, bases, exc, progress)
        released = {
            name: {package for (t, _), changes in moved.items() if t == name for package in changes} for name in bases
        }
        conda, pypi = _solve(context, plans, updates, current, bases, released, progress)
    planned = []
    for target, window, requests in ((p.target, p.window, p.requests) for p in plans):
        packages = [p for solve in conda if solve.target is target for p in solve.packages]
        packages += [p for r in requests for p in pypi.get((target.name, r.platform), (None, []))[1]]
        plans_of_target = {
            r.platform: pypi[(target.name, r.platform)][0] for r in requests if (target.name, r.platform) in pypi
        }
        base = (
            (context.spec.extends, bases[target.name].sha256) if target.name in bases and context.spec.extends else None
        )
        base_lock = bases[target.name].lock if target.name in bases and context.base_is_lock else None
        if base_lock is not None:
            packages = [
                p
                for r in requests
                for p in team.with_base_entries(
                    base_lock,
                    r.platform,
                    [p for p in packages if p.platform == r.platform],
                    released.get(target.name, set()),
                )
            ]
        metadata = context.metadata(
            target,
            window,
            requests,
            plans_of_target,
            base,
            {platform: list(changes.values()) for (name, platform), changes in moved.items() if name == target.name},
            base_lock,
        )
        planned.append((target, lock_builder.resolved_lock(metadata, packages)))
    texts = [
        checked_lock_text(lock, f"resolved for target {target.name}", RESOLVED_FIX) for target, lock in planned
    ]  # all, then write
    writes = []
    for (target, lock), text in zip(planned, texts):
        path, old = context.lock_path(target), current.get(target.name)
        if old is not None and _moved_nothing(old.lock, target, lock):
            progress(f"{target.name}: {_stays(lock, updates)} (the lock is unchanged)")
            text = old.data.decode("utf-8")
        on_disk = old.data if old is not None else path.read_bytes() if path.is_file() else None
        writes.append((target, lock, path, text, on_disk == text.encode("utf-8")))
    refused = [unwritable[t.name] for t, _, _, _, unchanged in writes if not unchanged and t.name in unwritable]
    if refused:
        raise refused[0]  # a lock that changes cannot be written: none is
    results = []
    for target, lock, path, text, unchanged in writes:
        if not dry_run and not unchanged:
            write_atomic(path, text)
        state: LockState = "unchanged" if unchanged else "would write" if dry_run else "wrote"
        results.append(
            LockedTarget(TargetResult(target.name, target.arch, path, state, _counts(lock), _highlights(lock)), lock)
        )
    return results


def _unwritable_locks(
    context: ResolveContext,
    targets: Sequence[Target],
    current: dict[str, LoadedLock],
    lock_if_any: Callable[[Target], LoadedLock | None],
) -> dict[str, UserError]:
    """Why each selected target's lock cannot be written, named as the stack lays it out (never a temporary file).
    A lock that must change (none yet, or stale by what the stack states) is refused here, before the solve; one
    fresh by them may come out unchanged, and nothing is written then: its refusal waits for the solve."""
    from lockgen.api.steps.stack_steps import stated_staleness

    found: dict[str, UserError] = {}
    for target in targets:
        path = context.lock_path(target)
        hint = f"make `{path.parent}` and its {path.name} writable, or copy the stack to a folder this user may write"
        try:
            check_writable(
                path, _locks_of([target.name]), hint + "; `lockgen resolve --check` reads without writing", file=True
            )
        except UserError as refused:
            loaded = current.get(target.name) or lock_if_any(target)
            if loaded is None or stated_staleness(context.stack, target, loaded):
                raise
            found[target.name] = refused
    return found


def _locks_of(names: Sequence[str]) -> str:
    return f"the lock of target `{names[0]}`" if len(names) == 1 else f"the locks of targets `{'`, `'.join(names)}`"


@dataclass(frozen=True)
class PlannedTarget:
    """A selected target with its CUDA window and its solve requests (one per platform)."""

    target: Target
    window: CudaWindow | None
    requests: list[SolveRequest]


Plans = list[PlannedTarget]


def _solve(
    context: ResolveContext,
    plans: Plans,
    updates: Sequence[str],
    current: dict[str, LoadedLock],
    bases: dict[str, LoadedLock],
    released: dict[str, set[str]],
    progress: Progress,
    hold_base: bool = True,
) -> tuple[list[SolvedRequest], dict]:
    """The conda solves of every plan, then the PyPI layer on top: (conda results, PyPI results)."""
    jobs: list[tuple[SolveRequest, list[tuple[str, str, str]] | None]] = []
    pip_pins: dict[tuple[str, str], tuple[str, ...]] = {}
    stand_ins: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
    preferred: dict[tuple[str, str], tuple[LockedPackage, ...]] = {}
    for target, requests in ((p.target, p.requests) for p in plans):
        pinned, held_pip = _pins(context, target, updates, current[target.name].lock) if updates else ({}, {})
        if target.name in bases and hold_base:
            base_holds = team.holds(bases[target.name].lock, released.get(target.name, set()))
            pinned, held_pip = team.with_team_pins(base_holds, (pinned, held_pip))
        if target.name in bases:
            stand_ins.update({(target.name, p): held for p, held in team.check_only(bases[target.name].lock).items()})
        if target.name in bases and not hold_base:  # what moves: the fewest base packages uv must change
            preferred.update(
                {(target.name, r.platform): team.published_pip(bases[target.name].lock, r.platform) for r in requests}
            )
        pip_pins.update({(target.name, platform): pins for platform, pins in held_pip.items()})
        jobs.extend((request, pinned.get(request.platform)) for request in requests)

    def done(request: SolveRequest, count: int, seconds: float) -> None:
        progress(f"resolved {request.target} for {request.platform}: {count} packages in {seconds:.2f}s")

    try:  # a base that is a lock has its conda packages solved already: the team's wheels go on top of them
        solved = iter(
            context.conda_channels.solve_all(jobs, done)
            if context.spec.has_conda
            else [team.conda_of(bases[r.target].lock, r.platform) if r.target in bases else [] for r, _ in jobs]
        )
    except UnsatisfiableError as exc:
        failing = next((r for r, _ in jobs if r.label == exc.request_label), None)
        if failing is None:
            raise
        raise _unsatisfiable(exc, failing, bool(updates)) from None
    conda = [SolvedRequest(p.target, p.window, request, next(solved)) for p in plans for request in p.requests]
    pypi = {}
    if context.spec.pypi_dependencies:
        from lockgen.api.steps.pypi import resolve_pypi

        pypi = resolve_pypi(
            context.facts,
            context.spec,
            context.stack.path.parent,
            conda,
            progress,
            pip_pins,
            stand_ins,
            preferred,
            require_held=context.base_is_lock and hold_base,
        )
    return conda, pypi


def _moved_by_team(
    context: ResolveContext,
    plans: Plans,
    updates: Sequence[str],
    current: dict[str, LoadedLock],
    bases: dict[str, LoadedLock],
    failed: UnsatisfiableError,
    progress: Progress,
) -> dict[tuple[str, str], dict[str, str]]:
    """Which base packages the team's dependencies move, from a solve without the holds; an error naming them
    unless the stack says `override = true`. When even the free solve fails, the holds were not the cause."""
    progress("the team's dependencies do not solve on the held base: solving without the holds to see what would move")
    try:
        conda, pypi = _solve(context, plans, updates, current, bases, {}, lambda _: None, hold_base=False)
    except UnsatisfiableError:
        raise failed from None
    moved = {}
    for solve in conda:
        name, platform = solve.target.name, solve.request.platform
        found = solve.packages + pypi.get((name, platform), (None, []))[1]
        changes = team.moved(bases[name].lock, platform, found, context.base_is_lock)
        if changes:
            moved[(name, platform)] = changes
    if not moved:
        raise failed
    shown = "; ".join(
        f"{name} on {platform}: {', '.join(list(changes.values())[:4])}"
        for (name, platform), changes in sorted(moved.items())
    )
    if not context.spec.override:
        raise UserError(
            f"the team's dependencies would move packages the base holds: {shown}",
            f"change the team's requirements, update the base ({context.spec.extends}), or set `override = true` "
            "under [stack] (the lock then records what moved)",
        )
    progress(f"override: {shown}")
    return moved


def _pins(
    context: ResolveContext, target: Target, updates: Sequence[str], lock: Lock
) -> tuple[team.CondaPins, dict[str, tuple[str, ...]]]:
    """For `--update`: the conda records to hold per platform, and the pip pins (`name==version`)."""
    names = {normalize(p.name) for p in lock.package}
    for update in updates:
        if normalize(update) not in names:
            tables = [
                name
                for name, used in (
                    ("[dependencies]", context.spec.has_conda),
                    ("[pypi-dependencies]", bool(context.spec.pypi_dependencies)),
                )
                if used
            ]
            raise UserError(
                f"`{update}` is not in the lock of target `{target.name}`",
                f"--update takes names of locked packages; add new ones to {' or '.join(tables)}",
            )
    local = {
        normalize(p.name) for p in lock.package if lock_builder.local_of(p) is not None
    }  # never held: read from its folder
    return team.holds(lock, _update_family(lock, {normalize(u) for u in updates} | local))


def _moved_nothing(existing: Lock, target: Target, lock: Lock) -> bool:
    """Whether an `--update` solve changed no package of the existing lock, whose inputs are otherwise current:
    then that lock is kept byte for byte (the holds it was solved with are no input of the stack, and a plain
    resolve would only write the same lock back)."""
    from lockgen.core.lock.freshness import stale_reasons

    return existing.package == lock.package and not stale_reasons(target.name, existing, lock.metadata)


def _stays(lock: Lock, updates: Sequence[str]) -> str:
    """`numpy stays at 2.4.6` for each updated name (each platform's version where they differ)."""
    said = []
    for update in updates:
        versions = {p.platform: p.version for p in lock.package if normalize(p.name) == normalize(update)}
        shown = (
            next(iter(versions.values()))
            if len(set(versions.values())) == 1
            else ", ".join(f"{v} on {platform}" for platform, v in sorted(versions.items()))
        )
        said.append(f"{update} stays at {shown}")
    return "; ".join(said)


def _update_family(lock: Lock, names: set[str]) -> set[str]:
    """The packages `--update` releases: the named ones and those pinned to them build for build
    (pytorch and libtorch, say), which can only move together."""
    versions = {(p.platform, p.name): p.version for p in lock.package}

    def exact(platform: str, name: str, spec: str) -> bool:
        return spec.split(" ")[0] in (versions.get((platform, name)), f"=={versions.get((platform, name))}")

    released = set(names)
    for package in lock.package:
        for dep, spec in package.dependencies.items():
            if package.name in names and exact(package.platform, dep, spec):
                released.add(dep)
            if dep in names and exact(package.platform, dep, spec):
                released.add(package.name)
    return released


def _unsatisfiable(exc: UnsatisfiableError, request: SolveRequest, pinned: bool) -> UnsatisfiableError:
    detail = " ".join(exc.hint.split())
    hint_parts = [explain_exclusions(request)] if request.excluded_builds else []
    if pinned:
        hint_parts.append("the update needs other locked packages to change: resolve without --update")
    hint_parts.append("loosen [dependencies] or change the target's driver/cuda")
    return UnsatisfiableError(
        f"{request.label} is unsatisfiable: {detail}",
        "; ".join(p for p in hint_parts if p),
        request.label,
        exc.packages,
    )


def _counts(lock: Lock) -> dict[str, int]:
    return {p: len(lock.packages_for(p)) for p in lock.metadata.platforms}


def _highlights(lock: Lock) -> dict[str, dict[str, str]]:
    return {
        platform: {
            p.name: f"{p.version} {p.build or ''}".strip() for p in lock.packages_for(platform) if p.name in HIGHLIGHTS
        }
        for platform in lock.metadata.platforms
    }
