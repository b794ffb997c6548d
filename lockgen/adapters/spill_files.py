"""Records written to an unnamed temporary file and read back in order, any number of times: what a command
that streams many records (`fleet status`'s rows, 100,000 of them) writes as it goes instead of holding them.
The file is made before a fork, so a child writes it and the parent reads it back; it is removed by the system
when its last descriptor closes."""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Iterator
from typing import Any


class SpillFile:
    """Plain values (marshal's: numbers, text, tuples, lists, dicts) appended one at a time and read back in order."""

    def __init__(self) -> None:
        self._stream = tempfile.TemporaryFile()

    def append(self, record: Any) -> None:
        marshal.dump(record, self._stream)

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
        for _ in range(count):
            yield marshal.load(self._stream)
