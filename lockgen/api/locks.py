"""Use cases over lock files that change nothing: `lockgen diff` (two locks compared per platform) and
`lockgen render` (a lock for another tool: an `@EXPLICIT` file, pip requirements with hashes, PEP 751
pylock.toml, conda's environment.yml; printed or written)."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.core.lock import lock_builder
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.lock.lock_diff import LockDiff, diff_locks
from lockgen.core.lock.render import render_explicit
from lockgen.core.lock.render_formats import render_environment, render_pylock, render_requirements
from lockgen.errors import UserError


def diff(a: Path, b: Path) -> LockDiff:
    return diff_locks(load_lock(a), load_lock(b))


RENDERERS = {
    "explicit": render_explicit,
    "requirements": render_requirements,
    "pylock": render_pylock,
    "environment": render_environment,
}


def render(lock_path: Path, platform: str | None, out: Path | None = None, fmt: str = "explicit") -> str:
    """The lock in format `fmt`; with `out`, also written there (atomically)."""
    if fmt not in RENDERERS:
        raise UserError(f"unknown format `{fmt}`", f"formats: {', '.join(RENDERERS)}")
    if out is not None:
        # named as given, never the write's temporary file; a folder refused before the lock is read
        check_writable(out, f"--out {out}", WRITABLE_HINT, file=True)
    lock = load_lock(lock_path)
    lock_builder.refuse_local(lock.package, "rendered for another tool")
    text = RENDERERS[fmt](lock, platform)
    if out is not None:
        write_atomic(out, text)
    return text


def pylock_name(lock_path: Path) -> Path:
    """PEP 751's file name for a named lock: `pylock.<target>.toml` in the current folder."""
    target = LockgenMeta(load_lock(lock_path)).target or "lock"
    return Path(f"pylock.{target}.toml")
