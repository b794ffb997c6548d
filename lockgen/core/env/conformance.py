"""Conformance: is an environment its lock? An EXPECTED environment (per locked package, the files its own
RECORD or `info/paths.json` states) compared with an OBSERVED one (every path of the prefix as found).

Every observed path is accounted for by exactly one of: an expected file of a package (content checked when
the expectation has a hash, size when it has one, kind always), a named rule that derives it, or nothing
(foreign). The rules, so a report can say why a file is there:
- `pyc`: `D/__pycache__/X.<tag>[.opt-N].pyc` when `D/X.py` is an expected file (owned by that package) and
  the byte code is proven to be that source's (Python runs a `.pyc` whose header matches without reading
  the source; the caller proves it, `unproven` names the ones that fail); a `.pyc` without its source is
  foreign, since Python imports sourceless byte code.
- `dist-info`: `INSTALLER`, `REQUESTED`, `direct_url.json`, `RECORD` (and uv's `uv_cache.json`) in an
  expected pip dist-info folder.
- `entry-points`: `bin/<name>` for the console and gui scripts of a pip distribution (and a noarch-python
  package's entry points), when its content is an installer's launcher of that entry point
  (`core.image.launchers`) wherever the manifest names the target.
- `venv`: the files `pyvenv.cfg`, `bin/activate` and its `.bat/.csh/.fish/.nu/.ps1/.xsh` forms,
  `bin/activate_this.py`, `bin/Activate.ps1`, `bin/deactivate.bat`, `bin/pydoc.bat`, `.gitignore`,
  `CACHEDIR.TAG` and `.lock` (uv writes them); `bin/python[X[.Y]]` as links only; `lib64` as a link to `lib`.
- `conda-meta`: `conda-meta/*.json` and `conda-meta/history`. `lockgen`: the manifest, stats and SBOM
  lockgen writes under `.lockgen/`.
Rules accept by name only: the files they cover are derived by the installer, so no package states their
bytes. setuid, setgid, sticky and world-writable files, and executable files carrying file capabilities (a file no
one can run gains nothing from them), are `mode` drift whatever their content (uv's empty root `.lock` excepted
while it stays empty); a stated file whose exec bit is not the one its package installs it with (`exec bit`: an
exec bit dropped or added) is drift of its package; a path two packages expect with other content is a clobber. Any
of these makes the report unclean.
"""

from __future__ import annotations

import posixpath
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from lockgen.core.env.drift import LOCKGEN_FILES
from lockgen.core.image.launchers import is_launcher
from lockgen.model.conformance import Accepted, Clobber, ConformanceReport, PackageResult

DERIVED_DIST_INFO = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json")
_VENV_FILES = re.compile(
    r"pyvenv\.cfg|\.gitignore|CACHEDIR\.TAG|\.lock|bin/activate(\.(bat|csh|fish|nu|ps1|xsh))?"
    r"|bin/activate_this\.py|bin/Activate\.ps1|bin/deactivate\.bat|bin/pydoc\.bat"
)
_VENV_PYTHON = re.compile(r"bin/python(\d+(\.\d+)?t?)?")  # links only: a venv's interpreter is never a file in it
_CONDA_META = re.compile(r"conda-meta/[^/]+\.json|conda-meta/history")
_PYC = re.compile(r"(?P<folder>(?:[^/]+/)*)__pycache__/(?P<name>[^/]+)\.pyc")
_CACHE_TAG = re.compile(r"[a-z]+-?\d+[a-z0-9]*")
_BAD_MODE = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH
_EXEC = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH  # any of them: an installer's "executable"


class ExpectedFile(NamedTuple):
    """A prefix-relative file a package states; `sha256`/`size` None when a trusted rule derives them
    (a rewritten script shebang, a conda prefix placeholder); `kind` is `file` or `link`. A named tuple, as
    `ObservedFile`: immutable, and made several times faster than a frozen dataclass (an environment has
    one of each per file: 60,000 frozen dataclasses of each cost 0.1-0.2 s)."""

    path: str
    sha256: str | None
    size: int | None
    kind: str = "file"
    target: str | None = None  # a link's target, when the package states it
    executable: bool | None = None  # installed with an exec bit (None: the package does not say)


@dataclass(frozen=True)
class ExpectedPackage:
    """A locked package (`key` like `six 1.16.0`) and its files; a pip distribution also names its
    dist-info folder (prefix-relative) and its entry-point script names. `locked` false: not a package but files
    held to the lock the same way (an image's own lock, its services, the foreign files allowed), checked and
    reported as one, never counted as one of the lock's packages."""

    key: str
    files: tuple[ExpectedFile, ...]
    dist_info: str | None = None
    scripts: tuple[str, ...] = ()
    entry_points: tuple[tuple[str, str], ...] = ()  # (script name, `module:attr`): launchers checked by shape
    locked: bool = True


class ObservedFile(NamedTuple):
    """A prefix-relative path as found: kind `file`, `link` or `dir-link`, size, mode bits, sha256 of a file."""

    path: str
    kind: str
    size: int
    mode: int
    sha256: str | None = None
    text: str | None = None  # a small script's content, read for the entry-point launcher check
    target: str | None = None  # a link's target
    privilege: str | None = None  # what extended attribute gives the file power no mode shows (file capabilities)


def _differs(expected: ExpectedFile, found: ObservedFile) -> bool:
    if expected.kind == "link":
        return found.kind not in ("link", "dir-link") or (
            expected.target is not None and found.target != expected.target
        )
    return (
        found.kind != "file"
        or (expected.sha256 is not None and found.sha256 != expected.sha256)
        or (expected.size is not None and found.size != expected.size)
    )


def _check(package: ExpectedPackage, observed: dict[str, ObservedFile]) -> PackageResult:
    modified, missing, exec_bit = [], [], []
    for expected in package.files:
        found = observed.get(expected.path)
        if found is None:
            missing.append(expected.path)
            continue
        if (
            expected.executable is not None
            and found.kind == expected.kind == "file"
            and bool(found.mode & _EXEC) is not expected.executable
        ):
            exec_bit.append(expected.path)
        if (
            expected.sha256 is not None
            and found.sha256 == expected.sha256
            and found.kind == expected.kind == "file"
            and (expected.size is None or found.size == expected.size)
        ):
            continue  # the common case, decided without a call: 60,000 calls are a tenth of a second
        if _differs(expected, found):
            modified.append(expected.path)
    absent = bool(package.files) and len(missing) == len(package.files)
    return PackageResult(
        package.key,
        tuple(sorted(set(modified))),
        tuple(sorted(set(missing))),
        absent,
        tuple(sorted(set(exec_bit))),
        package.locked,
    )


def pyc_pairs(expected: Sequence[ExpectedPackage], observed: Iterable[ObservedFile]) -> list[tuple[str, str]]:
    """(`.pyc`, its source) for each observed byte-code file whose source a package states: what the `pyc`
    rule accepts once the byte code is proven to be its source's (`adapters.proof.bytecode_proof`)."""
    candidates = [
        (o.path, source) for o in observed if o.kind == "file" and (source := _pyc_source(o.path)) is not None
    ]
    owned = {f.path for package in expected for f in package.files} if candidates else set()
    return [(path, source) for path, source in candidates if source in owned]


def _pyc_source(path: str) -> str | None:
    if not path.endswith(".pyc") or "__pycache__/" not in path:  # most paths: no pattern run
        return None
    found = _PYC.fullmatch(path)
    if not found:
        return None
    stem, _, tag = re.sub(r"\.opt-\d+$", "", found["name"]).rpartition(".")
    return f"{found['folder']}{stem}.py" if stem and _CACHE_TAG.fullmatch(tag) else None


def launcher_targets(packages: Sequence[ExpectedPackage]) -> dict[str, str]:
    """`bin/NAME` -> the `module:attr` its launcher must call."""
    return {f"bin/{name}": target for package in packages for name, target in package.entry_points}


def _derived(packages: Sequence[ExpectedPackage]) -> dict[str, tuple[str, str]]:
    """Paths the `dist-info` and `entry-points` rules derive -> (rule, owner)."""
    derived: dict[str, tuple[str, str]] = {}
    for package in packages:
        if package.dist_info:
            for name in DERIVED_DIST_INFO:
                derived[posixpath.join(package.dist_info, name)] = ("dist-info", package.key)
        for script in package.scripts:  # a wheel's console scripts, a noarch-python package's entry points
            derived[f"bin/{script}"] = ("entry-points", package.key)
    return derived


def _rule(
    found: ObservedFile,
    owners: _Owners,
    derived: dict[str, tuple[str, str]],
    launchers: dict[str, str],
    prefix: str | None,
    unproven: Mapping[str, str],
) -> Accepted | None:
    path = found.path
    source = _pyc_source(path) if found.kind == "file" else None
    if source is not None and source in owners.first and path not in unproven:
        return Accepted(path, "pyc", owners.first[source])
    if path in derived and found.kind == "file":
        target = launchers.get(path)
        if target is not None and not is_launcher(found.text or "", target, prefix):
            return None  # not the launcher its entry point derives: foreign
        return Accepted(path, *derived[path])
    if (
        (_VENV_FILES.fullmatch(path) and found.kind == "file")
        or (_VENV_PYTHON.fullmatch(path) and found.kind == "link")
        or (path == "lib64" and found.kind == "dir-link" and found.target == "lib")
    ):
        return Accepted(path, "venv", None)
    if _CONDA_META.fullmatch(path):
        return Accepted(path, "conda-meta", None)
    if path in LOCKGEN_FILES and found.kind == "file":
        return Accepted(path, "lockgen", None)
    return None


def _empty_uv_lock(found: ObservedFile) -> bool:
    """uv leaves an empty, world-writable `.lock` at a venv's root: harmless while it stays empty."""
    return found.path == ".lock" and found.size == 0 and not found.mode & (stat.S_ISUID | stat.S_ISGID)


def compare(
    expected: Sequence[ExpectedPackage],
    observed: Iterable[ObservedFile],
    site_packages: str = "",
    prefix: str | None = None,
    unproven: Mapping[str, str] = {},
) -> ConformanceReport:
    """The conformance report of an observed environment against the expected one; `prefix` (the path the
    environment was installed for) is what its launchers' interpreter lines must name. `unproven`: byte-code
    files (of `pyc_pairs`) that are not their source's, with why; they are findings, not accepted."""
    found = {item.path: item for item in observed}
    owners = _owners(expected)
    accepted, foreign = _accounted(expected, found, owners, prefix, unproven)
    mode = sorted(
        p
        for p, f in found.items()
        if f.kind == "file" and ((f.mode & _BAD_MODE and not _empty_uv_lock(f)) or f.privilege)
    )
    clobbered = _clobbers(owners)
    results = tuple(sorted((_check(p, found) for p in expected), key=lambda r: r.key))
    bytecode = tuple(f"{path} ({why})" for path, why in sorted(unproven.items()))
    return ConformanceReport(
        results,
        tuple(foreign),
        tuple(mode),
        clobbered,
        tuple(accepted),
        len(owners.first),
        len(found),
        site_packages,
        bytecode,
    )


def unstated(
    expected: Sequence[ExpectedPackage], observed: Iterable[ObservedFile], prefix: str | None = None
) -> tuple[tuple[str, ...], tuple[Clobber, ...]]:
    """What an environment just built must not hold: the paths no package states and no rule derives
    (foreign), and the paths two packages state (clobbers); as `compare` finds them. `observed` need hold
    only the paths no package states (the rest cannot be foreign), so a caller looks closely at those alone."""
    owners = _owners(expected)
    _, foreign = _accounted(expected, {item.path: item for item in observed}, owners, prefix, {})
    return tuple(foreign), _clobbers(owners)


@dataclass(frozen=True)
class _Owners:
    """Each stated path -> the first package stating it, and the paths two or more packages state with other
    content -> all of them (the clobbers), in the order of the expected packages. Packages that state one path
    with the same sha256 and size (the empty `nvidia/__init__.py` every CUDA wheel of a release ships) are no
    clobber: whichever is installed last, the file is the same, and each package's check judges it."""

    first: dict[str, str]
    shared: dict[str, list[str]]


def _owners(expected: Sequence[ExpectedPackage]) -> _Owners:
    first: dict[str, str] = {}
    stated: dict[str, ExpectedFile] = {}  # each path as its first owner states it
    together: dict[str, list[str]] = {}  # a path two or more packages state -> all of them
    differ: set[str] = set()  # of those, the paths a later owner states other than the first
    for package in expected:
        files = {f.path: f for f in package.files}
        clash = first.keys() & files.keys()
        for path in clash:
            together.setdefault(path, [first[path]]).append(package.key)
            if not _alike(stated[path], files[path]):
                differ.add(path)
        fresh = files.keys() - clash if clash else files.keys()
        first.update(dict.fromkeys(fresh, package.key))
        stated.update((path, files[path]) for path in fresh)
    return _Owners(first, {path: owners for path, owners in together.items() if path in differ})


def _alike(one: ExpectedFile, other: ExpectedFile) -> bool:
    """Two statements of one path that fix the same bytes: files, each with a sha256 (a path stated by name
    alone proves nothing about its content) and the same size."""
    return (
        one.kind == other.kind == "file"
        and one.sha256 is not None
        and one.sha256 == other.sha256
        and one.size == other.size
    )


def _accounted(
    expected: Sequence[ExpectedPackage],
    found: dict[str, ObservedFile],
    owners: _Owners,
    prefix: str | None,
    unproven: Mapping[str, str],
) -> tuple[list[Accepted], list[str]]:
    """The found paths no package states: those a rule accepts, and the foreign rest (sorted)."""
    derived = _derived(expected)
    launchers = launcher_targets(expected)
    accepted, foreign = [], []
    for path in sorted(found.keys() - owners.first.keys()):
        if path in unproven:
            continue
        rule = _rule(found[path], owners, derived, launchers, prefix, unproven)
        if rule is None:
            foreign.append(path)
        else:
            accepted.append(rule)
    return accepted, foreign


def _clobbers(owners: _Owners) -> tuple[Clobber, ...]:
    return tuple(Clobber(p, tuple(sorted(keys))) for p, keys in sorted(owners.shared.items()))


def passing_record(report: ConformanceReport) -> dict[str, object]:
    """A clean report as plain data (`conformance_store` keeps it beside the tree's fingerprint)."""
    if not report.clean:
        raise ValueError("only a passing report is kept")
    return {
        "packages": [p.key for p in report.packages if p.locked],
        "held_files": [p.key for p in report.packages if not p.locked],
        "accepted": [[a.path, a.rule, a.owner] for a in report.accepted],
        "files_expected": report.files_expected,
        "files_observed": report.files_observed,
        "site_packages": report.site_packages,
    }


def passing_report(record: object) -> ConformanceReport | None:
    """The clean report `passing_record` kept, or None when the record is not one (never a report with a finding)."""
    if not isinstance(record, dict):
        return None
    keys, held, kept = record.get("packages"), record.get("held_files"), record.get("accepted")
    expected, observed, site = record.get("files_expected"), record.get("files_observed"), record.get("site_packages")
    if not (
        isinstance(keys, list)
        and all(isinstance(k, str) for k in keys)
        and isinstance(held, list)
        and all(isinstance(k, str) for k in held)
        and isinstance(kept, list)
        and all(
            isinstance(a, list)
            and len(a) == 3
            and isinstance(a[0], str)
            and isinstance(a[1], str)
            and isinstance(a[2], (str, type(None)))
            for a in kept
        )
        and type(expected) is int
        and type(observed) is int
        and isinstance(site, str)
    ):
        return None
    return ConformanceReport(
        tuple(
            sorted(
                [PackageResult(key, (), (), False) for key in keys]
                + [PackageResult(key, (), (), False, locked=False) for key in held],
                key=lambda result: result.key,
            )
        ),
        (),
        (),
        (),
        tuple(Accepted(*a) for a in kept),
        expected,
        observed,
        site,
    )
