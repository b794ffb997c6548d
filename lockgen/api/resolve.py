"""Use case `lockgen resolve`: a stack becomes one lock per target (the solve and the writes are
`resolve_steps`', shared with `lockgen add`), and `resolve --check`, which says why each lock is stale
without solving anything."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters.lock.lockfile_yaml import load_lock, read_lock
from lockgen.api.steps import team_steps
from lockgen.api.steps import resolve_steps, stack_steps
from lockgen.api.steps.resolve_steps import Progress, ResolveContext, lock_targets, selected
from lockgen.errors import LockgenError, UserError
from lockgen.model.lock import LoadedLock, Lock
from lockgen.model.plan import CudaWindow
from lockgen.model.resolved import TargetResult
from lockgen.model.spec import Target

if TYPE_CHECKING:
    from lockgen.core.lock.freshness import Staleness


def resolve(
    stack_path: Path,
    targets: Sequence[str] = (),
    updates: Sequence[str] = (),
    aliases: Sequence[str] = (),
    dry_run: bool = False,
    progress: Progress = lambda _: None,
    insecure: bool = False,
) -> list[TargetResult]:
    """Solves every selected target and writes its lock; nothing is written unless all succeed. A team stack
    (`extends`) is solved with every package of the base's lock for the target held. `insecure`: a base image
    in a plain-HTTP or self-signed registry."""
    resolving = resolve_steps.context(stack_path, aliases, insecure, progress)
    current = (
        {t.name: _current_lock(resolving, t) for t in selected(resolving.spec, targets)} if updates else {}
    )  # each read once
    locked = lock_targets(resolving, targets, updates, current, dry_run, progress, partial(_lock_if_any, resolving))
    return [done.result for done in locked]


def _lock_if_any(context: ResolveContext, target: Target) -> LoadedLock | None:
    """The target's existing lock, where there is one that reads, asked only where its folder cannot be written
    (whether the resolve would change it)."""
    try:
        return read_lock(context.lock_path(target))
    except LockgenError:
        return None


def _current_lock(context: ResolveContext, target: Target) -> LoadedLock:
    """For `--update`: the target's existing lock, read once (its holds, and the bytes kept when nothing moved)."""
    path = context.lock_path(target)
    if not path.is_file():
        raise UserError(
            f"--update needs the existing lock of target `{target.name}` ({path})", "resolve without --update first"
        )
    return read_lock(path)


def stale(
    stack_path: Path,
    targets: Sequence[str] = (),
    aliases: Sequence[str] = (),
    progress: Progress = lambda _: None,
    insecure: bool = False,
) -> list[Staleness]:
    """Why each selected target's lock is stale (empty when all are fresh)."""
    from lockgen.core.lock.freshness import Staleness, stale_reasons

    context = resolve_steps.context(stack_path, aliases, insecure, progress)
    reasons: list[Staleness] = []
    for target in selected(context.spec, targets):
        path = context.lock_path(target)
        if not path.is_file():
            reasons.append(Staleness(target.name, "target-missing", f"no lock at {path}"))
            continue
        window, requests = context.plan(target)
        base = (
            (context.spec.extends, team_steps.base_lock_bytes(context.stack, target).sha256)
            if context.spec.extends
            else None
        )
        base_lock = context.stack.base_lock.lock if context.stack.base_lock is not None else None
        expected = context.metadata(target, window, requests, None, base, None, base_lock)
        lock = load_lock(path)
        found = stale_reasons(target.name, lock, expected) + stack_steps.local_staleness(
            stack_path.parent, target.name, lock
        )
        if not found and context.spec.pypi_dependencies:
            found = _facts_reasons(context, target, window, lock, progress)
        reasons.extend(found)
    return reasons


def _facts_reasons(
    context: ResolveContext, target: Target, window: CudaWindow | None, lock: Lock, progress: Progress
) -> list[Staleness]:
    """`facts-changed`: the torch releases admitted now (facts, and the index's evidence of newer releases)
    against those the lock was resolved with, on top of the lock's own conda packages."""
    from lockgen.core.lock.freshness import facts_changed
    from lockgen.core.pypi.pypi_plan import plan_pypi

    from lockgen.core.pypi.pypi_plan import held_by_conda, needs_torch_rules

    sources = context.torch_sources(progress)
    found: list[Staleness] = []
    for platform in lock.metadata.platforms:
        conda = [p for p in lock.packages_for(platform) if p.manager == "conda"]
        python, held = held_by_conda(context.spec, conda)
        ruled = needs_torch_rules(context.spec, target, held)
        plan = plan_pypi(
            context.facts,
            context.spec,
            target,
            platform,
            window,
            conda,
            sources.inference(target, platform, python) if ruled else None,
            sources.offers(target, platform, python) if ruled else (),
        )
        found.extend(facts_changed(target.name, platform, lock, plan.constraints, plan.inferred))
    return found
