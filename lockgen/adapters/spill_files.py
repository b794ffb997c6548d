"""Records written to an unnamed temporary file and read back in order, any number of times: what a command
that streams many records (`fleet status`'s rows, 100,000 of them) writes as it goes instead of holding them.
The file is made before a fork, so a child writes it and the parent reads it back; it is removed by the system
when its last descriptor closes. `SortedSpill` sorts more records than it holds: sorted runs spilled, then merged."""

from __future__ import annotations

import heapq
import marshal
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any


class SpillFile:
    """Plain values (marshal's: numbers, text, tuples, lists, dicts) appended one at a time and read back in order,
    each written as its length (4 bytes) and its marshal bytes."""

    def __init__(self) -> None:
        self._stream = tempfile.TemporaryFile()

    def append(self, record: Any) -> None:
        data = marshal.dumps(record)
        self._stream.write(len(data).to_bytes(4, "little") + data)

    def finish(self) -> None:
        """Writes what is buffered (a child's writes must reach the file before it ends)."""
        self._stream.flush()

    def clear(self) -> None:
        """Empties the file (a child that failed may have written part of its records)."""
        self._stream.seek(0)
        self._stream.truncate()

    def records(self, count: int) -> Iterator[Any]:
        """The first `count` records, in the order they were appended."""
        self._stream.seek(0)
        read = self._stream.read
        for _ in range(count):  # each record read whole (marshal.load from a file reads it in many small reads)
            yield marshal.loads(read(int.from_bytes(read(4), "little")))


class SortedSpill:
    """`records` sorted by `key`, holding at most `run` of them at a time: each run of that many is sorted and
    written to a file of its own, and the runs are merged as they are read back (a fleet's 100,000 certificate
    paths are never one list); fewer than `run` records are sorted in memory. Iterable once."""

    def __init__(self, records: Iterable[Any], key: Callable[[Any], Any], run: int = 20_000) -> None:
        self._key = key
        self._runs: list[tuple[SpillFile, int]] = []
        self._held: list[Any] = []
        self.count = 0  # how many records there are
        for record in records:
            self._held.append(record)
            self.count += 1
            if len(self._held) >= run:
                self._spill()
        self._held.sort(key=key)
        if self._runs and self._held:
            self._spill()

    def _spill(self) -> None:
        self._held.sort(key=self._key)
        spill = SpillFile()
        for record in self._held:
            spill.append(record)
        spill.finish()
        self._runs.append((spill, len(self._held)))
        self._held = []

    def __iter__(self) -> Iterator[Any]:
        if not self._runs:
            return iter(self._held)
        return heapq.merge(*(spill.records(count) for spill, count in self._runs), key=self._key)
