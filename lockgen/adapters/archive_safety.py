"""Refuses conda archives that would write outside the prefix: absolute paths, `..` components, or links
that point out of the prefix. rattler skips such members silently; lockgen refuses the whole package.
The members are read by `conda_archive`, the one strict reader (it refuses a `.conda` whose zip reads
differently to rattler than to Python's `zipfile`)."""

from __future__ import annotations

import posixpath
from pathlib import Path

from lockgen.adapters.conda_archive import members
from lockgen.errors import LockFormatError


def _escapes(name: str, link: str | None) -> str | None:
    if name.startswith("/") or ".." in Path(name).parts:
        return f"path `{name}` leaves the prefix"
    if link is not None:
        target = link if link.startswith("/") else posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
        if target.startswith("/") or target == ".." or target.startswith("../"):
            return f"link `{name}` -> `{link}` points outside the prefix"
    return None


def unsafe_members(path: Path) -> list[str]:
    """Why the archive at `path` may not be installed (empty when it is safe)."""
    problems = []
    for _, member, _ in members(path, "all"):
        problem = _escapes(member.name, member.linkname if (member.issym() or member.islnk()) else None)
        if problem:
            problems.append(problem)
    return problems


def check_archive(path: Path, label: str) -> None:
    """Refuses an unsafe archive; a safe one is marked (`<archive>.scanned`), so the scan runs once per
    archive in the store (whose file names carry the archive's hash, checked on every fetch)."""
    marker = path.with_name(path.name + ".scanned")
    if marker.is_file():
        return
    try:
        problems = unsafe_members(path)
    except LockFormatError as exc:  # the archive's own bytes: named by the package they were fetched for
        raise LockFormatError(f"{label}: {exc.message}", exc.hint) from None
    if problems:
        raise LockFormatError(
            f"{label} is refused: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""), "the archive tries to write outside the environment; nothing was installed"
        )
    marker.touch()
