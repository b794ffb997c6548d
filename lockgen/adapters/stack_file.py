"""Reads a `stack.toml` from disk for the pure parser (`core.spec_parse`), turning a missing or
unreadable file into a SpecError naming it."""

from __future__ import annotations

from pathlib import Path

from lockgen.core.spec_parse import parse_stack_text
from lockgen.errors import SpecError
from lockgen.model.spec import StackSpec


def parse_stack_file(path: Path) -> StackSpec:
    """Reads and parses a stack file; every problem is a SpecError naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"stack file `{path}` does not exist", "pass the path of a stack.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read stack file `{path}`: {exc}", "check the file's permissions and encoding") from None
    return parse_stack_text(text, str(path))
