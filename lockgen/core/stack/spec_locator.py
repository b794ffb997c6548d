"""Where a key or table is in a stack's text: line numbers for error messages.

Neither TOML reader keeps positions on values, so errors are located by scanning the text for the table
header and the key: good enough to point at the offending line of a hand-written file.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from lockgen.errors import SpecError


def repeated_line(text: str, key: str) -> int | None:
    """The line where `key = ...` (bare or quoted) is set a second time in one table, or None."""
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    table, seen = "", set()
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("["):
            table = line.strip()
        elif pattern.match(line):
            if table in seen:
                return number
            seen.add(table)
    return None


class Locator:
    """Finds the line of a table or key in the stack text, to put in error messages."""

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    def line_of(self, path: tuple[str, ...]) -> int | None:
        if not path:
            return None
        header_line, key_path = self._header(path)
        if not key_path:
            return header_line
        start = header_line or 0
        key = key_path[0]
        pattern = re.compile(rf"^\s*(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*[=.]")
        for index in range(start, len(self.lines)):
            if index > start and header_line and self.lines[index].lstrip().startswith("["):
                break
            if pattern.match(self.lines[index]):
                return index + 1
        return header_line

    def _header(self, path: tuple[str, ...]) -> tuple[int | None, tuple[str, ...]]:
        for depth in range(len(path), 0, -1):
            dotted = ".".join(path[:depth])
            for index, line in enumerate(self.lines):
                if re.match(rf"^\s*\[\s*{re.escape(dotted)}\s*\]", line):
                    return index + 1, path[depth:]
        return None, path

    def error(self, message: str, hint: str, path: tuple[str, ...]) -> SpecError:
        return SpecError(message, hint, self.source, self.line_of(path))

    def from_validation(self, exc: ValidationError, path: tuple[str, ...], hint: str) -> SpecError:
        first = exc.errors()[0]
        loc = tuple(str(p) for p in first["loc"] if isinstance(p, str))
        field = loc[0].replace("_", "-") if loc else None
        message = str(first["msg"]).removeprefix("Value error, ")
        prefix = f"`{field}` in {'.'.join(path)}: " if field else f"{'.'.join(path)}: "
        where = path + ((field,) if field else ())
        if first["type"] == "string_type" and isinstance(first.get("input"), (int, float)) and field:
            written = self.written(where) or str(first["input"])  # `python = 3.10` is the number 3.1 to TOML
            return self.error(
                f"{prefix}{written} is a number here, and a version is text (as a number, 3.10 is 3.1)",
                f'write it in quotes: {field} = "{written}"',
                where,
            )
        return self.error(prefix + message, hint, where)

    def written(self, path: tuple[str, ...]) -> str | None:
        """The value as the file writes it, on the line of `path` (`key = VALUE  # comment`)."""
        line = self.line_of(path)
        if line is None:
            return None
        found = re.match(r"^\s*[\w.\"'-]+\s*=\s*([^#\s,}]+)", self.lines[line - 1])
        return found[1] if found else None
