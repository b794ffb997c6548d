"""Use cases over lock files that change nothing: `lockgen diff` (two locks compared per platform) and
`lockgen render` (a lock's conda packages as an `@EXPLICIT` file, printed or written)."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.atomic_files import write_atomic
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.core.lock_diff import LockDiff, diff_locks
from lockgen.core.render import render_explicit


def diff(a: Path, b: Path) -> LockDiff:
    return diff_locks(load_lock(a), load_lock(b))


def render(lock_path: Path, platform: str | None, out: Path | None = None) -> str:
    """The `@EXPLICIT` text; with `out`, also written there (atomically)."""
    text = render_explicit(load_lock(lock_path), platform)
    if out is not None:
        write_atomic(out, text)
    return text
