"""Team stacks' pure rules (`[stack] extends`): the base lock's packages as holds under the team's solve, which
base packages a solve moved, the entries a team lock takes from a base that is a lock, and what a team export
takes from its base image (the layer key each package has, the prefix it goes to, the base's Python and what it
needs). The files and images these rules are applied to are read by the steps: `api/steps/team_steps` (resolve) and
`api/steps/held_base_steps` (export).

A check-only entry of a base lock (a build no index publishes, such as a vendor's own torch) is offered to uv as a
stand-in of its name and version, so its name must be a project name and its version PEP 440."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lockgen.core.lock import lock_builder
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.names import normalize
from lockgen.model.oci import LOCK_LABEL, PREFIX_LABEL

if TYPE_CHECKING:  # an image's documents: only a team stack on an image reads them (not every resolve)
    from lockgen.model.environment_record import ManifestEntry
    from lockgen.model.oci_documents import OciConfig

CondaPins = dict[str, list[tuple[str, str, str]]]  # platform -> (name, version, build)
PipPins = dict[str, tuple[str, ...]]  # platform -> name==version


@dataclass(frozen=True)
class HeldEnvironment:
    """The held packages (layer keys: `name-version-build`, `pypi-<name>-<version>`), their conda-meta
    records (bytes by prefix-relative path), the base environment's manifest entries (by path), and the
    held packages linked again all the same (the Python that installs the team's wheels, and what it needs)."""

    packages: frozenset[str]
    records: dict[str, bytes]
    entries: dict[str, ManifestEntry]
    relinked: frozenset[str] = frozenset()


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
    for platform, lines in team[1].items():
        held = {line.split("==")[0] for line in pip.get(platform, ())}
        pip[platform] = tuple(sorted(set(pip.get(platform, ())) | {p for p in lines if p.split("==")[0] not in held}))
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
    from packaging.version import InvalidVersion, Version  # here: only a team stack's base lock has check-only entries

    held: dict[str, list[tuple[str, str]]] = {}
    for package in lock.package:
        if not lock_builder.is_check_only(package):
            continue
        try:  # its name and version become a wheel's file name and uv's pin
            Version(package.version)
        except InvalidVersion:
            raise LockFormatError(
                f"the base lock's check-only {package.name} has version `{package.version[:60]}`, not a PEP 440 "
                "version",
                "pin the base again from its inventory (lockgen pin)",
            ) from None
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", package.name):
            raise LockFormatError(
                f"the base lock's check-only `{package.name[:60]}` is not a project name",
                "pin the base again from its inventory (lockgen pin)",
            )
        held.setdefault(package.platform, []).append((normalize(package.name), package.version))
    return {platform: tuple(sorted(found)) for platform, found in held.items()}


def with_base_entries(
    lock: Lock, platform: str, solved: list[LockedPackage], released: set[str]
) -> list[LockedPackage]:
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


def package_key(package: LockedPackage) -> str:
    """A locked package's layer key, as export names a package's layer: a conda package's is its conda-meta
    record's stem (`name-version-build`), a wheel's `pypi-<normalised name>-<version>`."""
    if package.manager == "conda":
        return f"{package.name}-{package.version}-{package.build}"
    return _pypi_key(package.name, package.version)


def dist_info_key(folder: str) -> str:
    """The layer key of an installed distribution by its dist-info folder's name (`Torch_Stuff-2.1.dist-info`):
    the `package_key` of its lock entry."""
    name, _, version = folder.removesuffix(".dist-info").rpartition("-")
    return _pypi_key(name, version)


def _pypi_key(name: str, version: str) -> str:
    return f"pypi-{normalize(name)}-{version}"


def team_prefix(lock: Lock, base_config: OciConfig, default: str) -> str:
    """Where a team lock's environment goes on a base image: the prefix of the base's environment when the
    base is lockgen's image of the base lock this team lock was held to (an adopted environment keeps its own
    path, `/opt/torch/.venv` say), else `default`."""
    labels = (base_config.get("config") or {}).get("Labels") or {}
    held_to = LockgenMeta(lock).base_lock
    if not held_to or labels.get(LOCK_LABEL) != held_to:
        return default
    prefix = str(labels.get(PREFIX_LABEL, ""))
    from lockgen.core.image.image_config import is_environment_prefix  # its rules: only for an image base

    if not is_environment_prefix(prefix):
        raise LockFormatError(
            f"the base image names its environment at `{prefix[:80]}`, not a folder inside the image",
            "pass lockgen's own image of the base lock, exported again",
        )
    return prefix


def same_builds(lock: Lock, base_lock: Lock, platform: str) -> None:
    """Refuses a team lock whose package of a held name, version and build is another archive than the base
    lock's (a channel that republished it): the base image's files would not be the lock's."""
    mine = {package_key(p): p.hash for p in lock.packages_for(platform)}
    for package in base_lock.packages_for(platform):
        if mine.get(package_key(package), package.hash) != package.hash:
            raise UserError(
                f"the team lock's {package.name} {package.version} is another archive than its base lock's "
                f"(sha256 {mine[package_key(package)].sha256} against {package.hash.sha256})",
                "resolve the base stack and then the team stack again, or export without --base",
            )


def python_closure(lock: Lock, platform: str) -> frozenset[str]:
    """The layer keys of the lock's conda python and every conda package it needs, transitively; empty
    without a conda python."""
    conda = {p.name: p for p in lock.packages_for(platform) if p.manager == "conda"}
    pending, seen = ["python"] if "python" in conda else [], set()
    while pending:  # bounded: each name is entered once
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(n for n in conda[name].dependencies if n in conda and n not in seen)
    return frozenset(package_key(conda[name]) for name in seen)
