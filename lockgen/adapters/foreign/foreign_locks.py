"""Reads other tools' locks into lockgen's lock entries, through the one interface each format implements
(`foreign_format.ForeignFormat`): the formats are listed once here, in the order they are asked to recognise a
file, and a new format is one module and one line of `FORMATS`.

Every platform a file holds comes over, with hashes kept. An option the file's format does not take is refused
before it is read (a usage error naming the format and the options it takes), so no flag is silently ignored.
"""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.foreign.conda_lock_file import CondaLockFile
from lockgen.adapters.foreign.explicit_file import ExplicitFile
from lockgen.adapters.foreign.foreign_format import ForeignFile, ForeignFormat, Imported, read_in_pieces
from lockgen.adapters.foreign.pixi_lock import PixiLock
from lockgen.adapters.foreign.pylock import PylockToml
from lockgen.adapters.foreign.uv_format import UvLock
from lockgen.adapters.lock.lockfile_yaml import yaml_problem
from lockgen.errors import FlagError, LockFormatError, UserError
from lockgen.model.requests import ImportOptions

# Asked in this order: a content mark (@EXPLICIT, PEP 751's keys) before a name, a TOML format before the YAML
# ones (whose text is read as YAML once, to be told apart).
FORMATS: tuple[ForeignFormat, ...] = (ExplicitFile(), PylockToml(), UvLock(), PixiLock(), CondaLockFile())


def read_foreign(path: Path, options: ImportOptions) -> Imported:
    """The entries of the lock at `path`, read by the format that recognises it; a file of a known format whose
    structure is broken (a missing key, a list where a string belongs, a cut-off end) is one error naming the
    format, and one no format recognises is refused, listing the formats."""
    try:
        pieces, sha256 = read_in_pieces(path)
    except OSError as exc:
        raise UserError(f"cannot read `{path}`: {exc.strerror or exc}", "pass the path of a lock file") from None
    file = ForeignFile(path, pieces, sha256)
    form = _format_of(file)
    _refuse_options(form, options, path)
    try:
        return form.read(file, options)
    except RecursionError:  # nested past the reader: no lock of any tool is
        raise LockFormatError(
            f"`{path}` is a malformed {form.name}: nested deeper than a reader goes",
            f"it was edited or cut short: use the file {form.producer} wrote",
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # ValueError: pydantic's and
        # tomllib's errors too; the readers' own errors (LockgenError) pass through
        raise LockFormatError(
            f"`{path}` is a malformed {form.name}: {_what_broke(exc)}",
            f"it was edited or cut short: use the file {form.producer} wrote",
        ) from None


def _format_of(file: ForeignFile) -> ForeignFormat:
    """The first format that recognises `file`; none is an error saying what the file is not."""
    found = next((form for form in FORMATS if form.recognises(file)), None)
    if found is not None:
        return found
    known = [form.described for form in FORMATS]
    formats = f"import takes {', '.join(known[:-1])} or {known[-1]}"
    problem = file.yaml_problem
    if isinstance(problem, RecursionError):
        raise LockFormatError(f"`{file.path}` is no lock format: it nests deeper than a reader goes", formats)
    if problem is not None:
        raise LockFormatError(
            f"`{file.path}` is neither a known lock format nor valid YAML{yaml_problem(problem)}", formats
        )
    raise LockFormatError(f"`{file.path}` is not a lock format lockgen imports", formats)


def _refuse_options(form: ForeignFormat, options: ImportOptions, path: Path) -> None:
    """A usage error for each option given that `form` does not take, naming the format and what it takes."""
    refused = [flag for option, flag in options.given().items() if option not in form.takes]
    if not refused:
        return
    taken = ", ".join(sorted(ImportOptions.flag(option) for option in form.takes)) or "none"
    flags = ", ".join(refused)
    raise FlagError(
        f"{flags} {'does' if len(refused) == 1 else 'do'} not apply to the {form.name} `{path}`",
        f"drop {flags} (the {form.name}'s options: {taken})",
    )


def _what_broke(exc: Exception) -> str:
    """One line for what a reader tripped over, without its internals."""
    if isinstance(exc, KeyError):
        return f"an entry lacks `{exc.args[0] if exc.args else '?'}`"
    text = str(exc).strip().splitlines()
    if type(exc).__name__ == "ValidationError":  # pydantic: the field, then what it wanted
        return f"a value has the wrong type ({' '.join(text[1:3]).strip()[:160]})"
    first = text[0] if text else type(exc).__name__
    if "at end of document" in first:
        return f"it ends mid-value ({first}): it looks truncated"
    return first[:200]
