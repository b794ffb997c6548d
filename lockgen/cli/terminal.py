"""What a person sees on the terminal, without typer: progress lines on stderr, `error:`/`hint:` lines, the
exit code an exception gives, the environment materialize prints and what check --lock says of a conforming one. Shared
by the typer commands (`ui`) and
the fast path (`fast_path`), which answers the daily commands before typer is imported; both print the same."""

from __future__ import annotations

import errno
import os
import sys
from lockgen.errors import LockgenError

TYPE_CHECKING = False  # typing, pathlib and re (the escaping): not imported before a line is escaped here

if TYPE_CHECKING:  # a plain result (dataclasses), named here for its fields
    from collections.abc import Callable, Iterable
    from pathlib import Path
    from typing import Any

    from lockgen.model.resolved import TargetResult
    from lockgen.model.results import Conformance


def styled(text: str, code: str) -> str:
    """`text` in the terminal colour `code` when stderr is a terminal and NO_COLOR is unset."""
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        return text
    return f"\x1b[{code}m{text}\x1b[0m"


def escaped(text: str) -> str:
    """`text` with every character a terminal would act on escaped (`model.names.escaped`, imported when needed)."""
    from lockgen.model.names import escaped as escaped_text

    return escaped_text(text)


def say(line: object = "") -> None:
    """One line for a person on stdout (a row, a path, a verdict), escaped."""
    print(escaped(str(line)))


def emit(document: str) -> None:
    """A document in a format of its own on stdout, as it is: its rendering escaped it by that format's rules."""
    sys.stdout.write(document)


def progress(message: str) -> None:
    """One progress line on stderr, escaped."""
    print(styled(escaped(message), "2"), file=sys.stderr, flush=True)


def progress_kept(line: str) -> None:
    """One progress line on stderr that was escaped by `escaped` when it was kept (a kept `run`'s record)."""
    print(styled(line, "2"), file=sys.stderr, flush=True)


def say_kept(line: str) -> None:
    """One line on stdout that was escaped by `escaped` when it was kept (a kept record's)."""
    print(line)


def print_json(document: object) -> None:
    """One JSON document on stdout (every --json output: stable keys, sorted; progress stays on stderr), strict: a
    NaN or an infinity, which no JSON parser need read, is refused (ValueError: a bug) rather than written."""
    import json

    print(json.dumps(document, indent=2, sort_keys=True, default=str, allow_nan=False))


def print_json_texts(document: dict[str, object], key: str, texts: Iterable[str]) -> None:
    """`print_json({**document, key: rows})`, byte for byte, for rows given as their JSON text, each as `print_json`
    writes a value two levels deep (`json.dumps(row, indent=2, sort_keys=True)`, its lines after the first
    indented four spaces more), written one at a time (a fleet's 100,000 status rows are never one list of dicts,
    nor one text, in memory); `key` sorts after every key of `document`."""
    import json

    assert all(other < key for other in document)
    head = json.dumps(document, indent=2, sort_keys=True, default=str, allow_nan=False)
    sys.stdout.write((head[:-2] + ",\n" if document else "{\n") + f"  {json.dumps(key)}: [")
    wrote = False
    for text in texts:
        sys.stdout.write(("," if wrote else "") + "\n    " + text)
        wrote = True
    sys.stdout.write(("\n  ]" if wrote else "]") + "\n}\n")


def print_environment(path: Path, digest: str, as_json: bool, source: dict[str, str]) -> None:
    """What materialize and unpack print of the environment they made: its digest on stderr, then its prefix
    (or `{prefix, environment_digest, …source}` as JSON) on stdout."""
    progress(f"environment digest sha256:{digest}")
    if as_json:
        print_json({"prefix": str(path), "environment_digest": digest, **source})
    else:
        say(path)


def print_resolved(results: Iterable[TargetResult], dry_run: bool, as_json: bool) -> None:
    """What resolve prints of the locks it made (the typer command and the fast path alike): each target's
    highlights and state on stderr and its lock's path on stdout (none for --dry-run), or the results as JSON."""
    if as_json:
        print_json([result.to_dict() for result in results])
        return
    for result in results:
        for platform, picks in result.highlights.items():
            shown = ", ".join(f"{k} {v}" for k, v in picks.items() if k in RESOLVE_HIGHLIGHTS)
            progress(f"  {result.target} {platform}: {result.packages[platform]} packages; {shown}")
        progress(f"{result.state} {result.path}")
        if not dry_run:
            say(result.path)


RESOLVE_HIGHLIGHTS = ("python", "pytorch", "cuda-version", "torch")


def said_read(where: object, read_every_byte: str | None) -> None:
    """When every byte was last read, said on stderr (stat trust ends: `LOCKGEN_STAT_TRUST_S`, default a day)."""
    if read_every_byte is not None:
        progress(
            f"every byte of {where} last read {read_every_byte} (fingerprints stand for reading until "
            "$LOCKGEN_STAT_TRUST_S seconds after; --full reads every byte now)"
        )


def print_conforming(result: Conformance, lock: Path | None) -> None:
    """What `check --lock` says on stderr of an environment found to be its lock (after the report on stdout):
    the foreign files it was allowed, what was checked by path only, and the verdict."""
    for path, digest in result.allowed.items():
        progress(f"allowed foreign file {path}: " + (f"sha256:{digest}" if digest else "absent"))
    if result.by_path_only:
        progress(
            f"{result.by_path_only} stated files checked by path only (their bytes are patched or generated on "
            "install and no archive here predicts them)"
        )
    on_base = (
        f"; every file outside it from base {result.base_digest[:23]}…, trusted as the image pins it"
        if result.base_digest
        else ""
    )
    for line in result.local:
        progress(line)
    counts = result.report.counts
    proven = (
        f" as far as it can be proven ({len(result.local)} local, said above; the rest by their published files)"
        if result.local
        else ""
    )
    progress(
        f"{result.where} is the environment of {lock}{proven}: {counts.get('ok', 0)} packages, every file accounted"
        f" for (expected digest sha256:{result.expected_digest[:16]}…){on_base}"
    )


ERROR_LIMIT = 2000  # characters of an error or hint line (escaped); a longer one keeps its start and its end


def _error_line(text: str) -> str:
    """`text` escaped (a message names input as given: a path, a flag's value, a certificate's text) and, past
    ERROR_LIMIT, cut in the middle, saying how many characters went (an unreadable 40 KB line helps nobody)."""
    line = escaped(text)
    if len(line) <= ERROR_LIMIT:
        return line
    kept_end = ERROR_LIMIT // 4
    return f"{line[: ERROR_LIMIT - kept_end]} [… {len(line) - ERROR_LIMIT:,} characters cut …] {line[-kept_end:]}"


def say_error(message: str, hint: str = "") -> None:
    """The `error:` line, and the `hint:` line when there is one, on stderr."""
    print(styled("error:", "31;1") + f" {_error_line(message)}", file=sys.stderr)
    if hint:
        print(styled("hint:", "36") + f" {_error_line(hint)}", file=sys.stderr)


_FULL = (errno.ENOSPC, errno.EDQUOT)  # the machine's fault, not lockgen's: exit 1, not 3
_REFUSED = {  # the machine refusing a path the user chose (LOCKGEN_HOME, --prefix, --out): exit 1, not 3
    errno.EROFS: ("is on a read-only file system", "point LOCKGEN_HOME, --prefix or --out at a writable disk"),
    errno.EACCES: ("is not permitted to this user", "fix its permissions, or choose a path this user may write"),
    errno.EPERM: ("is not permitted to this user", "fix its permissions, or choose a path this user may write"),
    errno.ENAMETOOLONG: (
        "has a name too long for the file system",
        "choose a shorter path (each name at most 255 bytes)",
    ),
    # a file where the path needs a folder (`--out notes.txt/x`, LOCKGEN_HOME naming a file), or a loop of links in it
    errno.EEXIST: (
        "already exists (a file where the path needs a folder, or a name taken)",
        "choose a path whose every part above the last is a folder, or remove what is there",
    ),
    errno.ENOTDIR: ("has a part that is not a folder", "choose a path whose every part above the last is a folder"),
    errno.ELOOP: ("runs into a loop of symbolic links", "choose a path whose links lead somewhere"),
}


def _shown_path(name: object) -> str:
    """A path for an error line: a 5,000-character one shortened to its ends."""
    text = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else str(name)
    return text if len(text) <= 200 else f"{text[:80]}…{text[-80:]} ({len(text)} characters)"


class Meter:
    """Per-phase progress of long work: a rich bar on a terminal, a line per quarter otherwise.
    Called as `meter(phase, done, total)`; used as `with Meter() as meter:`, the bar ends with the block. `line`:
    what says a line (default `progress`; the fast path's records that something was said)."""

    def __init__(self, line: Callable[[str], None] = progress) -> None:
        self._line = line
        self._bar: Any = None  # a rich Progress, imported on first use
        self._tasks: dict[str, object] = {}
        self._quarters: dict[str, int] = {}
        self._ended: set[str] = set()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if sys.stderr.isatty() and not os.environ.get("NO_COLOR"):
            if self._bar is None:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

                self._bar = Progress(
                    TextColumn("{task.description}", markup=False),
                    BarColumn(),
                    MofNCompleteColumn(),
                    transient=True,
                    console=None,
                )
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
                self._line(f"{phase}: {done}/{total}")

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def refusal(exc: Exception) -> tuple[str, str, int]:
    """The message, hint and exit code a command's exception ends it with: lockgen's errors carry theirs; the
    machine refusing a path or full is exit 1; anything else is a bug (exit 3)."""
    if isinstance(exc, LockgenError):
        return exc.message, exc.hint, exc.exit_code
    if isinstance(exc, OSError) and exc.errno in _REFUSED:
        said, hint = _REFUSED[exc.errno]
        where = f"`{_shown_path(exc.filename)}`" if exc.filename else "a path lockgen needs"
        return f"{where} {said} ({exc.strerror or exc})", hint + "; nothing half done is kept", 1
    if isinstance(exc, OSError) and exc.errno in _FULL:
        where = f" writing {exc.filename}" if exc.filename else ""
        return (
            f"the disk is full{where}",
            "free space there, or point LOCKGEN_HOME, LOCKGEN_CACHE_DIR or --out at a larger disk, and run it "
            "again (what was being written is removed, nothing half done is kept)",
            1,
        )
    return f"unexpected {type(exc).__name__}: {exc}", "re-run with -v and report the traceback", 3
