"""Installed Python distributions in a prefix, read from their `*.dist-info` folders: which files each
one's installed `RECORD` lists (paths relative to site-packages, `../../../bin/x` too; the RECORD read by
`core.env.wheel_files.parse_record`, the one RECORD reader, so a row leaving the prefix is refused), and a prefix
cut down to those files."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from pathlib import Path

from lockgen.core.env.wheel_files import parse_record


def dist_info_folders(prefix: Path) -> Iterator[Path]:
    """Every `lib/python*/site-packages/*.dist-info` folder of `prefix`, sorted."""
    yield from sorted(prefix.glob("lib/python*/site-packages/*.dist-info"))


def recorded_files(prefix: Path, dist_info: Path) -> list[str]:
    """The prefix-relative paths a distribution's installed RECORD lists (none when it has no RECORD)."""
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8")
    except OSError:
        return []
    site = dist_info.parent.relative_to(prefix).as_posix()
    return [posixpath.normpath(posixpath.join(site, row.path)) for row in parse_record(text, site)]


def keep_only_distributions(prefix: Path) -> list[str]:
    """Removes every file and link of `prefix` that no installed distribution's RECORD lists and that lies
    outside every dist-info folder (a scratch venv's own: `pyvenv.cfg`, `bin/python`, its seed's `.pth`),
    then the folders left empty; returns what went, prefix-relative and sorted."""
    kept = set()
    for folder in dist_info_folders(prefix):
        kept.update(recorded_files(prefix, folder))
        kept.update(p.relative_to(prefix).as_posix() for p in folder.rglob("*"))
    removed = []
    for root, folders, files in os.walk(prefix, topdown=False):  # bounded: links are never followed
        here = Path(root)
        for name in files + [f for f in folders if (here / f).is_symlink()]:
            relative = (here / name).relative_to(prefix).as_posix()
            if relative not in kept:
                (here / name).unlink()
                removed.append(relative)
        if here != prefix and not any(here.iterdir()):
            here.rmdir()
    return sorted(removed)
