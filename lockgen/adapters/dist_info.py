"""Installed Python distributions in a prefix, read from their `*.dist-info` folders: which files each
one's installed `RECORD` lists (paths relative to site-packages, `../../../bin/x` too)."""

from __future__ import annotations

import csv
import io
import posixpath
from collections.abc import Iterator
from pathlib import Path


def dist_info_folders(prefix: Path) -> Iterator[Path]:
    """Every `lib/python*/site-packages/*.dist-info` folder of `prefix`, sorted."""
    yield from sorted(prefix.glob("lib/python*/site-packages/*.dist-info"))


def recorded_files(prefix: Path, dist_info: Path) -> list[str]:
    """The prefix-relative paths a distribution's installed RECORD lists (none when it has no RECORD)."""
    try:
        rows = csv.reader(io.StringIO((dist_info / "RECORD").read_text(encoding="utf-8")))
    except OSError:
        return []
    site = dist_info.parent.relative_to(prefix).as_posix()
    return [posixpath.normpath(posixpath.join(site, row[0])) for row in rows if row and row[0]]
