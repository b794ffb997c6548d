"""A step of resolve for team stacks (`[stack] extends`): where the base's lock for each target is, and
reading it, so resolve can hold it, package for package, under the team's solve (the holds, the packages a
free solve would move, and the entries a team lock takes from a base that is a lock are pure rules in
`core/team.py`).

The base may be a lock instead of a stack (`extends = "../vendor/locks/node.conda-lock.yml"`): a Python
environment adopted from a vendor image or a node by `freeze --inventory` and `pin`. Its packages are held
the same way, and the team lock takes their entries from it as they are, whether or not the team's
dependencies need them (there is no base stack to solve again); a check-only entry (a build no index
publishes, such as a vendor's own torch) is offered to uv as a stand-in of its name and version, so the
team's requirements on it are solved against that version (its own requirements are not known: the
inventory keeps no METADATA)."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.core import stack_layout
from lockgen.core.lock_builder import LockgenMeta
from lockgen.digests import file_digest
from lockgen.errors import UserError
from lockgen.model.lock import Lock
from lockgen.model.spec import StackSpec, Target


def held_base_path(team_lock_path: Path, team_lock: Lock) -> Path | None:
    """The base lock a team lock file names (its stack is the folder above its locks/), or None for a lock of a
    stack that extends no base."""
    extends = LockgenMeta(team_lock).extends
    return stack_layout.team_lock_base(team_lock_path, extends, LockgenMeta(team_lock).target) if extends else None


def required_base_lock(stack_path: Path, spec: StackSpec, target: Target) -> Path:
    """The base's lock for `target`, which must have been resolved first."""
    assert spec.extends is not None
    path = stack_layout.base_lock_path(stack_path, spec.extends, target.name)
    if not path.is_file() and stack_layout.names_an_image(spec.extends):
        raise UserError(f"the lock of the base image {spec.extends} is not here ({path})",
                        "resolve the team stack: it reads the lock the image carries")
    if not path.is_file() and stack_layout.names_a_lock(spec.extends):
        raise UserError(f"the base lock {path} does not exist", "pin it again (lockgen pin), or fix `extends`")
    if not path.is_file():
        raise UserError(f"the base stack has no lock for target `{target.name}` ({path})",
                        f"resolve the base first: lockgen resolve {stack_layout.base_path(stack_path, spec.extends)}")
    return path


def base_lock(stack_path: Path, spec: StackSpec, target: Target) -> tuple[Lock, str]:
    """(the base's lock for `target`, its sha256); the base must have been resolved first."""
    path = required_base_lock(stack_path, spec, target)
    return load_lock(path), file_digest(path)
