"""Hashing many files fast: files of 1 MiB and more on a pool of threads (sha256 releases the GIL on big
blocks), small ones in the calling thread meanwhile, with plain `os.read` (measured on 60,000 files of
1 KiB: threads made small files slower, 0.84 s against 0.37 s serial, and `os.read` beat buffered reads,
0.23 s). Every file is read as one of a prefix lockgen does not trust (`file_digest(follow=False)`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from lockgen.digests import file_digest

BIG = 1 << 20


def hash_files(files: Sequence[tuple[str, int]], progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """sha256 of each `(path, size)`; `progress(bytes done, bytes total)` as the big files finish."""
    big = sorted((item for item in files if item[1] >= BIG), key=lambda item: -item[1])
    small = [path for path, size in files if size < BIG]
    total = sum(size for _, size in files) or 1
    digests: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(32, os.cpu_count() or 1))) as pool:
        pending = pool.map(lambda item: file_digest(item[0], follow=False), big)
        for path in small:
            digests[path] = file_digest(path, follow=False)
        done = sum(size for _, size in files if size < BIG)
        for (path, size), digest in zip(big, pending):
            digests[path] = digest
            done += size
            if progress is not None:
                progress(done, total)
    if progress is not None:
        progress(total, total)
    return digests
