"""A conda-lock.yml (unified v1) for `lockgen import`, read by the one v1 reader (`lockfile_yaml.v1_lock`) that
reads lockgen's own locks. Recognised by its YAML: `version: 1` and a `package` list; it takes `--allow-partial`
alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import cast

from lockgen.adapters.foreign.conda_entries import folder_of, pip_entry, sort_into, split_conda_file
from lockgen.adapters.foreign.document_shape import YAML, Shape, read_in_shape
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.lock.lockfile_yaml import v1_lock
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.model.lock import LockedPackage
from lockgen.model.requests import ImportOptions


class CondaLockFile:
    """A conda-lock.yml as a `ForeignFormat`."""

    name = "conda-lock.yml"
    described = "conda-lock.yml (v1)"
    producer = "conda-lock"
    takes = frozenset({"allow_partial"})
    refuses: tuple[str, ...] = ("a pip entry's sdist",)

    def recognises(self, file: ForeignFile) -> bool:
        document = file.yaml_mapping()
        return document is not None and document.get("version") == 1 and "package" in document

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        document = cast(dict[str, object], file.yaml_mapping())
        return read_in_shape(
            lambda: conda_lock(document, file.sha256, file.path), document, _DOCUMENT, self.name, _REWRITE, YAML
        )


_REWRITE = "it was edited or cut short: use the conda-lock.yml conda-lock wrote"
# what is read here before the v1 reader, which words what breaks its models itself (`lockfile_yaml.v1_lock`)
_DOCUMENT = YAML.table_of({"package": Shape("a list", lambda value: value is None or isinstance(value, list))})


def conda_lock(document: dict[str, object], digest: str, path: Path) -> Imported:
    """A conda-lock.yml's YAML document read by the one v1 reader; its pip entries are kept when they are wheels
    with a hash, one without a hash is left to be pinned from where it is listed (none for an entry with a
    `source`: conda-lock's mark on a direct URL), and a conda entry without a `build` (conda-lock writes none)
    takes its archive's."""
    listed = cast(list[object], document["package"] or [])
    direct = {(e.get("platform"), e.get("name")) for e in listed if isinstance(e, dict) and e.get("source")}
    entries = [{k: v for k, v in e.items() if k != "source"} if isinstance(e, dict) else e for e in listed]
    lock = v1_lock({**document, "package": entries}, str(path), _REWRITE)
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    unhashed: list[UnhashedWheel] = []
    for entry in lock.package:
        if entry.manager == "pip":
            pip = pip_entry(
                entry.name,
                entry.version,
                entry.url,
                entry.hash,
                entry.platform,
                () if (entry.platform, entry.name) in direct else folder_of(entry.url),
                dependencies=entry.dependencies,
                category=entry.category,
                optional=entry.optional,
            )
            sort_into(pip, packages, skipped, unhashed)
            continue
        packages.append(entry if entry.build else replace(entry, build=split_conda_file(entry.url)[3]))
    channels = tuple(c.url for c in lock.metadata.channels)
    return Imported("conda-lock.yml v1", channels, tuple(packages), digest, tuple(skipped), unhashed=tuple(unhashed))
