"""uv.lock (v1) as a format of `lockgen import`: recognised by its name (`*.lock`) and its first line (`version =`),
read with the settings of its workspace's pyproject.toml (`--project`, else the one beside it) and the Python uv
would pick (`--python`, else the workspace's `.python-version`, said among the assumptions), then walked as uv
installs it (`adapters.foreign.uv_lock`).
"""

from __future__ import annotations

from dataclasses import fields, replace

from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.foreign.uv_lock import UvChoices, WalkedParts, read_uv_lock
from lockgen.adapters.foreign.uv_lock_toml import read_uv_toml
from lockgen.adapters.foreign.uv_project import pinned_python, project_beside, read_uv_project
from lockgen.model.requests import ImportOptions


class UvLock:
    """A uv.lock as a `ForeignFormat`."""

    name = "uv.lock"
    described = "uv.lock (v1)"
    producer = "uv lock"
    takes = frozenset(
        {"python", "glibc", "allow_partial", "project", "package", "all_packages", "extras", "all_extras"}
        | {"groups", "dev", "no_default_groups", "all_groups", "only_groups", "no_groups"}
    )
    refuses: tuple[str, ...] = (
        "a package with no wheel for the platform",
        "a wheel that needs a newer glibc",
        "an sdist",
        "a git or local source",
        "a local project of the workspace",
    )

    def recognises(self, file: ForeignFile) -> bool:
        return file.path.suffix == ".lock" and file.text.lstrip().startswith("version = ")

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        choices, said = _choices(file, options)
        # the text is not held while the walk reads the document, each package reduced as it is read to what the
        # walk uses; the document is not held while the entries are made (at 300k packages, 500 MiB)
        document = read_uv_toml(file.handed_text(), WalkedParts())
        found = read_uv_lock(document, choices, given_away=True)
        del document
        return Imported(
            f"uv.lock v1 (CPython {found.python})",
            (),
            found.packages,
            file.sha256,
            found.skipped,
            assumed=said + found.assumed,
            python=found.python,
            unhashed=found.unhashed,
        )


def _choices(file: ForeignFile, options: ImportOptions) -> tuple[UvChoices, tuple[str, ...]]:
    """What `uv sync` would be told (the options uv takes, the pyproject's settings, the pinned Python), and the
    line saying where the Python came from when a `.python-version` chose it."""
    told = {option.name: getattr(options, option.name) for option in fields(UvChoices) if option.name != "project"}
    pyproject = project_beside(file.path, options.project)
    choices = UvChoices(**told, project=read_uv_project(pyproject) if pyproject else None)
    if options.python is not None:
        return choices, ()
    folders = [pyproject.parent, file.path.parent] if pyproject else [file.path.parent]
    pinned = pinned_python(list(dict.fromkeys(folders)))
    if pinned is None:
        return choices, ()
    beside = "pyproject.toml" if pyproject else "lock"
    said = f"CPython {pinned[0]} from {pinned[1].name} beside the {beside}, as uv picks it (--python overrides)"
    return replace(choices, python=pinned[0]), (said,)
