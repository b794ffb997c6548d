"""Exclusive guards on files: a lock file held for one run and removed after it, a temporary folder held
while a run works in it, a folder built beside its final path and renamed there whole, a folder set aside
and deleted, and the sweep of temporary files and folders whose writer is gone. All rest on
flock(2), which the kernel releases when a process dies (kill -9 too), so nothing depends on a process
cleaning up after itself."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from lockgen.errors import HostError

ATTEMPTS = 100  # a guard file removed and re-made under us this many times running means something is wrong
STALE_AFTER_S = 60  # a temporary file untouched this long, and held by nobody, belongs to a dead run


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Holds `path` exclusively (waiting for another holder), and removes it on release. The file is
    re-opened if another holder removed it between our open and our lock, so two runs never both hold."""
    for _ in range(ATTEMPTS):
        stream = open(path, "a")
        fcntl.flock(stream, fcntl.LOCK_EX)
        try:
            same = os.fstat(stream.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        stream.close()
    else:
        raise HostError(
            f"cannot hold {path}: it was removed and re-made {ATTEMPTS} times while waiting",
            "another program is deleting lockgen's lock files; stop it and run again",
        )
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: a waiter then finds its inode gone and re-opens
        stream.close()


def hold_open(path: Path) -> int:
    """A descriptor of `path` held exclusively, so `sweep_stale` leaves the file alone while we write it."""
    descriptor = os.open(path, os.O_RDWR)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    return descriptor


@contextlib.contextmanager
def temporary_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A new folder `prefix*` in `parent`, held (flock on the folder) while in use and removed after; the
    `prefix*` leftovers of runs that were killed (held by nobody, untouched for a minute) are swept first."""
    sweep_stale(parent, f"{prefix}*")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(descriptor)


def sweep_stale(folder: Path, pattern: str) -> list[Path]:
    """Removes the files and folders matching `pattern` in `folder` that nobody holds and nobody touched
    for a minute (a fetch or an export killed mid-way); returns what was removed."""
    removed = []
    for candidate in folder.glob(pattern):
        try:
            if time.time() - candidate.lstat().st_mtime < STALE_AFTER_S:
                continue
            descriptor = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            continue
        if candidate.is_dir():
            shutil.rmtree(candidate, ignore_errors=True)
        else:
            candidate.unlink(missing_ok=True)
        os.close(descriptor)
        removed.append(candidate)
    return removed


@contextlib.contextmanager
def built_beside(final: Path) -> Iterator[Path]:
    """A folder `.NAME.tmp-PID` beside `final` to build it in (the caller holds a guard on `final`), renamed
    to `final` when the block ends without error, and removed in every case."""
    temp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    try:
        yield temp
        os.rename(temp, final)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def folder_beside(temp: Path, what: str) -> Iterator[Path]:
    """A new folder `TEMP.WHAT` beside a `built_beside` folder `temp`, for work moved into it by rename (the same
    filesystem), removed in every case; an interrupted run's is swept with it (`sweep_dead_builds`)."""
    folder = temp.parent / f"{temp.name}.{what}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweep_dead_builds(folder: Path, name: str) -> None:
    """Removes the `built_beside` folders of `name` whose process is gone (interrupted runs), and what was beside
    them (`folder_beside`)."""
    for leftover in folder.glob(f".{name}.tmp-*"):
        pid = leftover.name.rsplit("-", 1)[-1].split(".", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(leftover, ignore_errors=True)


def set_aside(path: Path, trash: Path) -> None:
    """`path` renamed to `trash` (atomic: the entry disappears at once, and is deleted after)."""
    os.rename(path, trash)


def delete_set_aside(trash: Path, shown: Path | None = None) -> Path:
    """Deletes a folder renamed aside for deletion by gc; returns `shown` (the entry it was), else the folder."""
    try:
        if trash.is_symlink():  # a link set aside (an older gc followed one): the link goes, never what it points at
            trash.unlink()
        else:
            shutil.rmtree(trash)
    except OSError as exc:
        raise HostError(
            f"gc: cannot delete `{exc.filename or trash}`: {exc.strerror or exc}",
            f"fix its permissions or remove {trash} by hand, then run gc again",
        ) from None
    return shown or trash
