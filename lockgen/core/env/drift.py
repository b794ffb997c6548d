"""Drift of an environment, pure: files missing, extra or changed between two manifests, and the rules
for what no manifest covers (modes no package installs, caches, lockgen's own folder, new folders)."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING

from lockgen.model.environment_record import EnvironmentManifest
from lockgen.model.oci import BASE_CONFIG_INSIDE, BASE_MANIFEST_INSIDE, LOCK_INSIDE

if TYPE_CHECKING:  # the results' module (its dataclasses: about 12 ms) is not loaded by a build, which reports none
    from lockgen.model.results import Drift

LOCKGEN_FILES = frozenset(
    {
        ".lockgen/manifest.json",
        ".lockgen/stats.json",
        ".lockgen/sbom.cdx.json",
        LOCK_INSIDE,
        BASE_MANIFEST_INSIDE,
        BASE_CONFIG_INSIDE,
    }
)
_CACHED = re.compile(
    r"^(?P<stem>[^/.][^/]*?)\.(?:cpython|pypy)-?\d+[^/]*?\.pyc$"
)  # foo.cpython-312.pyc, foo.cpython-312.opt-1.pyc


def manifest_drift(recorded: EnvironmentManifest, current: EnvironmentManifest) -> Drift:
    """Files missing, extra or changed between a recorded manifest and one built from the files now."""
    from lockgen.model.results import Drift

    before = {e["path"]: e for e in recorded["files"]}
    now = {e["path"]: e for e in current["files"]}
    return Drift(
        sorted(before.keys() - now.keys()),
        sorted(now.keys() - before.keys()),
        sorted(p for p in before.keys() & now.keys() if before[p] != now[p]),
    )


def unsafe_mode(relative: str, mode: int, size: int) -> str | None:
    """Why a file or folder's mode is one no package installs: setuid, setgid, a sticky file, or writable by anyone
    (a world-writable folder with the sticky bit, like /tmp, too); None for an ordinary mode. uv's venv
    lock (`.lock` at the root, empty, made writable by every user that may run uv there) is the one
    world-writable file allowed."""
    if stat.S_ISLNK(mode) or (relative == ".lock" and size == 0 and stat.S_ISREG(mode) and not mode & 0o6000):
        return None
    if mode & stat.S_ISUID:
        return "setuid"
    if mode & stat.S_ISGID:
        return "setgid"
    if mode & stat.S_ISVTX and not stat.S_ISDIR(mode):  # a sticky folder is a shared one (`world-writable` if it is)
        return "sticky"
    if mode & stat.S_IWOTH:
        return "world-writable"
    return None


def cached_byte_code(paths: Iterable[str], recorded: set[str]) -> list[tuple[str, str]]:
    """(`.pyc`, its source) for each `__pycache__` file that is the cache of a recorded `.py` beside it: the
    byte code `uncovered_extras` lets pass, which must still be proven to be its source's."""
    pairs = []
    for path in paths:
        folder, _, name = path.rpartition("/")
        parent, _, last = folder.rpartition("/")
        match = _CACHED.fullmatch(name) if last == "__pycache__" else None
        source = f"{parent}/{match['stem']}.py".lstrip("/") if match else None
        if source in recorded:
            pairs.append((path, source))
    return pairs


def uncovered_extras(paths: Iterable[str], recorded: set[str]) -> list[str]:
    """Of the files the manifest leaves out by design (`.lockgen/`, byte-code caches), those no rule accounts
    for: anything in `.lockgen/` lockgen does not write, anything in `__pycache__` that is not the cache of a
    recorded `.py` beside it, and any `.pyc` outside `__pycache__` (Python imports it without a source)."""
    extras = []
    for path in paths:
        if path.startswith(".lockgen/"):
            if path not in LOCKGEN_FILES:
                extras.append(path)
            continue
        folder, _, name = path.rpartition("/")
        parent, _, last = folder.rpartition("/")
        if last == "__pycache__":
            match = _CACHED.fullmatch(name)
            source = f"{parent}/{match['stem']}.py".lstrip("/") if match else None
            if source not in recorded:
                extras.append(path)
        elif name.endswith(".pyc"):
            extras.append(path)
    return sorted(extras)
