"""Reads a `stack.toml` from disk for the pure parser (`core.spec_parse`), turning a missing or
unreadable file into a SpecError naming it; a team stack's base (`[stack] extends`, a stack or a lock) is read
first."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.spec_parse import extends_of, parse_stack_text
from lockgen.core import stack_layout
from lockgen.core.stack_layout import image_base_lock_path, names_a_base_lock
from lockgen.errors import LockgenError, SpecError
from lockgen.model.spec import LockBase, StackSpec



def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"stack file `{path}` does not exist", "pass the path of a stack.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read stack file `{path}`: {exc}", "check the file's permissions and encoding") from None


def declared_extends(path: Path) -> str | None:
    """What the stack file at `path` says it extends, read before the whole file is parsed."""
    return extends_of(_read(path), str(path))


def parse_stack_file(path: Path) -> StackSpec:
    """Reads and parses a stack file (and the base it `extends`, one level); every problem is a SpecError
    naming file and line."""
    text = _read(path)
    extends = extends_of(text, str(path))
    if extends is None:
        return parse_stack_text(text, str(path))
    base_path = stack_layout.base_path(path, extends)
    if names_a_base_lock(extends):
        return parse_stack_text(text, str(path), lock_base(base_path, str(path)))
    base_text = _read(base_path)
    if extends_of(base_text, str(base_path)) is not None:
        raise SpecError(f"the base stack {base_path} extends another stack itself",
                        "extend the stack at the root of the chain: a team stack sits on one base", str(path))
    return parse_stack_text(text, str(path), parse_stack_text(base_text, str(base_path)))


def lock_base(path: Path, source: str) -> LockBase:
    """What a team stack takes from the lock it extends (its target, platforms, Python, recorded hardware)."""
    if not path.is_file():
        raise SpecError(f"the base lock {path} does not exist", "resolve the team stack, which reads the lock its base "
                        "image carries" if path == image_base_lock_path(path.parent.parent) else "pin or resolve it "
                        "first (lockgen pin INVENTORY --target NAME --out PATH), or fix `extends`", source)
    try:
        lock = load_lock(path)
    except LockgenError as exc:
        raise SpecError(f"the base lock {path}: {exc.message}", exc.hint or "pass a lock lockgen wrote", source) from None
    from lockgen.core.expected_env import lock_python  # a stack on a lock's only

    target = LockgenMeta(lock).target
    pythons = {lock_python(lock, platform) for platform in lock.metadata.platforms} - {None}
    if not target or len(pythons) > 1:
        raise SpecError(f"the base lock {path} names no target, or several Pythons",
                        "extend a lock that lockgen pin, freeze or resolve wrote for one target", source)
    facts = LockgenMeta(lock).target_facts
    return LockBase(target=target, platforms=lock.metadata.platforms, python=next(iter(pythons), None), facts=facts)
