"""Which files a command opens, counted while it runs in this process: an audit hook (PEP 578's `open` event,
raised by `open`, `io.open` and `os.open`) records every open of the paths a test watches. Audit hooks cannot be
removed, so the one hook is installed once and stays inert unless a recorder is active (`opened` sets it for the
duration of its block only)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_active: Counter[str] | None = None  # the recorder of the `opened` block running, else None: the hook does nothing
_watched: frozenset[str] = frozenset()
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _active is None or event != "open" or isinstance(args[0], int):
        return
    try:
        where = os.path.realpath(os.fsdecode(args[0]))
    except (TypeError, ValueError):
        return
    if where in _watched and not _reads_marks_only():
        _active[where] += 1


def _reads_marks_only() -> bool:
    """Whether this open is `atomic_files._marks`', which opens a destination to read its immutable/append-only
    flags by ioctl and reads none of its bytes: not a read of the input."""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_code.co_name == "_marks" and frame.f_code.co_filename.endswith("atomic_files.py"):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def opened(*paths: Path) -> Iterator[Counter[str]]:
    """Counts the opens of `paths` (by their real path) while the block runs: `counts[str(path)]` after it."""
    global _active, _watched, _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    real = {os.path.realpath(p): str(p) for p in paths}
    counts: Counter[str] = Counter()
    _watched, _active = frozenset(real), counts
    try:
        yield counts
    finally:
        _active, _watched = None, frozenset()
        for where, shown in real.items():  # named as the test named them
            counts[shown] = counts.pop(where, 0)
