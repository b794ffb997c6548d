"""uv.lock (v1) read as uv itself installs it: from the roots `uv sync` would install, with the extras and
groups it would be told, along every edge whose marker holds for the target (platform, CPython version,
the active extras and groups: `adapters.foreign.uv_graph`), to the wheel that fits each package. The walk is
taken once for both Linux platforms where no marker it judged names what they differ in (`platform_machine`).

uv.lock is universal: one file for every platform and Python, forks of a package per Python range
(`resolution-markers`) and, with `[tool.uv] conflicts`, per extra or group. It records the workspace's
members and conflicts, but not the settings uv reads from pyproject.toml at install time: which project is
the root (the one in the folder uv runs in) and `[tool.uv] default-groups`. Those come from the pyproject
(`adapters.foreign.uv_project`); without one, the root is the lock's own project (the local package at `.`, else
every member, as for a workspace root that is no project) and the default groups uv's `["dev"]`, said in
one line of what was assumed when the lock has groups that make it matter.

Nothing is taken from the top-level package list without an edge leading to it, so a Windows-only or
PyPy-only package never comes over, and a needed package that cannot come over (no wheel for the platform,
one that needs a newer glibc, an sdist, a git or local source) is listed with its reason; a chosen wheel without a
sha256 is returned as data (`UvImport.unhashed`, with its index), for the import to find its hash or refuse it.
"""

from __future__ import annotations

from sys import intern
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lockgen.adapters.pypi.python_wheels import (
    PLATFORMS,
    Python,
    UnhashedWheel,
    best_named_wheel,
    by_file_name,
    checked_glibc,
    environment_of,
    no_wheel_reason,
    python_within,
)
from lockgen.adapters.foreign.uv_graph import Node, UvGraph, activation, installed, is_local_project, tables
from lockgen.adapters.foreign.uv_records import (
    ABSENT,
    EDGE_KEYS,
    KeptEdge,
    KeptPackage,
    KeptTable,
    KeptWheel,
    KeptWheels,
)
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, pip_wheel
from lockgen.adapters.foreign.document_shape import TOML
from lockgen.model.names import normalize


@dataclass(frozen=True)
class UvProject:
    """What the workspace root's pyproject.toml says that uv.lock does not record: the project's name (None
    for a workspace root that is no project) and `[tool.uv] default-groups` (`all_default_groups` for "all")."""

    source: str
    name: str | None
    default_groups: tuple[str, ...] = ("dev",)
    all_default_groups: bool = False


@dataclass(frozen=True)
class UvChoices:
    """What `uv sync` would be told: the Python (X.Y or X.Y.Z), the extras and groups (the default groups are
    in unless `no_default_groups`, `dev` unless `dev=False`, as uv does; `all_groups`, `only_groups` without
    the projects themselves, `no_groups` left out of any), the root (`package`, or `all_packages`), the newest
    manylinux glibc a wheel may need, and the project's pyproject settings."""

    python: str | None = None
    extras: tuple[str, ...] = ()
    all_extras: bool = False
    groups: tuple[str, ...] = ()
    dev: bool = True
    no_default_groups: bool = False
    all_groups: bool = False
    only_groups: tuple[str, ...] = ()
    no_groups: tuple[str, ...] = ()
    package: str | None = None
    all_packages: bool = False
    glibc: str = "2.28"
    project: UvProject | None = None


@dataclass(frozen=True, slots=True)
class PinnedWheel:
    """The wheel chosen for a package on a platform, with its sha256: the strings of the lock's own table, held until
    the walk's document is let go, then made the lock's entry (`locked`)."""

    platform: str
    name: str
    version: str
    url: str
    sha256: str

    def locked(self) -> LockedPackage:
        return pip_wheel(self.name, self.version, self.platform, self.url, self.sha256)


@dataclass(frozen=True)
class UvImport:
    pins: tuple[PinnedWheel, ...]  # the entries, made by `packages` once the document the walk read is let go
    skipped: tuple[str, ...]
    python: str
    assumed: tuple[str, ...] = ()
    unhashed: tuple[UnhashedWheel, ...] = ()  # wheels chosen that the lock gives no sha256 for


def entries_of(pins: list[PinnedWheel]) -> tuple[LockedPackage, ...]:
    """The lock's entries, one per pinned wheel, in the pins' order: each pin taken out of `pins` (and let go of)
    as its entry is made, so the 600k pins of a 300k-package lock are not all held beside their entries."""
    pins.reverse()
    entries: list[LockedPackage] = []
    while pins:
        entries.append(pins.pop().locked())
    return tuple(entries)


_SHARED_AT_MOST = 1 << 16  # lists and tables remembered for sharing


class WalkedParts:
    """What `read_uv_lock` reads of each `[[package]]` table, kept as the table is read (`read_uv_toml`'s `reduce`):
    the keys above, each wheel's `url` and `hash`, and whether it has an sdist; `metadata`, sizes and upload times
    are not held for a large lock's walk. It refuses nothing: a table missing a key or holding the wrong type is
    judged by the walk as before. Equal values are held once, shared by every table that has them (strings
    interned; lists and tables, which the walk never changes, by their contents): a lock repeats each name in every
    edge to it, its markers in many edges, and an edge under a package's extras as in its dependencies."""

    def __init__(self) -> None:
        self._shared: dict[tuple[Any, ...], Any] = {}  # a list's or table's contents (its parts' ids) -> the one kept

    def __call__(self, entry: dict[str, Any]) -> KeptPackage:
        """The package `entry` kept: each walked key's value as `_one` keeps it (edges as `_edges`, a table of them
        as `_edge_lists`), read by a lookup each (a table of them was made, then read again by the record)."""
        if len(self._shared) > _SHARED_AT_MOST:  # lists and tables met lately are shared; a million unique edges'
            self._shared.clear()  # keys were 200 MiB more while reading (a string is shared however far apart)
        one, get = self._one, entry.get
        wheels = get("wheels", ABSENT)
        if isinstance(wheels, list):
            wheels = KeptWheels.of(wheels) or [
                KeptWheel.of(wheel) if isinstance(wheel, dict) else wheel for wheel in wheels
            ]
        dependencies = get("dependencies", ABSENT)
        optional = get("optional-dependencies", ABSENT)
        dev = get("dev-dependencies", ABSENT)
        name, version, markers = get("name", ABSENT), get("version", ABSENT), get("resolution-markers", ABSENT)
        return KeptPackage(
            intern(name) if type(name) is str else one(name),
            intern(version) if type(version) is str else one(version),
            one(get("source", ABSENT)),
            markers if markers is ABSENT else one(markers),
            dependencies if dependencies is ABSENT else self._edges(dependencies),
            optional if optional is ABSENT else self._edge_lists(optional),
            dev if dev is ABSENT else self._edge_lists(dev),
            wheels,
            True if "sdist" in entry else ABSENT,
        )

    def _edge_lists(self, value: Any) -> Any:
        """An extra's or group's table of edge lists, kept as a `KeptTable` (held once where equal, as `_one` holds a
        table), each list as `_edges` keeps it."""
        if type(value) is not dict:
            return self._one(value)
        table = {intern(key): self._edges(item) for key, item in value.items()}
        keys = tuple(table)
        keys = self._shared.setdefault((tuple, *map(id, keys)), keys)  # the keys are interned: their ids stand
        kept = KeptTable(keys, tuple(table.values()))
        return self._shared.setdefault((KeptTable, id(keys), *map(id, kept._values)), kept)

    def _edges(self, value: Any) -> Any:
        """A list of edges, kept as `_one` keeps a list, each table in it a `KeptEdge` held once where equal (a
        package's dependency is most often listed again under its extras)."""
        if type(value) is not list:
            return self._one(value)
        items = [self._edge(item) if type(item) is dict else self._one(item) for item in value]
        return self._shared.setdefault((list, *map(id, items)), items)

    def _edge(self, table: dict[str, Any]) -> KeptEdge:
        """The edge `table` kept, its parts as `_one` keeps them (a string interned in place), the record made only
        where no equal one is held."""
        one, get = self._one, table.get
        parts = [
            intern(part) if type(part) is str else part if part is ABSENT else one(part)
            for part in map(get, EDGE_KEYS, _ABSENT_EACH)
        ]
        key = (KeptEdge, *map(id, parts))
        edge = self._shared.get(key)
        if edge is None:
            edge = self._shared[key] = KeptEdge(*parts)
        return edge

    def _one(self, value: Any) -> Any:
        """The value kept for `value`: the one held already where an equal one was seen. A part's id stands for it in
        its container's key: strings are interned (equal ones are one object), lists and tables shared, and every
        part kept is held by the list or table kept with it, so no id in a key is reused while the key lives (an
        equal number or boolean parsed twice is two objects, kept apart: True is not 1). A string part is interned
        in place, not by a call of its own (most parts are strings)."""
        kind = type(value)
        if kind is str:
            return intern(value)
        if kind is list:
            items = [intern(item) if type(item) is str else self._one(item) for item in value]
            return self._shared.setdefault((list, *map(id, items)), items)
        if kind is dict:
            table = {intern(key): intern(item) if type(item) is str else self._one(item) for key, item in value.items()}
            return self._shared.setdefault((dict, *table, *map(id, table.values())), table)
        return value


_ABSENT_EACH = (ABSENT,) * len(EDGE_KEYS)  # what an edge's table gives for each key it does not have


_LET_GO = ("wheels", "dependencies", "optional-dependencies", "dev-dependencies")  # of a converted entry given away


def read_uv_lock(data: dict[str, Any], choices: UvChoices, given_away: bool = False) -> UvImport:
    """The wheels uv would install from `data` (a parsed uv.lock) on each Linux platform, and what it would
    need that cannot come over. `given_away`: the caller lets go of `data` after this, so each package's wheels and
    edges are let go of once it is pinned for every platform that reached it (the pins hold what they need: at 300k
    packages the document's wheels and edges and every pin were held at once)."""
    if data.get("version") != 1:
        raise LockFormatError(
            f"uv.lock version {TOML.value_of(data.get('version'))} is not supported", "lockgen imports uv.lock v1"
        )
    glibc = checked_glibc(choices.glibc)
    python = python_within(data.get("requires-python", ""), choices.python)
    graph = UvGraph.of(data)
    roots = _roots(graph, choices)
    starts, assumed = _starts(graph, roots, choices)
    pins: list[PinnedWheel] = []
    skipped: list[str] = []
    unhashed: list[UnhashedWheel] = []
    try:
        walks = _walks(graph, starts, python)
    finally:  # what the walks worked out of each edge (held by the document's edges): the entries are made without it
        graph.let_go_of_edges()
    found_on: dict[str, list[PinnedWheel | UnhashedWheel | str]] = {platform: [] for platform in walks}
    # a package converted once for every platform that reached it (its wheels named once, their names parsed once:
    # `parse_wheel_filename`'s cache), each platform's found in the order of its names; its wheels let go of then
    for entry, platforms in _reached_in_order(walks, graph.workspace):
        for platform, found in zip(platforms, _converted(entry, platforms, python, glibc)):
            found_on[platform].append(found)
        if given_away:  # nothing reads them now: the walks are over, the entry converted
            if type(entry) is KeptPackage:
                entry.let_go_of_walked()
            else:
                for let_go in _LET_GO:
                    entry.pop(let_go, None)
    for found in (found for platform in walks for found in found_on[platform]):
        if isinstance(found, PinnedWheel):
            pins.append(found)
        elif isinstance(found, UnhashedWheel):
            unhashed.append(found)
        else:
            skipped.append(found)
    return UvImport(tuple(pins), tuple(skipped), python.shown, assumed, tuple(unhashed))


def _reached_in_order(
    walks: dict[str, dict[str, dict[str, Any]]], workspace: dict[str, Any] | None
) -> Iterator[tuple[dict[str, Any], Sequence[str]]]:
    """Each entry the walks reached (but the workspace root), by name, with the platforms that reached it; where one
    walk served every platform, its entries with them all (a table of each name's entries by platform was made)."""
    platforms = tuple(walks)
    first = walks[platforms[0]]
    if all(reached is first for reached in walks.values()):
        for key in sorted(first):
            if first[key] is not workspace:
                yield first[key], platforms
        return
    for key in sorted(set().union(*walks.values())):
        platforms_of: dict[int, tuple[dict[str, Any], list[str]]] = {}  # an entry's id -> it, the platforms on it
        for platform, reached in walks.items():
            entry = reached.get(key)
            if entry is not None and entry is not workspace:
                platforms_of.setdefault(id(entry), (entry, []))[1].append(platform)
        yield from platforms_of.values()


def _walks(graph: UvGraph, starts: list[Node], python: Python) -> dict[str, dict[str, dict[str, Any]]]:
    """What each platform installs (`installed`), by platform. The walk is a function of its markers' verdicts:
    where no marker it judged names a variable the platforms differ in (platform_machine), every other platform's
    walk would judge the same markers alike and reach the same, and is not taken."""
    environments = {platform: environment_of(platform, python) for platform in PLATFORMS}
    first, *others = environments.values()
    differing = {name for name, value in first.items() if any(other[name] != value for other in others)}
    walks: dict[str, dict[str, dict[str, Any]]] = {}
    shared: dict[str, dict[str, Any]] | None = None
    for platform, environment in environments.items():
        if shared is not None:
            walks[platform] = shared
            continue
        judged: set[str] = set()
        walks[platform] = installed(graph, starts, environment, activation(graph, starts, environment, judged), judged)
        # `platform.machine` is PEP 508's older spelling, still read as the same variable
        if not any(name in marker.replace(".", "_") for marker in judged for name in differing):
            shared = walks[platform]
    return walks


def _roots(graph: UvGraph, choices: UvChoices) -> list[dict[str, Any]]:
    """The projects `uv sync` installs: `--package`'s, every member's, the pyproject's project, or the lock's
    own (the local package at `.`; every member, and the root's own requirements and groups, where the
    workspace root is no project)."""
    members = ", ".join(graph.members)
    if choices.package is not None:
        if normalize(choices.package) not in graph.members:
            raise UserError(f"the lock's workspace has no member `{choices.package}`", f"its members: {members}")
        return [graph.member(choices.package)]
    if choices.all_packages:  # a root that is no project comes too, its groups with it (as uv exports them)
        return [graph.member(name) for name in graph.members] + ([graph.workspace] if graph.workspace else [])
    project = choices.project
    if project is not None and project.name is not None:
        if normalize(project.name) not in graph.members:
            raise UserError(
                f"`{project.source}` is the project `{project.name}`, which this uv.lock does not hold",
                f"pass the pyproject.toml of the workspace that wrote the lock (its members: {members})",
            )
        return [graph.member(project.name)]
    own = [graph.member(name) for name in graph.members if _at_root(graph.member(name))]
    if own and project is None:
        return own[:1]
    return [graph.member(name) for name in graph.members] + ([graph.workspace] if graph.workspace else [])


def _at_root(entry: dict[str, Any]) -> bool:
    source = entry.get("source", {})
    return source.get("editable", source.get("virtual")) == "."


def _starts(graph: UvGraph, roots: list[dict[str, Any]], choices: UvChoices) -> tuple[list[Node], tuple[str, ...]]:
    """The walk's starting nodes (each root, its chosen extras and groups; with `--package`, the groups asked for
    of a workspace root that is no project too, as uv exports them) and what was assumed to choose them.
    An extra or group no root has is refused, listing the ones they have."""
    extras = _known(roots, "extra", choices.extras)
    virtual = graph.workspace if choices.package is not None and graph.workspace is not None else None
    groups = _known(roots + ([virtual] if virtual else []), "group", choices.groups + choices.only_groups)
    left_out = {normalize(g) for g in choices.no_groups}
    project = choices.project
    if choices.no_default_groups or choices.only_groups:
        defaults: set[str] = set()
    elif project is not None and project.all_default_groups:
        defaults = {name for root in roots for name in tables(root, "group")}
    else:
        defaults = {normalize(g) for g in (project.default_groups if project else ("dev",))}
    defaults -= set() if choices.dev else {"dev"}
    starts: list[Node] = []
    for root in roots:
        has_extras, has_groups = set(tables(root, "extra")), set(tables(root, "group"))
        if not choices.only_groups:  # --only-group: the groups alone, not the projects (as uv)
            starts.append((root, "", ""))
            starts += [(root, "extra", e) for e in sorted(has_extras if choices.all_extras else has_extras & extras)]
        starts += [
            (root, "group", g)
            for g in sorted((has_groups if choices.all_groups else has_groups & (groups | defaults)) - left_out)
        ]
    if virtual is not None:
        starts += [(virtual, "group", g) for g in sorted(set(tables(virtual, "group")) & groups - left_out)]
    return starts, _assumed(graph, roots, choices, defaults)


def _known(roots: list[dict[str, Any]], kind: str, wanted: tuple[str, ...]) -> set[str]:
    chosen = {normalize(name) for name in wanted}
    known = {name for root in roots for name in tables(root, kind)}
    unknown = ", ".join(sorted(chosen - known))
    if unknown:
        word, words = ("extra", "extras") if kind == "extra" else ("dependency group", "groups")
        if len(roots) == 1:
            raise UserError(
                f"the project `{roots[0]['name']}` has no {word} {unknown}",
                f"its {words}: {', '.join(sorted(known)) or 'none'} (another member: --package NAME)",
            )
        raise UserError(
            f"no workspace member has the {word} {unknown}", f"their {words}: {', '.join(sorted(known)) or 'none'}"
        )
    return chosen


def _assumed(graph: UvGraph, roots: list[dict[str, Any]], choices: UvChoices, defaults: set[str]) -> tuple[str, ...]:
    """The one line saying that uv's default groups were assumed, where no pyproject said and it matters (a
    root has a default group, or the lock's conflicts name groups)."""
    if choices.project is not None or choices.no_default_groups:
        return ()
    groups = {name for root in roots for name in tables(root, "group")}
    conflicting = any(kind == "group" for conflict in graph.conflicts for _, kind, _ in conflict)
    if not (groups & defaults or conflicting):
        return ()
    return (
        'no pyproject.toml beside the lock: assumed uv\'s default-groups ["dev"] (uv.lock does not record '
        "[tool.uv] default-groups), pass --project PATH/pyproject.toml to read it, or choose with --group, "
        "--no-dev or --no-default-groups",
    )


def _label(entry: dict[str, Any], platform: str) -> str:
    """How a package is named in a line saying why it cannot come over (made only for such a line)."""
    return f"{platform}: `{entry['name']}` {entry.get('version', '')}".rstrip()


def _converted(
    entry: dict[str, Any], platforms: Sequence[str], python: Python, glibc: str
) -> list[PinnedWheel | UnhashedWheel | str]:
    """For each of `platforms`, in turn: the lock entry for the package, the wheel chosen when the lock gives no
    sha256 for it, or why it cannot come over. What does not depend on the platform is judged once."""
    source = entry.get("source", {})
    if is_local_project(entry):
        return [
            f"{platform}: `{entry['name']}` is a local project of the workspace (no archive to lock)"
            for platform in platforms
        ]
    if "git" in source:
        return [
            f"{_label(entry, platform)} comes from git ({source['git']}): build a wheel and pin it"
            for platform in platforms
        ]
    if "path" in source or "directory" in source:
        folder = source.get("path") or source.get("directory")
        return [
            f"{_label(entry, platform)} is a local path ({folder}): build a wheel and pin it" for platform in platforms
        ]
    listed = entry.get("wheels", [])
    # (kept as one string, every wheel has its url)
    wheels = list(listed) if type(listed) is KeptWheels else [wheel for wheel in listed if "url" in wheel]
    named = by_file_name(wheels)
    return [_pinned(entry, source, wheels, named, platform, python, glibc) for platform in platforms]


def _pinned(
    entry: dict[str, Any],
    source: dict[str, Any],
    wheels: list[Any],
    named: dict[str, Any],
    platform: str,
    python: Python,
    glibc: str,
) -> PinnedWheel | UnhashedWheel | str:
    """The package's wheel on `platform` (among its wheels `named` by file name), pinned by its sha256; the wheel
    when the lock gives no sha256 for it; or why none fits."""
    wheel = best_named_wheel(named, platform, python, glibc)
    if wheel is None:
        return f"{_label(entry, platform)} {no_wheel_reason(wheels, platform, python, glibc, 'sdist' in entry)}"
    digest = str(wheel.get("hash", ""))
    if not digest.startswith("sha256:"):
        return UnhashedWheel(
            platform, entry["name"], str(entry["version"]), wheel["url"], str(source.get("registry", ""))
        )
    return PinnedWheel(platform, entry["name"], str(entry["version"]), wheel["url"], digest.removeprefix("sha256:"))
