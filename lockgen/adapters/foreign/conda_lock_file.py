"""A conda-lock.yml (unified v1) for `lockgen import`, read by the one v1 reader (`lockfile_yaml.v1_lock`) that
reads lockgen's own locks. Recognised by its YAML: `version: 1` and a `package` list; it takes no option.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from lockgen.adapters.foreign.conda_entries import pip_entry, sort_into, split_conda_file
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.lock.lockfile_yaml import v1_lock
from lockgen.model.lock import LockedPackage
from lockgen.model.requests import ImportOptions


class CondaLockFile:
    """A conda-lock.yml as a `ForeignFormat`."""

    name = "conda-lock.yml"
    described = "conda-lock.yml (v1)"
    producer = "conda-lock"
    takes: frozenset[str] = frozenset()
    refuses: tuple[str, ...] = ("a pip entry's sdist", "a pip entry without a hash")

    def recognises(self, file: ForeignFile) -> bool:
        document = file.yaml_mapping()
        return document is not None and document.get("version") == 1 and "package" in document

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        return conda_lock(cast(dict[str, object], file.yaml_mapping()), file.sha256, file.path)


def conda_lock(document: dict[str, object], digest: str, path: Path) -> Imported:
    """A conda-lock.yml's YAML document read by the one v1 reader; its pip entries are kept when they are wheels
    with a hash, and a conda entry without a `build` (conda-lock writes none) takes its archive's."""
    listed = cast(list[object], document["package"] or [])
    entries = [{k: v for k, v in e.items() if k != "source"} if isinstance(e, dict) else e for e in listed]
    lock = v1_lock({**document, "package": entries}, str(path), "use the conda-lock.yml conda-lock wrote")
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    for entry in lock.package:
        if entry.manager == "pip":
            pip = pip_entry(
                entry.name,
                entry.version,
                entry.url,
                entry.hash,
                entry.platform,
                dependencies=entry.dependencies,
                category=entry.category,
                optional=entry.optional,
            )
            sort_into(pip, packages, skipped)
            continue
        packages.append(entry if entry.build else entry.model_copy(update={"build": split_conda_file(entry.url)[3]}))
    return Imported(
        "conda-lock.yml v1", tuple(c.url for c in lock.metadata.channels), tuple(packages), digest, tuple(skipped)
    )
