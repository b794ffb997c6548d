"""uv.lock's dependency graph walked as `uv sync` and `uv export` walk it: from the roots (the lock's own
project, `--package NAME`, or every workspace member with `--all-packages`), with their chosen extras and
dependency groups, along every edge whose marker holds for the target.

The active set is a set of (package, extra) and (package, group) items, written as uv writes them into
conflict markers (`extra-<len>-<package>-<extra>`, `group-<len>-<package>-<group>`). It starts with the
roots' chosen extras and groups and grows along edges that name extras (`member[cu128-torch27]` named by
the root's `cu128` extra activates the member's `cu128-torch27`), until nothing more is activated: uv's
first pass, repeated to a fixpoint so the order edges are met in does not matter. Only then is the graph
walked for what is installed, every marker judged against the whole active set (uv's second pass): the activation's
last walk is taken as that walk where it would have walked alike (no fork chosen, and every verdict it gave the one
the whole set gives, each marker naming items judged again once per set of them it found active). Two
items the lock's `conflicts` declare incompatible, both active, are refused as uv refuses them.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.markers import InvalidMarker, Marker

from lockgen.adapters.foreign.uv_records import ABSENT, KeptEdge, KeptPackage, KeptTable
from lockgen.errors import LockFormatError, UserError
from lockgen.model.names import normalize

_EXTRA_TEST = re.compile(r"""extra\s*(==|!=)\s*(['"])([^'"]*)\2""")
Node = tuple[dict[str, Any], str, str]  # (a package entry, "", "") or (entry, "extra" | "group", its name)
# what the walk works out of an edge: the items its extras name, those extras, the entries it may point at
Walked = tuple[tuple[str, ...], tuple[str, ...], Sequence[dict[str, Any]]]


def item(package: str, kind: str, name: str) -> str:
    """A (package, extra|group) item as uv's conflict markers name it."""
    package = normalize(package)
    return f"{kind}-{len(package)}-{package}-{normalize(name)}"


def key_of(entry: Mapping[str, Any]) -> str:
    """The name a package is keyed by in the graph: normalized, the string the entry holds where it is written so
    (interned); a `KeptPackage` keeps it, worked out once."""
    if type(entry) is KeptPackage:
        if entry.key is None:
            entry.key = sys.intern(normalize(entry["name"]))
        return entry.key
    return sys.intern(normalize(entry["name"]))


@dataclass(frozen=True)
class UvGraph:
    """A uv.lock's packages by normalized name (several entries where the lock forks), its members and its
    conflict sets (each a list of (package, kind, name))."""

    entries: dict[str, tuple[dict[str, Any], ...]]
    members: tuple[str, ...]
    conflicts: tuple[tuple[tuple[str, str, str], ...], ...]
    workspace: dict[str, Any] | None = None  # a root that is no project: its requirements and groups, as an entry
    # what each edge that is no `KeptEdge` names (a workspace root's), worked out once and read on every walk (a
    # lock's object ids, while the graph lives); a `KeptEdge` holds its own, listed in `walked_edges`
    edges: dict[int, Walked] = field(default_factory=dict, compare=False, repr=False)
    walked_edges: list[KeptEdge] = field(default_factory=list, compare=False, repr=False)
    extras: dict[int, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)  # by list's id

    @classmethod
    def of(cls, data: dict[str, Any]) -> UvGraph:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for entry in data.get("package", []):  # each key the string the entry holds where its name is normalized
            grouped.setdefault(key_of(entry), []).append(entry)
        entries = {name: tuple(group) for name, group in grouped.items()}  # a list grown by append is 40 bytes more
        members = [normalize(name) for name in (data.get("manifest") or {}).get("members", [])]
        members = members or sorted(name for name, group in entries.items() if any(is_local_project(e) for e in group))
        if not members:
            raise LockFormatError(
                "uv.lock names no project of its own (no virtual or editable package)",
                "import a uv.lock written by `uv lock` in a project",
            )
        conflicts = tuple(
            tuple(
                (
                    normalize(c.get("package", "")),
                    "extra" if "extra" in c else "group",
                    normalize(c.get("extra") or c.get("group", "")),
                )
                for c in conflict
            )
            for conflict in data.get("conflicts") or []
        )
        return cls(entries, tuple(members), conflicts, _workspace_root(data.get("manifest") or {}))

    def let_go_of_edges(self) -> None:
        """Forgets what the walks worked out of each edge (a third of what a walk holds) and the nodes they marked
        expanded, once no walk follows."""
        self.edges.clear()
        self.extras.clear()
        for edge in self.walked_edges:
            edge.named, edge.extras, edge.candidates = (), (), None
        self.walked_edges.clear()
        for group in self.entries.values():
            for entry in group:
                if type(entry) is KeptPackage:
                    entry.walked_by = entry.walked_kinds = None

    def member(self, name: str) -> dict[str, Any]:
        found = [e for e in self.entries.get(normalize(name), []) if is_local_project(e)]
        if not found:
            raise LockFormatError(
                f"uv.lock lists `{name}` as a workspace member but holds no local package of that name",
                "the file was edited or cut short: use the one `uv lock` wrote",
            )
        return found[0]


def _workspace_root(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """A workspace root that is no project keeps its own requirements and groups in `[manifest]`; they
    become the edges of an entry of its own (`extras` there is `extra` on an edge)."""

    def edges(requirements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"name": r["name"], "marker": r.get("marker"), "extra": r.get("extras", [])} for r in requirements]

    if not manifest.get("requirements") and not manifest.get("dependency-groups"):
        return None
    return {
        "name": "workspace-root",
        "source": {"virtual": "."},
        "dependencies": edges(manifest.get("requirements", [])),
        "dev-dependencies": {group: edges(deps) for group, deps in (manifest.get("dependency-groups") or {}).items()},
    }


def is_local_project(entry: dict[str, Any]) -> bool:
    source = entry.get("source", {})
    return "virtual" in source or "editable" in source


def tables(entry: dict[str, Any], kind: str) -> dict[str, list[dict[str, Any]]]:
    """An entry's extras (`optional-dependencies`) or groups (`dev-dependencies`), keyed by normalized name."""
    table = entry.get("optional-dependencies" if kind == "extra" else "dev-dependencies")
    pairs = table.pairs() if type(table) is KeptTable else (table or {}).items()
    return {normalize(key): value for key, value in pairs}


def activated(
    graph: UvGraph, starts: list[Node], environment: dict[str, str], judged: set[str] | None = None
) -> frozenset[str]:
    """Every item active for the target: the starts' own, and those edges holding for the target activate. Another
    walk is taken while the last one activated items, unless nothing it judged could come out otherwise under the
    grown set (no edge naming an item was refused, no fork was chosen): then it would walk the same edges. Every
    marker judged is added to `judged`, where given."""
    return activation(graph, starts, environment, judged).active


@dataclass
class PassNotes:
    """What one walk of the activation saw: what it reached, each verdict it gave (by marker, and the items the
    marker found active where it names any), and whether it chose a fork or met two entries of one name."""

    reached: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[str | tuple[str, frozenset[str]], bool] = field(default_factory=dict)
    forked: bool = False
    two_versions: bool = False


@dataclass(frozen=True)
class Activation:
    """The items active for the target (`activated`), and the notes of the activation's last walk, which
    `installed` takes as its own walk where every verdict would come out alike under the whole active set."""

    active: frozenset[str]
    last: PassNotes


def activation(
    graph: UvGraph, starts: list[Node], environment: dict[str, str], judged: set[str] | None = None
) -> Activation:
    """`activated`, with the notes of its last walk."""
    active = {item(entry["name"], kind, name) for entry, kind, name in starts if kind}
    while True:
        before = len(active)
        unsettled: list[bool] = []
        notes = PassNotes()
        notes.reached = _traverse(
            graph, starts, environment, active, grow=True, unsettled=unsettled, judged=judged, notes=notes
        )
        if len(active) == before or not unsettled:
            return Activation(frozenset(active), notes)


def installed(
    graph: UvGraph,
    starts: list[Node],
    environment: dict[str, str],
    active: frozenset[str] | Activation,
    judged: set[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every package reached from the starts along edges whose markers hold: normalized name -> its entry. Every
    marker judged is added to `judged`, where given. Given the `Activation`, its last walk is this walk where it
    chose no fork, met no two entries of a name, and each of its verdicts is the one the whole active set gives
    (a marker naming an item is judged again, once for each set of them it found active): that walk then took every
    edge this one would, in the same order, and judged the same markers (a walk of 600k edges at 300k packages)."""
    if isinstance(active, Activation):
        refuse_conflicting(graph, active.active)
        if _walked_alike(active, environment):
            return active.last.reached
        active = active.active
    refuse_conflicting(graph, active)
    return _traverse(graph, starts, environment, set(active), grow=False, judged=judged)


def _walked_alike(activation: Activation, environment: dict[str, str]) -> bool:
    """Whether `installed` would walk as the activation's last walk did (`installed`'s conditions)."""
    last, active = activation.last, activation.active
    if last.forked or last.two_versions:
        return False
    target_items = tuple(environment.items())
    for key, holding in last.verdicts.items():
        if type(key) is tuple:  # a marker naming items, judged with those it found active then
            marker, found = key
            now = frozenset(name for name in _parsed(marker)[1] if name in active)
            if now != found and _verdict(marker, target_items, now) != holding:
                return False
    return True


def refuse_conflicting(graph: UvGraph, active: frozenset[str]) -> None:
    """Two items of one conflict set both active cannot be installed together (uv refuses them too)."""
    for conflict in graph.conflicts:
        on = sorted({c for c in conflict if item(*c) in active})
        if len(on) > 1:
            listed = " and ".join(
                f"`{package}[{name}]`" if kind == "extra" else f"`{package}:{name}` (group)"
                for package, kind, name in on
            )
            others = len({package for package, _, _ in on}) > 1
            raise UserError(
                f"the lock declares {listed} conflicting ([tool.uv] conflicts): they cannot be installed together",
                f"choose one, e.g. --{on[0][1]} {on[0][2]}" + (f" with --package {on[0][0]}" if others else ""),
            )


def _traverse(
    graph: UvGraph,
    starts: list[Node],
    environment: dict[str, str],
    active: set[str],
    grow: bool,
    unsettled: list[bool] | None = None,
    judged: set[str] | None = None,
    notes: PassNotes | None = None,
) -> dict[str, dict[str, Any]]:
    """Walks the edges from `starts`; with `grow`, an edge naming extras is judged as if they were active and,
    when it holds, activates them (in `active`). `unsettled` is given an entry when a verdict of this walk could
    change as `active` grows: an edge whose marker names an item did not hold, or a fork was chosen. `notes`, where
    given, are told its verdicts, a fork chosen and two entries of a name met."""
    reached: dict[str, dict[str, Any]] = {}
    pending = list(starts)
    walk = _Walk()  # marks the `KeptPackage`s whose nodes this walk expanded
    expanded: set[int | tuple[int, str, str]] = set()  # those of other entries (a package's own by its id alone)
    target_items = tuple(environment.items())  # the target as `_verdict`'s cache keys it, made once per walk
    verdicts: dict[str | tuple[str, frozenset[str]], bool] = {} if notes is None else notes.verdicts
    # (this walk's verdicts, by marker, and the items it found active where it names any)
    while pending:
        entry, kind, name = pending.pop()
        if type(entry) is KeptPackage:  # its slots read, not through `Mapping` (a call each, millions of them)
            if not kind:  # its own node: `first_time`'s first case, written out (a call per node was 3% of a walk)
                if entry.walked_by is walk:
                    continue
                entry.walked_by = walk
            elif not walk.first_time(entry, kind, name):
                continue
            key = entry.key if entry.key is not None else key_of(entry)
            if kind:
                edges = listed(entry, kind, name)
            else:
                edges = entry._dependencies
                edges = [] if edges is ABSENT else edges
        else:
            node = (id(entry), kind, name) if kind else id(entry)
            if node in expanded:
                continue
            expanded.add(node)
            key = key_of(entry)
            edges = listed(entry, kind, name) if kind else entry.get("dependencies", [])
        if key in reached and reached[key] is not entry:
            if not grow:
                raise UserError(
                    f"uv.lock holds two versions of {entry['name']} for this choice ({reached[key].get('version')} "
                    f"and {entry.get('version')})",
                    "choose between the conflicting extras or groups with --extra / --group",
                )
            if notes is not None:
                notes.two_versions = True
        reached[key] = entry
        for edge in edges:
            if type(edge) is KeptEdge and edge.candidates is not None:  # worked out by an earlier walk over it
                named, extras, candidates = edge.named, edge.extras, edge.candidates
                marker = edge._marker
                marker = None if marker is ABSENT else marker
            else:
                named, extras, candidates = _edge(graph, edge)
                marker = edge.get("marker")
            if marker:
                if judged is not None:
                    judged.add(marker)
                mentioned = _parsed(marker)[1]
                if mentioned:
                    found = frozenset(item for item in mentioned if item in active or (grow and item in named))
                    holding = verdicts.get((marker, found))
                    if holding is None:
                        holding = verdicts[(marker, found)] = _verdict(marker, target_items, found)
                else:
                    holding = verdicts.get(marker)
                    if holding is None:
                        holding = verdicts[marker] = _verdict(marker, target_items, frozenset())
                if not holding:
                    if unsettled is not None and not unsettled and mentioned:
                        unsettled.append(True)
                    continue
            if grow:
                active.update(named)
            if len(candidates) == 1:
                target = candidates[0]
            else:
                target = _fork(candidates, environment, active, judged)
                if unsettled is not None and not unsettled:
                    unsettled.append(True)
                if notes is not None:
                    notes.forked = True
            pending.append((target, "", ""))
            if extras:
                pending += [(target, "extra", extra) for extra in extras]
    return reached


def listed(entry: Mapping[str, Any], kind: str, name: str) -> Sequence[Any]:
    """The edges of an entry's extra or group `name` (normalized), as `tables(entry, kind).get(name, [])` gives them:
    of a `KeptTable`, its keys normalized once per tuple of keys (a table's keys are one tuple for every package of
    the same extras), not a table made for each node."""
    table = entry.get("optional-dependencies" if kind == "extra" else "dev-dependencies")
    if type(table) is not KeptTable:
        return tables(entry, kind).get(name, [])  # type: ignore[arg-type]
    found: Sequence[Any] = []
    for key, value in zip(_normalized(table._keys), table._values):
        if key == name:
            found = value  # the last of a name, as a table made of them keeps it
    return found


@functools.lru_cache(maxsize=1024)
def _normalized(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(normalize(key) for key in keys)


class _Walk:
    """One walk over the graph, marking on each `KeptPackage` the nodes it expanded (the package's own, and each
    extra or group of it): a set of every node, a tuple and an id each, was a third of what a walk held."""

    __slots__ = ()

    def first_time(self, entry: KeptPackage, kind: str, name: str) -> bool:
        """Whether this walk expands the node for the first time (it is marked expanded, then)."""
        if not kind:
            if entry.walked_by is self:
                return False
            entry.walked_by = self
            return True
        marks = entry.walked_kinds  # (the walk, kind, name, kind, name, ...) of the last walk that expanded one
        if marks is None or marks[0] is not self:
            entry.walked_kinds = (self, kind, name)
            return True
        if any(marks[at] == kind and marks[at + 1] == name for at in range(1, len(marks), 2)):
            return False
        entry.walked_kinds = (*marks, kind, name)
        return True


def _edge(graph: UvGraph, edge: dict[str, Any] | KeptEdge) -> Walked:
    """The items an edge's extras name (a tuple: a frozenset of one item was 216 bytes, for each of a large lock's
    edges), those extras normalised, and the entries it may point at: worked out on the first walk over it, kept
    on the edge (a `KeptEdge`) or in the graph for the others."""
    if type(edge) is KeptEdge:
        if edge.candidates is None:
            edge.named, edge.extras, edge.candidates = _worked_out(graph, edge)
            graph.walked_edges.append(edge)
        return edge.named, edge.extras, edge.candidates
    known = graph.edges.get(id(edge))
    if known is None:
        known = graph.edges[id(edge)] = _worked_out(graph, edge)
    return known


def _worked_out(graph: UvGraph, edge: Mapping[str, Any]) -> Walked:
    """What `_edge` keeps of an edge: equal extras lists (one object in a lock read by `WalkedParts`) give one
    tuple of extras."""
    listed = edge.get("extra", ())  # absent: the one empty tuple, whose id no other object takes
    extras = graph.extras.get(id(listed))
    if extras is None:  # each extra one string (`normalize` makes a new one), the tuple once per list
        extras = graph.extras[id(listed)] = tuple(sys.intern(normalize(extra)) for extra in listed)
    named = tuple(dict.fromkeys(item(edge["name"], "extra", extra) for extra in extras))
    return named, extras, _candidates(edge, graph)


def holds(
    marker: str | None,
    environment: dict[str, str],
    active: set[str] | frozenset[str],
    named: Collection[str] = (),
) -> bool:
    """Whether a marker is true for the target, `extra == X` meaning X is an active item (of `active`, or of
    `named`: those an edge would activate)."""
    return not marker or _holds_for(marker, tuple(environment.items()), active, named)


def _holds_for(
    marker: str, target_items: tuple[tuple[str, str], ...], active: set[str] | frozenset[str], named: Collection[str]
) -> bool:
    """`holds` for a target given as `_verdict` keys it. Only the items the marker names are handed to the
    evaluator, which normalises every item it is given on every test: the whole active set there made an import
    quadratic."""
    mentioned = _parsed(marker)[1]
    if not mentioned:
        return _verdict(marker, target_items, frozenset())
    return _verdict(marker, target_items, frozenset(name for name in mentioned if name in active or name in named))


@functools.lru_cache(maxsize=1 << 14)
def _verdict(marker: str, environment: tuple[tuple[str, str], ...], extras: frozenset[str]) -> bool:
    """A marker judged once per target and set of the items it names: a lock's edges share a few hundred markers,
    judged hundreds of thousands of times in a large import."""
    return _parsed(marker)[0].evaluate(
        {**dict(environment), "extras": set(extras), "dependency_groups": set()}, context="lock_file"
    )


@functools.lru_cache(maxsize=4096)
def _parsed(marker: str) -> tuple[Marker, frozenset[str]]:
    """The marker with each `extra == X` as `X in extras`, and the items X it names (normalised as items are)."""
    rewritten = _EXTRA_TEST.sub(lambda m: f"'{m.group(3)}' {'in' if m.group(1) == '==' else 'not in'} extras", marker)
    try:
        return Marker(rewritten), frozenset(normalize(m.group(3)) for m in _EXTRA_TEST.finditer(marker))
    except InvalidMarker:
        raise LockFormatError(
            f"uv.lock has a marker lockgen cannot read: `{marker}`", "use the file `uv lock` wrote"
        ) from None


def _candidates(edge: Mapping[str, Any], graph: UvGraph) -> Sequence[dict[str, Any]]:
    """The package entries an edge may point at: by name, then version and source where a name has several
    entries (forks); `_fork` chooses among several by their resolution markers."""
    candidates: Sequence[dict[str, Any]] = graph.entries.get(normalize(edge["name"]), ())
    if "version" in edge:
        candidates = [c for c in candidates if str(c.get("version")) == str(edge["version"])]
    if "source" in edge:
        candidates = [c for c in candidates if c.get("source") == edge["source"]] or candidates
    if not candidates:
        raise LockFormatError(
            f"uv.lock names {edge['name']} {edge.get('version', '')} as a dependency but holds no such package".replace(
                "  ", " "
            ),
            "the file was edited or cut short: use the one `uv lock` wrote",
        )
    return candidates


def _fork(
    candidates: Sequence[dict[str, Any]], environment: dict[str, str], active: set[str], judged: set[str] | None
) -> dict[str, Any]:
    """Of an edge's several entries, the fork whose resolution markers hold (the first where none or several do);
    the markers judged are added to `judged`, where given."""
    if judged is not None:
        judged.update(m for c in candidates for m in c.get("resolution-markers") or () if isinstance(m, str))
    holding = [
        c
        for c in candidates
        if not c.get("resolution-markers") or any(holds(m, environment, active) for m in c["resolution-markers"])
    ]
    return (holding or candidates)[0]
