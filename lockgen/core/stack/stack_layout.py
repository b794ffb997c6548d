"""Where a stack's files live, for every command: `<stack folder>/locks/<target>.conda-lock.yml` and
`<stack folder>/certs/<target>-<arch>-<time>.cert.json`; a lock named outside a stack folder (freeze,
import) defaults to `locks/<target>.conda-lock.yml` under the working folder. A team stack's `extends` names
a base stack.toml, a lock, or lockgen's image of one, whose lock it keeps as `locks/_base.conda-lock.yml`."""

from __future__ import annotations

import re
from pathlib import Path

from lockgen.errors import UserError
from lockgen.model.inputs import StackBase

TARGET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

LOCK_SUFFIX = ".conda-lock.yml"
CERT_SUFFIX = ".cert.json"
MANIFESTS_SUFFIX = ".manifests.json.gz"


def lock_path(stack_folder: Path, target: str) -> Path:
    """The lock of `target` in the stack whose `stack.toml` sits in `stack_folder`; a target name is a file
    name, never a path (`--target ../../x` would write outside `locks/`)."""
    if not TARGET_NAME.fullmatch(target):
        raise UserError(
            f"target name `{target}` is not a name (letters, digits, `.`, `_`, `-`)",
            "pass a plain name such as h100 or gh200",
        )
    return stack_folder / "locks" / f"{target}{LOCK_SUFFIX}"


def stack_folder_of_lock(lock: Path) -> Path | None:
    """The folder of the stack a lock was resolved from, where it sits in that stack's `locks/` (what a local
    package's path is relative to); None for a lock elsewhere."""
    return lock.parent.parent if lock.parent.name == "locks" and lock.name.endswith(LOCK_SUFFIX) else None


def default_lock_path(target: str) -> Path:
    """Where freeze and import write when no --out is given: `locks/<target>.conda-lock.yml`, relative."""
    return lock_path(Path("."), target).relative_to(".")


def names_a_lock(extends: str) -> bool:
    """Whether a team stack's `extends` names a lock file (a base adopted from a node or image by `lockgen pin`)
    rather than a base stack.toml."""
    return extends.endswith((".yml", ".yaml")) and not names_an_image(extends)


def names_an_image(extends: str) -> bool:
    """Whether a team stack's `extends` names lockgen's image of a base (`docker://HOST/REPO@sha256:…`, or an OCI
    layout folder): the lock it carries is the base."""
    return extends.startswith("docker://") or not extends.endswith((".toml", ".yml", ".yaml"))


def image_base_lock_path(stack_folder: Path) -> Path:
    """Where a team stack keeps the lock its base image carries (`locks/_base.conda-lock.yml`: no target can
    be named `_base`)."""
    return stack_folder / "locks" / f"_base{LOCK_SUFFIX}"


def located_base(stack_path: Path, extends: str) -> StackBase:
    """The base a team stack at `stack_path` extends (`extends` relative to the team stack's folder), located: a
    base stack, a lock, or lockgen's image of one, whose carried lock is kept beside the team's locks. The one
    answer to where a base is: the stack reader, resolve, export and certs all ask here."""
    if names_an_image(extends):
        image: str | Path = extends if extends.startswith("docker://") else stack_path.parent / extends
        return StackBase(extends, "image", image_base_lock_path(stack_path.parent), image)
    return StackBase(extends, "lock" if names_a_lock(extends) else "stack", stack_path.parent / extends)


def base_lock_of(base: StackBase, target: str) -> Path:
    """Where `base` keeps its lock for `target` (a base that is a lock is its one target's lock)."""
    return base.path if base.is_lock else lock_path(base.path.parent, target)


def team_lock_base(team_lock_path: Path, extends: str, target: str) -> Path:
    """The base lock of a team lock file at `team_lock_path` (its stack is the folder above its `locks/`)."""
    return base_lock_of(located_base(team_lock_path.parent.parent / "stack.toml", extends), target)


def target_of_lock(path: Path) -> str:
    """The target a lock file is named for (`a100.conda-lock.yml` -> `a100`)."""
    return path.name.removesuffix(LOCK_SUFFIX).split(".")[0]


def certificate_path(lock: Path | None, arch: str, stamp: str, working_folder: Path) -> Path:
    """Where a certificate goes: the `certs/` folder beside the lock's `locks/` folder, named for the target,
    arch and time; without a lock, the working folder."""
    if lock is None:
        return working_folder / f"lockgen-{arch}-{stamp}{CERT_SUFFIX}"
    return lock.parent.parent / "certs" / f"{target_of_lock(lock)}-{arch}-{stamp}{CERT_SUFFIX}"


def manifests_path(lock: Path) -> Path:
    """The manifests bundle written beside a lock (`h200.conda-lock.yml` -> `h200.manifests.json.gz`)."""
    return lock.with_name(f"{target_of_lock(lock)}{MANIFESTS_SUFFIX}")
