"""Refuses conda archives that would write outside the prefix: absolute paths, `..` components, members
written through the archive's own links, links that lead out of the prefix when followed through those links,
hard links to anything but a file of the archive, and members in `.lockgen/`, lockgen's record of the
environment. rattler skips such members silently; lockgen refuses the whole package.
The members are read by `conda_archive`, the one strict reader (it refuses a `.conda` whose zip reads
differently to rattler than to Python's `zipfile`)."""

from __future__ import annotations

import glob
import posixpath
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from lockgen.adapters.conda.conda_archive import members
from lockgen.core.env.wheel_files import OWN_FOLDER, folders_above, in_own_folder
from lockgen.errors import LockFormatError


SCAN_RULES = 3  # the rules' version in a scanned archive's marker: an archive passed by older rules is scanned again
PATH_MAX = 4096  # a name or link target past the kernel's own limit is refused unread (and keeps the walk linear)
MOST_HOPS = 40  # links followed in one path before it counts as a loop (as the kernel's ELOOP)


def stays_inside(path: str, links: Mapping[str, str]) -> bool:
    """Whether the prefix-relative `path`, followed through the archive's own symbolic links (`links`: member
    name -> target), stays inside the prefix: a link's target is read from the link's folder, a `..` that
    leaves the top leaves the prefix, and a chain of more than `MOST_HOPS` links is refused as a loop."""
    if len(path) > PATH_MAX:
        return False
    parts: list[str] = []
    pending = deque(path.split("/"))
    hops = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return False
            parts.pop()
            continue
        target = links.get("/".join([*parts, part]))
        if target is None:
            parts.append(part)
            continue
        hops += 1
        if hops > MOST_HOPS or target.startswith("/") or len(target) > PATH_MAX:
            return False
        pending.extendleft(reversed(target.split("/")))  # read from the link's folder: `parts` is that folder
    return True


def _problems(entries: list[tuple[str, str | None, bool]]) -> list[str]:
    """Why members (name, link target or None, whether a hard link) may not be written into a prefix: a name
    that is absolute or climbs, a member written through one of the archive's own links (`a/b -> ..` makes
    `a/b/a/b/x` a path above `a`, whatever its text says), or a link whose target, followed through those
    links, leaves the prefix (a hard link's target is named from the top of the archive)."""
    problems = []
    links = {
        posixpath.normpath(name): link
        for name, link, hard in entries
        if link is not None and not hard and not name.startswith("/")
    }
    files = {posixpath.normpath(name) for name, link, _ in entries if link is None}
    for name, link, hard in entries:
        if len(name) > PATH_MAX or (link is not None and len(link) > PATH_MAX):
            problems.append(f"a name or link target of over {PATH_MAX} characters (`{name[:80]}…`)")
            continue
        if name.startswith("/") or ".." in Path(name).parts:
            problems.append(f"path `{name}` leaves the prefix")
            continue
        normal = posixpath.normpath(name)
        if in_own_folder(normal):
            problems.append(f"path `{name}` is in {OWN_FOLDER}/, lockgen's record of the environment")
            continue
        through = next((folder for folder in folders_above(normal) if folder in links), None)
        if through is not None:
            problems.append(f"path `{name}` is written through the archive's link `{through}`")
        elif hard and link is not None and posixpath.normpath(link) not in files:
            # an installer hard-links what the name is, a symbolic link included, whose text then reads from the
            # new name's folder: a link inside from its own folder can lead out from another
            problems.append(f"hard link `{name}` -> `{link}` is not to a file of the archive")
        elif link is not None and (
            link.startswith("/")
            or not stays_inside(link if hard else posixpath.join(posixpath.dirname(normal), link), links)
        ):
            problems.append(f"link `{name}` -> `{link}` points outside the prefix")
    return problems


def unsafe_members(path: Path) -> list[str]:
    """Why the archive at `path` may not be installed (empty when it is safe)."""
    entries = [
        (member.name, member.linkname if (member.issym() or member.islnk()) else None, member.islnk())
        for _, member, _ in members(path, "all")
    ]
    return _problems(entries)


def check_archive(path: Path, label: str) -> None:
    """Refuses an unsafe archive; a safe one is marked (`<archive>.scanned-<rules>`), so the scan runs once per
    archive in the store (whose file names carry the archive's hash, checked on every fetch)."""
    marker = path.with_name(f"{path.name}.scanned-{SCAN_RULES}")
    if marker.is_file():
        return
    try:
        problems = unsafe_members(path)
    except LockFormatError as exc:  # the archive's own bytes: named by the package they were fetched for
        raise LockFormatError(f"{label}: {exc.message}", exc.hint) from None
    if problems:
        raise LockFormatError(
            f"{label} is refused: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            "the archive tries to write outside the environment; nothing was installed",
        )
    marker.touch()
    for older in path.parent.glob(f"{glob.escape(path.name)}.scanned*"):  # verdicts of older rules, never read again
        if older != marker:
            older.unlink(missing_ok=True)
