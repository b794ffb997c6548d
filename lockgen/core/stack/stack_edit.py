"""`lockgen add` and `lockgen remove` as edits of a stack's text: a package as the command line writes it
(`numpy`, `numpy>=1.26`, `pytorch=2.6`, `transformers[torch]>=4.40`) becomes one line of `[dependencies]` or
`[pypi-dependencies]`, put in or taken out with tomlkit, so every other byte of the file (comments, order,
spacing, quoting) stays as it was. The edited text is parsed whole before it is used (by the stack reader)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Literal

import tomlkit
from pydantic import ValidationError
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import InlineTable, Table

from lockgen.errors import SpecError, UserError
from lockgen.model.names import normalize, shown
from lockgen.core.stack.spec_models import Dependency, PypiDependency  # the rules: a word is checked as a stack is

DependencyTable = Literal["dependencies", "pypi-dependencies"]
TABLES: tuple[DependencyTable, ...] = ("dependencies", "pypi-dependencies")
_CONDA_WORD = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)", re.DOTALL)
_PYPI_WORD = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)", re.DOTALL)
_UNSUPPORTED = re.compile(r"[\[\]\"';]")  # what the stack parser refuses in a match spec
EXAMPLES = {
    "dependencies": 'a conda package and match spec, e.g. numpy, "numpy>=1.26" or "pytorch=2.6"',
    "pypi-dependencies": 'a PyPI requirement, e.g. rich, "numpy>=1.26" or "transformers[torch]>=4.40"',
}


@dataclass(frozen=True)
class Addition:
    """One package to add: the table it goes to, its name as written and the value of its line (a spec
    string, or a table of version and extras)."""

    table: DependencyTable
    name: str
    value: str | dict[str, str | list[str]]  # a spec, or a table of version and extras

    @property
    def match_spec(self) -> str:
        """The conda match spec of a `[dependencies]` addition (`numpy >=1.26`)."""
        spec = self.value if isinstance(self.value, str) and self.value != "*" else ""
        return f"{self.name} {spec}".strip()


def default_table(text: str) -> DependencyTable:
    """Where a package goes without `--conda` or `--pypi`: `[dependencies]` when the stack file has that table,
    else `[pypi-dependencies]` (a pure-PyPI stack, or a team stack that adds PyPI packages)."""
    return "dependencies" if "dependencies" in _document(text, "stack.toml") else "pypi-dependencies"


def addition(word: str, table: DependencyTable) -> Addition:
    """The package `word` (as the command line writes it) for `table`; a word that is no package and spec of
    that table is a UserError saying what one looks like."""
    found = (_CONDA_WORD if table == "dependencies" else _PYPI_WORD).fullmatch(word.strip())
    if found is None:
        raise UserError(f"`{shown(word, 80)}` is not {EXAMPLES[table].split(', e.g.')[0]}", f"write {EXAMPLES[table]}")
    name = found[1]
    try:
        if table == "dependencies":
            rest = found[2].strip()
            if _UNSUPPORTED.search(rest):
                raise UserError(
                    f"`{shown(word, 80)}`: the match spec `{shown(rest, 80)}` holds a character a stack's spec "
                    "may not (brackets, quotes, `;`)",
                    f"write {EXAMPLES[table]}",
                )
            Dependency(name=name, spec=rest)
            return Addition(table, name.lower(), rest or "*")
        extras = tuple(e.strip() for e in (found[2] or "").split(",") if e.strip())
        PypiDependency(name=name, specifier=found[3], extras=extras)
    except ValidationError as exc:
        reason = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise UserError(f"`{shown(word, 80)}` does not parse: {reason}", f"write {EXAMPLES[table]}") from None
    version = found[3].strip() or "*"
    return Addition(table, name, {"version": version, "extras": list(extras)} if extras else version)


def with_added(text: str, additions: list[Addition], source: str) -> str:
    """The stack's text with each addition's line at the end of its table (the table appended at the end of
    the file when the stack has none); a package the stack names already, in either table, is refused."""
    document = _document(text, source)
    for added in additions:
        present = _present(document, added.name)
        if present is not None:
            raise UserError(
                f"`{shown(added.name, 80)}` is in [{present[0]}] of {source} already",
                f"to change its version, edit its line in the stack (or `lockgen remove {shown(added.name, 80)}` "
                "first, then add it)",
            )
        table = document.get(added.table)
        if table is None:
            table = tomlkit.table()
            document.add(added.table, table)
        _append(_editable(table, added.table, source), added.name, added.value)
    return tomlkit.dumps(document)


def without(text: str, names: list[str], source: str) -> str:
    """The stack's text with the line of each named package taken out of whichever table holds it; a name the
    stack's own tables do not hold is refused, naming the close ones, and so is an edit that leaves none."""
    document = _document(text, source)
    for name in names:
        present = _present(document, name)
        if present is None:
            known = [str(key) for table in TABLES for key in (document.get(table) or {})]
            close = difflib.get_close_matches(name, known, n=1)
            raise UserError(
                f"`{shown(name, 80)}` is not in [dependencies] or [pypi-dependencies] of {source}",
                f"did you mean `{shown(close[0], 80)}`?"
                if close
                else f"its packages: {shown(', '.join(known), 200) or 'none'} (a base stack's are removed from the "
                "base)",
            )
        del _editable(document[present[0]], present[0], source)[present[1]]
    if not any(document.get(table) for table in TABLES):
        raise UserError(
            f"removing {', '.join(f'`{shown(n, 80)}`' for n in names)} leaves {source} no package to lock",
            "add the packages the stack is for first (lockgen add PKG), then remove these",
        )
    return tomlkit.dumps(document)


def changed_lines(old: str, new: str) -> list[str]:
    """The lines an edit put in (`+ line`) and took out (`- line`), in the file's order."""
    return [
        f"{line[0]} {line[2:]}"
        for line in difflib.ndiff(old.splitlines(), new.splitlines())
        if line[:1] in "+-" and line[2:].strip()
    ]


def _document(text: str, source: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise SpecError(
            f"malformed TOML: {exc.args[0] if exc.args else exc}".split(" at line")[0],
            "fix the TOML syntax at that line",
            source,
            exc.line,
        ) from None
    except TOMLKitError as exc:
        raise SpecError(f"malformed TOML: {exc}", "fix the stack's TOML", source) from None


def _present(document: tomlkit.TOMLDocument, name: str) -> tuple[DependencyTable, str] | None:
    """(the table, the key as written) of the stack's line for `name`, compared as PEP 503 names."""
    for table in TABLES:
        for key in document.get(table) or {}:
            if normalize(str(key)) == normalize(name):
                return table, str(key)
    return None


def _editable(table: Any, name: str, source: str) -> Table | InlineTable:
    if not isinstance(table, (Table, InlineTable)):
        raise SpecError(f"`{name}` is not a table", f"write it as [{name}]", source)
    return table


def _append(table: Table | InlineTable, name: str, value: str | dict[str, str | list[str]]) -> None:
    """`name = value` after the table's last line that sets a key: a table's trailing blank lines and the
    comments above the next table stay where they are (tomlkit's own append puts the line after them)."""
    item: Any = value
    if isinstance(value, dict):
        item = tomlkit.inline_table()
        item.update(value)
    if isinstance(table, InlineTable):
        table[name] = item
        return
    body = table.value.body
    last = max((index for index, (key, _) in enumerate(body) if key is not None), default=-1)
    if last + 1 >= len(body):
        table[name] = item
    else:
        table.value._insert_at(last + 1, name, item)  # tomlkit's public API appends only at the table's end
