"""Tried in session 30 and not kept (this folder's run.log): the environment's GPU libraries asked into the page
cache (`posix_fadvise(WILLNEED)`) on a thread started before the kernel imports torch, as verify/page_cache.py of
the tree `new` in session30b.sh (verify/__main__.py called `warm_libraries()` before `EarlyReading()` for GPU
arches). With the JIT cache filled it made a cold run slower (torch's import competes with 3.8 GB of reads at
~450 MB/s on the lent H100); the first run's extra seconds were the CUDA JIT cache (../lease3-jit-cache)."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

_PACKAGES = ("nvidia", "torch")


def library_files() -> list[Path]:
    """The shared libraries of the environment's torch and NVIDIA wheels, without importing either."""
    found: list[Path] = []
    for package in _PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            pattern = "*/lib/*.so*" if package == "nvidia" else "lib/*.so*"
            found.extend(sorted(path for path in Path(location).glob(pattern) if path.is_file()))
    return found


def _advise(paths: list[Path]) -> None:
    for path in paths:
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(descriptor)


def warm_libraries() -> threading.Thread | None:
    """Start asking the page cache for the environment's GPU libraries on a daemon thread."""
    if not hasattr(os, "posix_fadvise"):
        return None
    thread = threading.Thread(target=lambda: _advise(library_files()), name="warm-libraries", daemon=True)
    thread.start()
    return thread
