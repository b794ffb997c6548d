"""A step of resolve for team stacks (`[stack] extends`): the base's lock for each target held, package for
package, under the team's solve; and when the team's dependencies cannot be solved on the held base, which
base packages a free solve would move, so the error (or, with `override = true`, the lock) can name them.

The base may be a lock instead of a stack (`extends = "../vendor/locks/node.conda-lock.yml"`): a Python
environment adopted from a vendor image or a node by `freeze --inventory` and `pin`. Its packages are held
the same way, and the team lock takes their entries from it as they are, whether or not the team's
dependencies need them (there is no base stack to solve again); a check-only entry (a build no index
publishes, such as a vendor's own torch) is offered to uv as a stand-in of its name and version, so the
team's requirements on it are solved against that version (its own requirements are not known: the
inventory keeps no METADATA)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.adapters.stack_file import base_stack_path
from lockgen.core import lock_builder, stack_layout
from lockgen.core.lock_builder import LockgenMeta
from lockgen.digests import file_digest
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.names import normalize
from lockgen.model.spec import StackSpec, Target

CondaPins = dict[str, list[tuple[str, str, str]]]  # platform -> (name, version, build)
PipPins = dict[str, tuple[str, ...]]  # platform -> name==version


def base_lock_path(stack_path: Path, extends: str, target: str) -> Path:
    """Where the base that a team stack at `stack_path` extends keeps its lock for `target` (a base that is a
    lock is its one target's lock)."""
    if stack_layout.names_a_base_lock(extends):
        return base_stack_path(stack_path, extends)
    return stack_layout.lock_path(base_stack_path(stack_path, extends).parent, target)


def held_base_path(team_lock_path: Path, team_lock: Lock) -> Path | None:
    """The base lock a team lock file names (its stack is the folder above its locks/), or None for a lock of a
    stack that extends no base."""
    extends = LockgenMeta(team_lock).extends
    return base_lock_path(team_lock_path.parent.parent / "stack.toml", extends, LockgenMeta(team_lock).target) if extends else None


def required_base_lock(stack_path: Path, spec: StackSpec, target: Target) -> Path:
    """The base's lock for `target`, which must have been resolved first."""
    assert spec.extends is not None
    path = base_lock_path(stack_path, spec.extends, target.name)
    if not path.is_file() and stack_layout.names_an_image(spec.extends):
        raise UserError(f"the lock of the base image {spec.extends} is not here ({path})",
                        "resolve the team stack: it reads the lock the image carries")
    if not path.is_file() and stack_layout.names_a_lock(spec.extends):
        raise UserError(f"the base lock {path} does not exist", "pin it again (lockgen pin), or fix `extends`")
    if not path.is_file():
        raise UserError(f"the base stack has no lock for target `{target.name}` ({path})",
                        f"resolve the base first: lockgen resolve {base_stack_path(stack_path, spec.extends)}")
    return path


def base_lock(stack_path: Path, spec: StackSpec, target: Target) -> tuple[Lock, str]:
    """(the base's lock for `target`, its sha256); the base must have been resolved first."""
    path = required_base_lock(stack_path, spec, target)
    return load_lock(path), file_digest(path)


def holds(lock: Lock, released: set[str]) -> tuple[CondaPins, PipPins]:
    """Every package of `lock` as a pin, per platform, but those in `released` (a team's base held, moved by
    override; or a lock held for `--update`, the updated ones released)."""
    conda: CondaPins = {}
    pip: dict[str, list[str]] = {}
    for package in lock.package:
        if normalize(package.name) in released:
            continue
        if package.manager == "conda":
            conda.setdefault(package.platform, []).append((package.name, package.version, package.build or ""))
        else:
            pip.setdefault(package.platform, []).append(f"{package.name}=={package.version}")
    return conda, {platform: tuple(sorted(lines)) for platform, lines in pip.items()}


def with_team_pins(base: tuple[CondaPins, PipPins], team: tuple[CondaPins, PipPins]) -> tuple[CondaPins, PipPins]:
    """The base's holds, plus `--update`'s pins of the team's own packages (a base package is the base's)."""
    conda = {platform: list(pins) for platform, pins in base[0].items()}
    for platform, pins in team[0].items():
        held = {name for name, _, _ in conda.get(platform, [])}
        conda.setdefault(platform, []).extend(p for p in pins if p[0] not in held)
    pip = dict(base[1])
    for platform, pins in team[1].items():
        held = {line.split("==")[0] for line in pip.get(platform, ())}
        pip[platform] = tuple(sorted(set(pip.get(platform, ())) | {p for p in pins if p.split("==")[0] not in held}))
    return conda, pip


def moved(lock: Lock, platform: str, solved: list[LockedPackage], base_is_lock: bool = False) -> dict[str, str]:
    """{normalised name: `name base-version -> version`} for each package of the base lock a solve changed or
    dropped (the names are what `holds` releases, the texts what errors and the lock show). On a base that
    is a lock, a package the solve leaves out is not dropped: the team does not need it, and it stays held."""
    found = {normalize(p.name): p.version for p in solved}
    changes = {}
    for package in sorted(lock.packages_for(platform), key=lambda p: normalize(p.name)):
        now = found.get(normalize(package.name))
        if now is None and base_is_lock:
            continue
        if now != package.version:
            changes[normalize(package.name)] = f"{package.name} {package.version} -> {now or '(removed)'}"
    return changes


def check_only(lock: Lock) -> dict[str, tuple[tuple[str, str], ...]]:
    """The check-only entries of a lock, (name, version) per platform: stood in for in the team's PyPI solve."""
    held: dict[str, list[tuple[str, str]]] = {}
    for package in lock.package:
        if not lock_builder.is_check_only(package):
            continue
        try:  # its name and version become a wheel's file name and uv's pin
            Version(package.version)
        except InvalidVersion:
            raise LockFormatError(f"the base lock's check-only {package.name} has version `{package.version[:60]}`, "
                                  "not a PEP 440 version", "pin the base again from its inventory (lockgen pin)") from None
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", package.name):
            raise LockFormatError(f"the base lock's check-only `{package.name[:60]}` is not a project name",
                                  "pin the base again from its inventory (lockgen pin)")
        held.setdefault(package.platform, []).append((normalize(package.name), package.version))
    return {platform: tuple(sorted(found)) for platform, found in held.items()}


def with_base_entries(lock: Lock, platform: str, solved: list[LockedPackage], released: set[str]) -> list[LockedPackage]:
    """A team lock's packages on a base that is a lock: every held entry of the base as it is (its URL, hash
    and check-only state; the team's solve saw only its name and version), and the solved packages the base
    does not hold."""
    held = [p for p in lock.packages_for(platform) if normalize(p.name) not in released]
    names = {normalize(p.name) for p in held}
    return held + [p for p in solved if normalize(p.name) not in names]


def published_pip(lock: Lock, platform: str) -> tuple[LockedPackage, ...]:
    """The lock's pip entries with a published wheel on `platform`: the versions a solve without the holds
    prefers, so that it moves only what the team's requirements must."""
    return tuple(p for p in lock.packages_for(platform) if p.manager == "pip" and not lock_builder.is_check_only(p))


def conda_of(lock: Lock, platform: str) -> list[LockedPackage]:
    """A base lock's conda packages on `platform`: on a base that is a lock they stand for the conda solve,
    so the team's wheels are solved on its conda python and next to the Python packages conda provides."""
    return [p for p in lock.packages_for(platform) if p.manager == "conda"]
