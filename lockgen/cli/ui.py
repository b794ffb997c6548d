"""Terminal output: data on stdout, progress and errors on stderr, `error:` / `hint:` without tracebacks.
Every line for a person goes out through `say`, `progress` or `fail`, which escape what could end or hide a line
or drive the terminal (`model.names.escaped`): a certificate's, a lock's or an image's text is shown as it is, one
line each; an error line is cut at ERROR_LIMIT characters, saying how many went. A document in a format of its own
(JSON, Prometheus, JUnit, a shell's activation) goes out by `print_json` or `emit`, escaped by that format's rules.

Exit codes: 0 ok, 1 a user-level failure (a `LockgenError`), 2 usage (typer), 3 unexpected.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from lockgen.errors import LockgenError
from lockgen.model.names import escaped

if TYPE_CHECKING:  # the models import pydantic: a command that needs no model (a repeated materialize) loads none
    from lockgen.model.requests import Environment

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    verbose = False


state = _State()


def _styled(text: str, code: str) -> str:
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        return text
    return f"\x1b[{code}m{text}\x1b[0m"


def say(line: object = "") -> None:
    """One line for a person on stdout (a row, a path, a verdict), escaped."""
    print(escaped(str(line)))


def emit(document: str) -> None:
    """A document in a format of its own on stdout, as it is: its rendering escaped it by that format's rules."""
    sys.stdout.write(document)


def progress(message: str) -> None:
    """One progress line on stderr, escaped."""
    print(_styled(escaped(message), "2"), file=sys.stderr, flush=True)


class Meter:
    """Per-phase progress of long work: a rich bar on a terminal, a line per quarter otherwise.
    Called as `meter(phase, done, total)`; used as `with Meter() as meter:`, the bar ends with the block."""

    def __init__(self) -> None:
        self._bar: Any = None  # a rich Progress, imported on first use
        self._tasks: dict[str, object] = {}
        self._quarters: dict[str, int] = {}
        self._ended: set[str] = set()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if sys.stderr.isatty() and not os.environ.get("NO_COLOR"):
            if self._bar is None:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

                self._bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), transient=True, console=None)
                self._bar.start()
            if phase not in self._tasks:
                self._tasks[phase] = self._bar.add_task(escaped(phase), total=total)
            self._bar.update(self._tasks[phase], completed=done)
        else:
            quarter = 4 * done // max(1, total)  # a line per quarter reached, each once
            if quarter > self._quarters.get(phase, 0) or (done == total and phase not in self._ended):
                self._quarters[phase] = quarter
                if done == total:
                    self._ended.add(phase)
                progress(f"{phase}: {done}/{total}")

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def print_json(document: object) -> None:
    """One JSON document on stdout (every --json output: stable keys, sorted; progress stays on stderr)."""
    import json

    print(json.dumps(document, indent=2, sort_keys=True, default=str))


ERROR_LIMIT = 2000  # characters of an error or hint line (escaped); a longer one keeps its start and its end


def _error_line(text: str) -> str:
    """`text` escaped (a message names input as given: a path, a flag's value, a certificate's text) and, past
    ERROR_LIMIT, cut in the middle, saying how many characters went (an unreadable 40 KB line helps nobody)."""
    line = escaped(text)
    if len(line) <= ERROR_LIMIT:
        return line
    kept_end = ERROR_LIMIT // 4
    return f"{line[: ERROR_LIMIT - kept_end]} [… {len(line) - ERROR_LIMIT:,} characters cut …] {line[-kept_end:]}"


def environment(
    prefix: Path | None, python: str | None, image: str | None, refusal: tuple[str, str, int], required: bool = False, insecure: bool = False, image_prefix: str | None = None
) -> Environment | None:
    """The one environment the flags name, None when none: the one-of rule of --prefix, --python and --image,
    checked here once; more than one (or none, when `required`) fails with `refusal` (message, hint, exit code)."""
    from lockgen.model.requests import Image, Prefix, Python

    named: list[Environment] = [Prefix(prefix)] if prefix is not None else []
    named += [Python(python)] if python is not None else []
    named += [Image(image, insecure, image_prefix)] if image is not None else []
    if len(named) > 1 or (required and not named):
        fail(*refusal)
    return named[0] if named else None


def fail(message: str, hint: str = "", code: int = 1) -> NoReturn:
    print(_styled("error:", "31;1") + f" {_error_line(message)}", file=sys.stderr)
    if hint:
        print(_styled("hint:", "36") + f" {_error_line(hint)}", file=sys.stderr)
    raise typer.Exit(code)


_FULL = (errno.ENOSPC, errno.EDQUOT)  # the machine's fault, not lockgen's: exit 1, not 3
_REFUSED = {  # the machine refusing a path the user chose (LOCKGEN_HOME, --prefix, --out): exit 1, not 3
    errno.EROFS: ("is on a read-only file system", "point LOCKGEN_HOME, --prefix or --out at a writable disk"),
    errno.EACCES: ("is not permitted to this user", "fix its permissions, or choose a path this user may write"),
    errno.EPERM: ("is not permitted to this user", "fix its permissions, or choose a path this user may write"),
    errno.ENAMETOOLONG: ("has a name too long for the file system", "choose a shorter path (each name at most 255 bytes)"),
    # a file where the path needs a folder (`--out notes.txt/x`, LOCKGEN_HOME naming a file), or a loop of links in it
    errno.EEXIST: ("already exists (a file where the path needs a folder, or a name taken)", "choose a path whose every part above the last is a folder, or remove what is there"),
    errno.ENOTDIR: ("has a part that is not a folder", "choose a path whose every part above the last is a folder"),
    errno.ELOOP: ("runs into a loop of symbolic links", "choose a path whose links lead somewhere"),
}


def _shown_path(name: object) -> str:
    """A path for an error line: a 5,000-character one shortened to its ends."""
    text = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else str(name)
    return text if len(text) <= 200 else f"{text[:80]}…{text[-80:]} ({len(text)} characters)"


def handles_errors(command: F) -> F:
    """Turns lockgen's errors into `error:`/`hint:` lines and exit codes (tracebacks only with -v)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
            raise
        except LockgenError as exc:
            if state.verbose:
                traceback.print_exc()
            fail(exc.message, exc.hint, exc.exit_code)
        except Exception as exc:  # the last line of defence: no traceback unless -v
            if state.verbose:
                traceback.print_exc()
            if isinstance(exc, OSError) and exc.errno in _REFUSED:
                said, hint = _REFUSED[exc.errno]
                where = f"`{_shown_path(exc.filename)}`" if exc.filename else "a path lockgen needs"
                fail(f"{where} {said} ({exc.strerror or exc})", hint + "; nothing half done is kept")
            if isinstance(exc, OSError) and exc.errno in _FULL:
                where = f" writing {exc.filename}" if exc.filename else ""
                fail(
                    f"the disk is full{where}",
                    "free space there, or point LOCKGEN_HOME, LOCKGEN_CACHE_DIR or --out at a larger disk, and run it again (what was being written is removed, nothing half done is kept)",
                )
            fail(f"unexpected {type(exc).__name__}: {exc}", "re-run with -v and report the traceback", 3)

    return wrapper  # type: ignore[return-value]


def print_environment(path: Path, digest: str, as_json: bool, source: dict[str, str]) -> None:
    """What materialize and unpack print of the environment they made: its digest on stderr, then its prefix
    (or `{prefix, environment_digest, …source}` as JSON) on stdout."""
    progress(f"environment digest sha256:{digest}")
    if as_json:
        print_json({"prefix": str(path), "environment_digest": digest, **source})
    else:
        say(path)
