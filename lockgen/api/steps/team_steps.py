"""A step of resolve for team stacks (`[stack] extends`): the base's lock for each target, read once (a base
that is a lock comes read with its `LoadedStack`), so resolve can hold it, package for package, under the team's solve
(the holds, the packages a
free solve would move, and the entries a team lock takes from a base that is a lock are pure rules in
`core/stack/team.py`).

The base may be a lock instead of a stack (`extends = "../vendor/locks/node.conda-lock.yml"`): a Python
environment adopted from a vendor image or a node by `freeze --inventory` and `pin`. Its packages are held
the same way, and the team lock takes their entries from it as they are, whether or not the team's
dependencies need them (there is no base stack to solve again); a check-only entry (a build no index
publishes, such as a vendor's own torch) is offered to uv as a stand-in of its name and version, so the
team's requirements on it are solved against that version (its own requirements are not known: the
inventory keeps no METADATA).

Export and certs read here the base lock a team lock names (its `lockgen.extends`), once."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.lock import lock_file
from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.core.stack import stack_layout
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.errors import UserError
from lockgen.model.inputs import LoadedStack, LockBytes
from lockgen.model.lock import LoadedLock, Lock
from lockgen.model.spec import Target


def held_base_path(team_lock_path: Path, team_lock: Lock) -> Path | None:
    """The base lock a team lock file names (its stack is the folder above its locks/), or None for a lock of a
    stack that extends no base."""
    extends = LockgenMeta(team_lock).extends
    return stack_layout.team_lock_base(team_lock_path, extends, LockgenMeta(team_lock).target) if extends else None


def held_base(team_lock_path: Path, team_lock: Lock) -> LoadedLock | None:
    """The base lock a team lock file names, read once; None when it names none or the file is not there."""
    path = held_base_path(team_lock_path, team_lock)
    return read_lock(path) if path is not None and path.is_file() else None


def base_lock(stack: LoadedStack, target: Target) -> LoadedLock:
    """The base's lock for `target`, read once (a base that is a lock was, with the stack); a base stack must
    have been resolved first."""
    return stack.base_lock or read_lock(_base_stack_lock(stack, target))


def base_lock_bytes(stack: LoadedStack, target: Target) -> LockBytes | LoadedLock:
    """The base's lock for `target` as far as its digest (what `resolve --check` compares): a base stack's lock
    read and hashed, not parsed."""
    return stack.base_lock or lock_file.read(_base_stack_lock(stack, target))


def _base_stack_lock(stack: LoadedStack, target: Target) -> Path:
    """Where a base stack keeps its lock for `target`, which must have been resolved first."""
    assert stack.base is not None and not stack.base.is_lock  # a base lock was read with the stack
    path = stack_layout.base_lock_of(stack.base, target.name)
    if not path.is_file():
        raise UserError(
            f"the base stack has no lock for target `{target.name}` ({path})",
            f"resolve the base first: lockgen resolve {stack.base.path}",
        )
    return path
