"""uv.lock (v1) as a format of `lockgen import`: recognised by its name (`*.lock`) and its first line (`version =`),
read with the settings of its workspace's pyproject.toml (`--project`, else the one beside it) and the Python uv
would pick (`--python`, else the workspace's `.python-version`, said among the assumptions), then walked as uv
installs it (`adapters.foreign.uv_lock`).
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import partial

from lockgen.adapters.foreign.document_shape import TEXT, TOML, TRIPS, Shape, check_shape
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.foreign.uv_lock import UvChoices, WalkedParts, entries_of, read_uv_lock
from lockgen.adapters.foreign.uv_records import KeptWheels
from lockgen.adapters.foreign.uv_lock_toml import read_uv_pieces, read_uv_toml
from lockgen.adapters.foreign.uv_project import pinned_python, project_beside, read_uv_project
from lockgen.model.requests import ImportOptions


_REWRITE = "it was edited or cut short: use the file uv lock wrote"
# what the walk reads of a uv.lock (`uv_lock`, `uv_graph`), each key's TOML type: judged where the walk trips
_EDGE = TOML.table_of(
    {
        "name": TEXT,
        "marker": TEXT,
        "extra": TOML.array_of(TEXT),
        "version": TEXT,
        "source": TOML.table_of(each=TEXT),
    },
    required=("name",),
)
_EDGES = TOML.array_of(_EDGE)
# a package's wheels as the file holds them, or as the reader keeps them (`KeptWheels`: made only of wheels in shape)
_WHEEL_ARRAY = TOML.array_of(TOML.table_of({"url": TEXT, "hash": TEXT}))
_WHEELS = Shape(
    _WHEEL_ARRAY.name, lambda value: isinstance(value, KeptWheels) or _WHEEL_ARRAY.holds(value), _WHEEL_ARRAY.each
)
_PACKAGE = TOML.table_of(
    {
        "name": TEXT,
        "version": TEXT,
        "source": TOML.table_of(each=TEXT),
        "resolution-markers": TOML.array_of(TEXT),
        "dependencies": _EDGES,
        "optional-dependencies": TOML.table_of(each=_EDGES),
        "dev-dependencies": TOML.table_of(each=_EDGES),
        "wheels": _WHEELS,
    },
    required=("name",),
)
_REQUIREMENTS = TOML.array_of(
    TOML.table_of({"name": TEXT, "marker": TEXT, "extras": TOML.array_of(TEXT)}, required=("name",))
)
_DOCUMENT = TOML.table_of(
    {
        "requires-python": TEXT,
        "package": TOML.array_of(_PACKAGE),
        "manifest": TOML.table_of(
            {
                "members": TOML.array_of(TEXT),
                "requirements": _REQUIREMENTS,
                "dependency-groups": TOML.table_of(each=_REQUIREMENTS),
            }
        ),
        "conflicts": TOML.array_of(TOML.array_of(TOML.table_of({"package": TEXT, "extra": TEXT, "group": TEXT}))),
    }
)


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
        if file.path.suffix != ".lock":
            return False
        # the first piece not all whitespace holds the text's start up to its line end, where `version = ` would be
        head = next((piece.lstrip() for piece in file.pieces if piece.strip()), "")
        return head.startswith("version = ")

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        choices, said = _choices(file, options)
        # the text is not held while the walk reads the document, each package reduced as it is read to what the
        # walk uses; the document is not held while the entries are made (at 300k packages, 500 MiB)
        document = read_uv_pieces(file.handed_pieces(), file.text_again, WalkedParts())
        read = partial(read_uv_lock, document, choices, given_away=True)
        try:
            found = read()
        except TRIPS:
            # the reader let go of each converted package's wheels and edges: the shape is judged on the document
            # read again whole, so the refusal names the first place out of shape in the file, as `read_in_shape`
            del read, document
            again = read_uv_toml(file.text_again(), WalkedParts())  # the text read once (tomllib takes it too)
            check_shape(again, _DOCUMENT, self.name, _REWRITE, TOML)
            raise
        del read, document  # the partial held it too, while every entry was made
        pins = list(found.pins)
        found = replace(found, pins=())  # the pins held by the list alone, each let go of as its entry is made
        return Imported(
            f"uv.lock v1 (CPython {found.python})",
            (),
            entries_of(pins),
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
