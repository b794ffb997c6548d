"""How a long transfer says where it is (issue 44): bytes in the unit that shows them best, a line every few
seconds (3 where a person watches a terminal, lockgen's 10 on a log, which a line each 3 s would flood), and for
one download the bytes so far, of how many where the server states its size, and the rate since the line before."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from lockgen.adapters.tool_runner import HEARTBEAT_S


def heartbeat_s() -> float:
    """How often a long transfer says where it is: every 3 s where a person watches a terminal, else lockgen's
    10 s (`tool_runner.HEARTBEAT_S`), as for every long tool run (a line each 3 s is 400 in a 20-minute install)."""
    return 3.0 if sys.stderr.isatty() else HEARTBEAT_S


def amount(count: float) -> str:
    """Bytes in the unit that shows them best: `812 kB`, `3.1 MB`, `2.40 GB` (SI units, as uv says them)."""
    if count < 1e6:
        return f"{count / 1e3:.0f} kB"
    return f"{count / 1e6:.1f} MB" if count < 1e9 else f"{count / 1e9:.2f} GB"


class DownloadProgress:
    """The lines of one download, `fetching `pytorch` 2.5.1: 340.2 MB of 1.20 GB (25.1 MB/s)`, one each
    `heartbeat_s()` (none for a download that ends sooner); `of ...` where the size is known (the server's
    Content-Length, a local file's size)."""

    def __init__(self, what: str, total: int | None, say: Callable[[str], None]) -> None:
        self._what, self._total, self._say = what, total, say
        self._every = heartbeat_s()
        self._last = (time.monotonic(), 0)

    def advanced(self, done: int) -> None:
        """`done` bytes have come so far: a line if the last one is `heartbeat_s()` old."""
        now = time.monotonic()
        then, before = self._last
        if now - then < self._every:
            return
        self._last = (now, done)
        of = f" of {amount(self._total)}" if self._total else ""
        self._say(f"{self._what}: {amount(done)}{of} ({amount((done - before) / max(now - then, 1e-3))}/s)")
