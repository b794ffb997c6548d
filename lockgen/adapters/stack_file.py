"""Reads a `stack.toml` from disk for the pure parser (`core.spec_parse`), turning a missing or
unreadable file into a SpecError naming it; a team stack's base (`[stack] extends`) is read first."""

from __future__ import annotations

from pathlib import Path

from lockgen.core.spec_parse import extends_of, parse_stack_text
from lockgen.errors import SpecError
from lockgen.model.spec import StackSpec


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"stack file `{path}` does not exist", "pass the path of a stack.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read stack file `{path}`: {exc}", "check the file's permissions and encoding") from None


def base_stack_path(path: Path, extends: str) -> Path:
    """The base stack a team stack at `path` extends (a path relative to the team stack's folder)."""
    return path.parent / extends


def parse_stack_file(path: Path) -> StackSpec:
    """Reads and parses a stack file (and the base it `extends`, one level); every problem is a SpecError
    naming file and line."""
    text = _read(path)
    extends = extends_of(text, str(path))
    if extends is None:
        return parse_stack_text(text, str(path))
    base_path = base_stack_path(path, extends)
    base_text = _read(base_path)
    if extends_of(base_text, str(base_path)) is not None:
        raise SpecError(f"the base stack {base_path} extends another stack itself",
                        "extend the stack at the root of the chain: a team stack sits on one base", str(path))
    return parse_stack_text(text, str(path), parse_stack_text(base_text, str(base_path)))
