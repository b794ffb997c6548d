"""uv.lock (v1) read as uv itself installs it: from the project's own entries, along every dependency edge
whose marker holds for the target (platform, CPython version, the chosen extras and groups), to the
wheel that fits each package.

uv.lock is universal: one file for every platform and Python, forks of a package per Python range
(`resolution-markers`) and, with `[tool.uv] conflicts`, per extra or group (uv writes those as
`extra == 'extra-<n>-<project>-<extra>'` and `group-<n>-<project>-<group>` markers). Nothing is taken
from the top-level package list without an edge leading to it, so a Windows-only or PyPy-only package
never comes over, and a needed package that cannot come over (no wheel for the platform, an sdist, a git
or local source) is listed with its reason. Markers are evaluated by `packaging` (PEP 508); Python
versions by `packaging`'s specifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.names import normalize
from lockgen.model.spec import MACHINE_OF_PLATFORM as MACHINE

PLATFORMS = ("linux-64", "linux-aarch64")
PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))
_EXTRA_TEST = re.compile(r"""extra\s*(==|!=)\s*(['"])([^'"]*)\2""")


@dataclass(frozen=True)
class UvChoices:
    """What `uv sync` would be told: the Python, the extras and groups (the `dev` group is in unless
    `dev=False`, as uv does), and the newest manylinux glibc a wheel may need."""

    python: str | None = None
    extras: tuple[str, ...] = ()
    all_extras: bool = False
    groups: tuple[str, ...] = ()
    dev: bool = True
    glibc: str = "2.28"


@dataclass(frozen=True)
class UvImport:
    packages: tuple[LockedPackage, ...]
    skipped: tuple[str, ...]
    python: str


def read_uv_lock(data: dict[str, Any], choices: UvChoices) -> UvImport:
    """The wheels uv would install from `data` (a parsed uv.lock) on each Linux platform, and what it would
    need that cannot come over."""
    if data.get("version") != 1:
        raise LockFormatError(f"uv.lock version {data.get('version')!r} is not supported", "lockgen imports uv.lock v1")
    python = python_within(data.get("requires-python", ""), choices.python)
    entries: dict[str, list[dict[str, Any]]] = {}
    for entry in data.get("package", []):
        entries.setdefault(normalize(entry["name"]), []).append(entry)
    roots = _roots(data, entries)
    _refuse_conflicting(data.get("conflicts") or [], choices)
    chosen = [(root, *_chosen(root, choices, alone=len(roots) == 1)) for root in roots]
    active = _active_extras(chosen)
    packages, skipped = [], []
    for platform in PLATFORMS:
        environment = environment_of(platform, python)
        reached = _walk(chosen, entries, environment, active)
        for key in sorted(reached):
            entry = reached[key]
            source = entry.get("source", {})
            label = f"{platform}: `{entry['name']}` {entry.get('version', '')}".rstrip()
            if "virtual" in source or "editable" in source:
                skipped.append(f"{label.split(' ')[0]} `{entry['name']}` is the local project (no archive to lock)")
                continue
            if "git" in source:
                skipped.append(f"{label} comes from git ({source['git'].split('#')[0]}): build a wheel and pin it")
                continue
            if "path" in source or "directory" in source:
                skipped.append(f"{label} is a local path ({source.get('path') or source.get('directory')}): build a wheel and pin it")
                continue
            wheel = best_wheel(entry.get("wheels", []), platform, python, choices.glibc)
            if wheel is None:
                has_sdist = "sdist" in entry
                skipped.append(f"{label} has no wheel for {platform} at CPython {python}"
                               + (" (an sdist only: it would be built on install)" if has_sdist else ""))
                continue
            packages.append(LockedPackage(name=entry["name"], version=str(entry["version"]), manager="pip",
                                          platform=platform, url=wheel["url"],
                                          hash=PackageHash(sha256=wheel.get("hash", "").removeprefix("sha256:") or None)))
    return UvImport(tuple(packages), tuple(skipped), python)


def _named(table: Any) -> dict[str, list[dict[str, Any]]]:
    """An entry's `optional-dependencies` or `dev-dependencies`, keyed by normalized name."""
    return {normalize(key): value for key, value in (table or {}).items()}


def python_within(requires: str, wanted: str | None) -> str:
    """`--python`, which must lie inside the lock's `requires-python`; else the oldest X.Y inside it."""
    try:
        allowed = SpecifierSet(requires)
    except InvalidSpecifier:
        raise LockFormatError(f"the lock's requires-python `{requires}` is not a version range", "use the file its tool wrote") from None
    inside = [version for version in PYTHONS if allowed.contains(f"{version}.0") or allowed.contains(f"{version}.99")]
    if wanted is not None:
        if wanted not in PYTHONS or not (allowed.contains(f"{wanted}.0") or allowed.contains(f"{wanted}.99")):
            raise UserError(f"--python {wanted} is outside the lock's requires-python `{requires}`",
                            f"pass one of: {', '.join(inside) or 'none (the range is empty)'}")
        return wanted
    if not inside:
        raise UserError(f"the lock's requires-python `{requires}` admits no CPython 3.8-3.15", "pass --python X.Y")
    return inside[0]


def _refuse_conflicting(conflicts: list[list[dict[str, str]]], choices: UvChoices) -> None:
    """Extras or groups the lock's `[tool.uv] conflicts` declare incompatible cannot be chosen together (uv
    refuses them too); --all-extras with conflicting extras would need a choice."""
    chosen = {("extra", normalize(e)) for e in choices.extras} | {("group", normalize(g)) for g in choices.groups}
    for conflict in conflicts:
        named = {("extra", normalize(c["extra"])) if "extra" in c else ("group", normalize(c.get("group", ""))) for c in conflict}
        both = sorted(named & chosen) if not choices.all_extras else sorted(n for n in named if n[0] == "extra")
        if len(both) > 1:
            listed = " and ".join(f"{kind} `{name}`" for kind, name in both)
            raise UserError(f"the lock declares {listed} conflicting ([tool.uv] conflicts): they cannot be installed together",
                            f"choose one, e.g. --{both[0][0]} {both[0][1]}" + (" instead of --all-extras" if choices.all_extras else ""))


def environment_of(platform: str, python: str) -> dict[str, str]:
    return {"implementation_name": "cpython", "implementation_version": f"{python}.0", "os_name": "posix",
            "platform_machine": MACHINE[platform], "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version": f"{python}.0",
            "python_version": python, "sys_platform": "linux"}


def _roots(data: dict[str, Any], entries: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The workspace's own packages (`[manifest] members`, else every virtual or editable entry)."""
    members = (data.get("manifest") or {}).get("members")
    if members:
        return [entry for name in members for entry in entries.get(normalize(name), [])]
    roots = [entry for group in entries.values() for entry in group
             if "virtual" in entry.get("source", {}) or "editable" in entry.get("source", {})]
    if not roots:
        raise LockFormatError("uv.lock names no project of its own (no virtual or editable package)",
                              "import a uv.lock written by `uv lock` in a project")
    return roots


def _chosen(root: dict[str, Any], choices: UvChoices, alone: bool) -> tuple[set[str], set[str]]:
    """The extras and dependency groups asked of one project, normalized (`dev` in unless `dev=False`, as uv
    does); with a single project, a name it does not have is refused, listing the ones it has."""
    extras_known, groups_known = set(_named(root.get("optional-dependencies"))), set(_named(root.get("dev-dependencies")))
    extras = extras_known if choices.all_extras else {normalize(e) for e in choices.extras}
    groups = {normalize(g) for g in choices.groups}
    for kind, wanted, known in (("extra", extras, extras_known), ("dependency group", groups, groups_known)):
        if alone and wanted - known:
            raise UserError(f"the project `{root['name']}` has no {kind} {', '.join(sorted(wanted - known))}",
                            f"its {'extras' if kind == 'extra' else 'groups'}: {', '.join(sorted(known)) or 'none'}")
    return extras, groups | ({"dev"} if choices.dev else set())


def _active_extras(chosen: list[tuple[dict[str, Any], set[str], set[str]]]) -> set[str]:
    """The `extra` values markers may test: the chosen extras and groups, plainly and as uv encodes them for
    conflicts (`extra-<n>-<project>-<name>`, `group-<n>-<project>-<name>`)."""
    active: set[str] = set()
    for root, extras, groups in chosen:
        project = normalize(root["name"])
        active |= extras | {f"extra-{len(project)}-{project}-{e}" for e in extras}
        active |= {f"group-{len(project)}-{project}-{g}" for g in groups}
    return active


def _holds(marker: str | None, environment: dict[str, str], active: set[str]) -> bool:
    """Whether a marker is true for the target, `extra == X` meaning X is one of the active extras."""
    if not marker:
        return True
    rewritten = _EXTRA_TEST.sub(lambda m: f"'{m.group(3)}' {'in' if m.group(1) == '==' else 'not in'} extras", marker)
    try:
        return Marker(rewritten).evaluate({**environment, "extras": active, "dependency_groups": set()}, context="lock_file")
    except InvalidMarker:
        raise LockFormatError(f"uv.lock has a marker lockgen cannot read: `{marker}`", "") from None


def _walk(chosen: list[tuple[dict[str, Any], set[str], set[str]]], entries: dict[str, list[dict[str, Any]]],
          environment: dict[str, str], active: set[str]) -> dict[str, dict[str, Any]]:
    """Every package reached from the roots along edges whose markers hold: name -> its entry."""
    reached: dict[str, dict[str, Any]] = {}
    pending: list[tuple[dict[str, Any], tuple[str, ...]]] = []  # (a package entry, the extras asked of it)
    for root, extras, groups in chosen:
        pending.append((root, tuple(sorted(extras))))
        for group in sorted(groups):
            pending += _followed(_named(root.get("dev-dependencies")).get(group, []), entries, environment, active)
    expanded: set[tuple[int, tuple[str, ...]]] = set()
    for _ in range(1_000_000):  # bounded: each (entry, extras) pair is expanded once
        if not pending:
            break
        entry, extras = pending.pop()
        if (id(entry), extras) in expanded:
            continue
        expanded.add((id(entry), extras))
        name = normalize(entry["name"])
        if name in reached and reached[name] is not entry:
            raise UserError(f"uv.lock holds two versions of {entry['name']} for this choice "
                            f"({reached[name].get('version')} and {entry.get('version')})",
                            "choose between the conflicting extras or groups with --extra / --group")
        reached[name] = entry
        pending += _followed(entry.get("dependencies", []), entries, environment, active)
        for extra in extras:
            pending += _followed(_named(entry.get("optional-dependencies")).get(extra, []), entries, environment, active)
    return reached


def _followed(edges: list[dict[str, Any]], entries: dict[str, list[dict[str, Any]]], environment: dict[str, str],
              active: set[str]) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The entries the edges whose markers hold lead to, each with the extras the edge asks for."""
    return [(_target(edge, entries, environment, active), tuple(sorted(normalize(e) for e in edge.get("extra", []))))
            for edge in edges if _holds(edge.get("marker"), environment, active)]


def _target(edge: dict[str, Any], entries: dict[str, list[dict[str, Any]]], environment: dict[str, str],
            active: set[str]) -> dict[str, Any]:
    """The package entry an edge points at: by name, then version and source where a name has several
    entries (forks), then the fork whose resolution markers hold."""
    candidates = entries.get(normalize(edge["name"]), [])
    if "version" in edge:
        candidates = [c for c in candidates if str(c.get("version")) == str(edge["version"])]
    if "source" in edge:
        candidates = [c for c in candidates if c.get("source") == edge["source"]] or candidates
    if len(candidates) > 1:
        candidates = [c for c in candidates if not c.get("resolution-markers")
                      or any(_holds(m, environment, active) for m in c["resolution-markers"])] or candidates
    if not candidates:
        raise LockFormatError(f"uv.lock names {edge['name']} {edge.get('version', '')} as a dependency but holds no such package".replace("  ", " "),
                              "the file was edited or cut short: use the one `uv lock` wrote")
    return candidates[0]


def best_wheel(wheels: list[dict[str, Any]], platform: str, python: str, glibc: str) -> dict[str, Any] | None:
    """The wheel that installs on `platform` with CPython `python` and `glibc`, best match first."""
    cp = "cp" + python.replace(".", "")
    target_glibc = tuple(int(x) for x in glibc.split("."))
    best, best_score = None, None
    for wheel in wheels:
        tags = wheel["url"].rsplit("/", 1)[-1].removesuffix(".whl").split("-")[-3:]
        py_tags, abi_tags, plat_tags = (t.split(".") for t in tags)
        if "any" in plat_tags:
            plat_score = 0
        else:
            fitting = [tuple(int(x) for x in re.findall(r"manylinux_(\d+)_(\d+)", p)[0]) for p in plat_tags
                       if p.endswith(MACHINE[platform]) and re.match(r"manylinux_\d+_\d+_", p)]
            fitting += [(2, 5) for p in plat_tags if p == f"manylinux1_{MACHINE[platform]}"]
            fitting += [(2, 12) for p in plat_tags if p == f"manylinux2010_{MACHINE[platform]}"]
            fitting += [(2, 17) for p in plat_tags if p == f"manylinux2014_{MACHINE[platform]}"]
            fitting = [f for f in fitting if f <= target_glibc]
            if not fitting:
                continue
            plat_score = 1 + max(fitting)[1] / 100
        if cp in py_tags and (cp in abi_tags or "none" in abi_tags):
            py_score = 3
        elif "abi3" in abi_tags and any(t.startswith("cp3") and int(t[3:]) <= int(cp[3:]) for t in py_tags):
            py_score = 2
        elif any(t in ("py3", "py2.py3") or t.startswith("py3") for t in py_tags) and "none" in abi_tags:
            py_score = 1
        else:
            continue
        score = (py_score, plat_score)
        if best_score is None or score > best_score:
            best, best_score = wheel, score
    return best
