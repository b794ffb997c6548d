"""Use case `lockgen add` and `lockgen remove`: a package put in or taken out of the stack's `[dependencies]`
or `[pypi-dependencies]` (every other byte of the file as it was: `core/stack/stack_edit.py`), the stack re-locked
by resolve's own step on the edited text, and what changed in each lock. The edited stack is written only
after every lock is: a change that does not parse or solve leaves the stack, and its locks, as they were."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.atomic_files import check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.api.steps import resolve_steps
from lockgen.api.steps.resolve_steps import Progress, lock_targets, selected
from lockgen.api.steps.stack_steps import stack_text
from lockgen.core.stack import stack_edit
from lockgen.core.lock.lock_diff import diff_locks
from lockgen.errors import LockgenError, SpecError, UserError
from lockgen.model.lock import LoadedLock, Lock
from lockgen.model.requests import StackEditRequest
from lockgen.model.results import RelockedTarget, StackEdited


def add(request: StackEditRequest, progress: Progress = lambda _: None) -> StackEdited:
    """Adds each package of `request` to its table (the one the stack file uses, unless the request names one),
    re-locks and writes the stack. A package the stack names already, or a spec that does not parse, is refused
    before anything is solved."""
    old = stack_text(request.stack)
    table = request.table or stack_edit.default_table(old)
    additions = [stack_edit.addition(word, table) for word in request.packages]
    if table == "dependencies":
        from lockgen.adapters.conda.rattler_solver import check_match_spec

        for added in additions:
            check_match_spec(added.match_spec, f"write {stack_edit.EXAMPLES['dependencies']}")
    return _relocked(request, old, stack_edit.with_added(old, additions, str(request.stack)), progress)


def remove(request: StackEditRequest, progress: Progress = lambda _: None) -> StackEdited:
    """Takes each named package out of the stack's tables, re-locks and writes the stack."""
    old = stack_text(request.stack)
    return _relocked(request, old, stack_edit.without(old, list(request.packages), str(request.stack)), progress)


def _relocked(request: StackEditRequest, old: str, new: str, progress: Progress) -> StackEdited:
    """The stack re-locked as `new` says (resolve's step on the edited text), then `new` written in place of the
    stack file, whose permissions it keeps."""
    try:
        resolving = resolve_steps.context(request.stack, request.aliases, request.insecure, progress, new)
    except SpecError as exc:
        raise UserError(f"the stack would not be valid after this change: {exc.message}", exc.hint) from None
    chosen = selected(resolving.spec, request.targets)
    check_writable(
        request.stack,
        f"the edited {request.stack.name}",
        f"make `{request.stack.parent}` writable (the stack is replaced whole, as an editor saves it)",
    )  # before the solve, as the locks' folder is (`lock_targets`)
    read = {target.name: _lock_before(resolving.lock_path(target), progress) for target in chosen}
    before = {
        name: loaded for name, loaded in read.items() if loaded is not None
    }  # each read once: compared, and kept where unchanged
    locked = lock_targets(resolving, request.targets, current=before, progress=progress)
    write_atomic(request.stack, new, request.stack.stat().st_mode & 0o777)
    names = {target.name for target in chosen}
    stale = tuple(t.name for t in resolving.spec.targets if t.name not in names and resolving.lock_path(t).is_file())
    targets = tuple(RelockedTarget(done.result, _changes(before.get(done.result.target), done.lock)) for done in locked)
    return StackEdited(request.stack, tuple(stack_edit.changed_lines(old, new)), targets, stale)


def _lock_before(path: Path, progress: Progress) -> LoadedLock | None:
    """A target's lock as it was, to say what the edit changed in it; None where there is none, or one lockgen
    cannot read (the new lock replaces it all the same)."""
    if not path.is_file():
        return None
    try:
        return read_lock(path)
    except LockgenError as exc:
        progress(f"the lock {path} as it was cannot be read ({exc.message}): its changes are not shown")
        return None


def _changes(old: LoadedLock | None, new: Lock) -> tuple[str, ...] | None:
    if old is None:
        return None
    diff = diff_locks(old.lock, new)
    return tuple(
        [
            *(f"- platform {p}" for p in diff.platforms_only_in_a),
            *(f"+ platform {p}" for p in diff.platforms_only_in_b),
            *(c.line() for c in diff.changes),
        ]
    )
