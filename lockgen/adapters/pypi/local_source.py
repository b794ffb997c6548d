"""A stack's local packages (`mypkg = { path = "src/mypkg", editable = true }`): the folder found below the stack's,
the lock entry that pins it, and its install by uv with the project's own build backend.

A local entry is a pip entry whose URL names the folder relative to the stack (`local:src/mypkg` built,
`editable:src/mypkg` editable: `core/lock/lock_fields.py` holds the rules) with, as its sha256:
- built (not editable): the digest of the source tree, what a build reads: every regular file and symbolic link
  below the folder (path, kind, executable bit, content sha256; a link's target and, for a link to a file, the
  content it leads to, as a build follows it), but the version-control, environment and build-output folders at
  its top (`TOP_SKIPPED`: a `build/` or `dist/` deeper down is source), caches at any depth (`__pycache__`,
  `*.egg-info`) and compiled `*.pyc`. A link that leads out of the package's folder is refused: what it reaches
  is not the package's. A tree that changed
  since the lock was made is refused by materialize (naming the package) and is stale to `resolve --check`. The
  stack's own folder (`path = "."`) is editable only: its tree holds the locks made from it.
- editable: the sha256 of its `pyproject.toml`: its code is read where it is, each edit visible without a new
  install, but its name, version and dependencies (what the lock pins of it) come from that file.
The folder must stay inside the stack's (links resolved); its pyproject.toml states `[project] name` (the stack's
key) and a static `version`.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

from lockgen.adapters.tool_runner import run_tool
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.core.env.conformance import ExpectedFile, ExpectedPackage
from lockgen.core.lock.lock_builder import local_of, local_url
from lockgen.core.env.wheel_files import parse_record
from lockgen.digests import canonical_digest, file_digest
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.manifests import PackageManifest
from lockgen.model.names import normalize, shown

TYPE_CHECKING = False
if TYPE_CHECKING:  # the stack's model: named for its fields only (a build of a lock loads none)
    from lockgen.model.spec import PypiDependency

TOP_SKIPPED = frozenset(
    {".git", ".hg", ".svn", ".venv", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist"}
)
_HINT = "a local package is a folder below the stack's holding a pyproject.toml with [project] name and version"


def folder_of(stack_folder: Path, relative: str, name: str) -> Path:
    """The local package's folder, links resolved, refused unless inside the stack's and holding a pyproject.toml."""
    root = stack_folder.resolve()
    folder = (root / relative).resolve()
    if folder != root and root not in folder.parents:
        raise UserError(
            f"local package `{name}`: {shown(relative)} leads outside the stack's folder {shown(str(root))}",
            "keep the package in a folder below the stack's (a link out of it counts as outside)",
        )
    if not (folder / "pyproject.toml").is_file():
        raise UserError(f"local package `{name}`: {shown(str(folder))} holds no pyproject.toml", _HINT)
    return folder


def _version(folder: Path, name: str) -> str:
    """The static `[project] version` of the package's pyproject.toml, once its `name` is the stack's key."""
    try:
        project = tomllib.loads((folder / "pyproject.toml").read_text()).get("project", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"local package `{name}`: its pyproject.toml is not TOML: {shown(str(exc), 200)}", "fix the file"
        ) from None
    if normalize(str(project.get("name", ""))) != normalize(name):
        raise UserError(
            f"local package `{name}`: its pyproject.toml names the project `{shown(str(project.get('name', '')), 80)}`",
            "name the dependency in the stack as the project names itself",
        )
    if not isinstance(project.get("version"), str):
        raise UserError(
            f"local package `{name}`: its pyproject.toml states no static [project] version",
            'write `version = "…"` in [project] (a lock pins a local package\'s version)',
        )
    return str(project["version"])


def _skipped(name: str, top: bool) -> bool:
    return name == "__pycache__" or name.endswith(".egg-info") or (top and name in TOP_SKIPPED)


def _link_entry(folder: Path, path: Path, key: str) -> list[str]:
    """A link's entry: its target and, for a link to a file, that file's content; refused when it leads out of
    the package's folder (or nowhere a build could read)."""
    target, resolved = os.readlink(path), path.resolve()
    if resolved != folder and folder not in resolved.parents:
        raise UserError(
            f"local package folder {shown(str(folder))}: the link {shown(key)} leads outside it ({shown(target)})",
            "copy what it reaches into the package's folder",
        )
    return [key, "link", target, file_digest(resolved) if resolved.is_file() else ""]


def tree_digest(folder: Path) -> str:
    """The digest of the source tree a build of `folder` reads (the module docstring says what it covers)."""
    folder = folder.resolve()
    entries: list[list[str]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        relative = here.relative_to(folder).as_posix()
        kept = []
        for name in sorted(dirnames):
            path, key = here / name, name if relative == "." else f"{relative}/{name}"
            if _skipped(name, relative == "."):
                continue
            if path.is_symlink():
                entries.append(_link_entry(folder, path, key))
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path, key = here / name, name if relative == "." else f"{relative}/{name}"
            if name.endswith(".pyc"):
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries.append(_link_entry(folder, path, key))
            elif stat.S_ISREG(info.st_mode):
                entries.append([key, "exec" if info.st_mode & 0o111 else "file", file_digest(path)])
    return canonical_digest(sorted(entries))


def source_digest(folder: Path, editable: bool) -> str:
    """What a local entry pins: its pyproject.toml's sha256 (editable), else its source tree's digest."""
    return file_digest(folder / "pyproject.toml") if editable else tree_digest(folder)


def locked_entries(
    stack_folder: Path, dependencies: tuple[PypiDependency, ...], platforms: tuple[str, ...]
) -> dict[str, list[LockedPackage]]:
    """Each platform's lock entries of the stack's local packages (every folder read and digested once)."""
    entries: dict[str, list[LockedPackage]] = {platform: [] for platform in platforms}
    for dependency in dependencies:
        if dependency.path is None:
            continue
        folder = folder_of(stack_folder, dependency.path, dependency.name)
        pinned = PackageHash(sha256=source_digest(folder, dependency.editable))
        version, url = _version(folder, dependency.name), local_url(dependency.path, dependency.editable)
        for platform in platforms:
            entries[platform].append(
                LockedPackage(
                    name=dependency.name,
                    version=version,
                    manager="pip",
                    platform=platform,
                    url=url,
                    hash=pinned,
                    dependencies={},
                )
            )
    return entries


def changed(stack_folder: Path, package: LockedPackage) -> str | None:
    """Why a local entry no longer pins its folder (its tree or pyproject.toml changed, or it is gone), or None."""
    local = local_of(package)
    if local is None:
        return None
    relative, editable = local
    try:
        folder = folder_of(stack_folder, relative, package.name)
    except UserError as exc:
        return exc.message
    if source_digest(folder, editable) != package.hash.sha256:
        return (
            f"local package `{package.name}`: its {'pyproject.toml' if editable else 'source tree'} ({relative}) "
            "changed since the lock was made"
        )
    return None


def refuse_changed(packages: list[LockedPackage], stack_folder: Path) -> None:
    """Refuses local entries whose folder no longer matches them, naming the first (before anything is installed)."""
    for package in packages:
        reason = changed(stack_folder, package)
        if reason is not None:
            raise LockFormatError(
                reason,
                f"lock it again: `lockgen resolve` the stack in {shown(str(stack_folder))} (resolve --check "
                "names what changed)",
            )


def install(packages: list[LockedPackage], stack_folder: Path, python: Path, progress: Callable[[str], None]) -> None:
    """Installs the local entries (checked by `refuse_changed` first) into the venv of `python` with uv, without
    dependencies (the lock's wheels are them): editable (`uv pip install -e`: the venv reads the folder), or built
    into a wheel by the project's build backend (`uv build --wheel`) and that wheel installed."""
    for package in packages:
        relative, editable = local_of(package) or ("", False)
        folder = folder_of(stack_folder, relative, package.name)
        with tempfile.TemporaryDirectory(prefix="lockgen-local-") as out:
            source = ["--editable", str(folder)] if editable else [str(_built(folder, Path(out), package.name))]
            run_tool(
                [uv_binary(), "pip", "install", "--python", str(python), "--no-deps", "--no-config", *source],
                f"installing local package {package.name}",
                timeout_s=900,
            )
        progress(
            f"installed local package {package.name} {package.version} ({'editable' if editable else 'built'}, "
            f"from {relative})"
        )


def _built(folder: Path, out: Path, name: str) -> Path:
    """`folder` built into a wheel in `out` by its project's own build backend, through uv."""
    run_tool(
        [uv_binary(), "build", "--wheel", "--no-config", "--out-dir", str(out), str(folder)],
        f"building local package {name}",
        timeout_s=900,
    )
    return next(out.glob("*.whl"))


def rebuilt_manifest(folder: Path, package: LockedPackage) -> PackageManifest:
    """What a wheel built again from `folder` installs (its RECORD, and the name and version its METADATA must
    say are the entry's), for `check --lock` of a built local package: the wheel is made in a temporary folder,
    read, and removed; its manifest is not kept (no lock pins that wheel's sha256)."""
    from lockgen.adapters.pypi.wheel_record import read_wheel_file, wheel_manifest  # this check alone reads wheels

    with tempfile.TemporaryDirectory(prefix="lockgen-local-") as out:
        wheel = _built(folder, Path(out), package.name)
        contents = read_wheel_file(wheel)
        return wheel_manifest(contents, file_digest(wheel), package.name, package.version, package.url)


def _dist_info(prefix: Path, package: LockedPackage) -> Path | None:
    """The dist-info folder of `package` (its name and version) in the venv at `prefix`, if it is there."""
    wanted = normalize(package.name)
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        name, _, version = record.parent.name.removesuffix(".dist-info").partition("-")
        if normalize(name) == wanted and version == package.version:
            return record.parent
    return None


def installed_expected(prefix: Path, package: LockedPackage) -> ExpectedPackage:
    """The files the install of a local package placed in the venv at `prefix`, as its installed RECORD states
    them (prefix-relative): what the environment's check of unstated files and its manifest account for."""
    dist_info = _dist_info(prefix, package)
    if dist_info is None:
        raise LockFormatError(
            f"installing local package `{package.name}` {package.version} left no dist-info of that name and version",
            "its pyproject.toml's [project] name and version are the lock's: lock it again",
        )
    site = dist_info.parent.relative_to(prefix).as_posix()
    rows = parse_record((dist_info / "RECORD").read_text(), site)
    files = tuple(ExpectedFile(posixpath.normpath(f"{site}/{row.path}"), row.sha256, row.size) for row in rows)
    return ExpectedPackage(f"{package.name} {package.version}", files, f"{site}/{dist_info.name}")


def editable_findings(prefix: Path, installed: ExpectedPackage, folder: Path) -> list[str]:
    """What the RECORD of an editable install (`installed`, in the venv at `prefix`) holds beyond what such an
    install writes: its own dist-info files, and one .pth of a single line naming the locked `folder` or a folder
    below it (uv's form: the path it adds to sys.path). Any other row (a file placed among the installed packages,
    a .pth that runs code or leads elsewhere) is a finding: that RECORD is the install's own, and no published
    file states it, so only what an editable install writes can be held to it."""
    dist_info = installed.dist_info or ""
    site = posixpath.dirname(dist_info)
    findings: list[str] = []
    path_files: list[str] = []
    for row in installed.files:
        if row.path.startswith(dist_info + "/"):
            continue
        if posixpath.dirname(row.path) == site and row.path.endswith(".pth"):
            path_files.append(row.path)
            reason = _pth_not_the_folder(prefix / row.path, folder)
            if reason:
                findings.append(f"{installed.key}: {row.path} ({reason})")
            continue
        findings.append(f"{installed.key}: {row.path} (not a file an editable install writes)")
    if len(path_files) != 1:
        findings.append(f"{installed.key}: {len(path_files)} .pth files (an editable install writes one)")
    return findings


def _pth_not_the_folder(pth: Path, folder: Path) -> str | None:
    """Why the .pth file `pth` is not one line naming `folder` or a folder below it (None: it is)."""
    try:
        lines = pth.read_text(encoding="utf-8").removesuffix("\n").split("\n")
    except (OSError, UnicodeDecodeError):
        return "not a readable text file"
    named = Path(lines[0])
    if len(lines) != 1 or lines[0].startswith(("import ", "import\t")) or not named.is_absolute():
        return f"not one line naming the folder {folder}"
    root = folder.resolve()
    reached = named.resolve()
    if reached != root and root not in reached.parents:
        return f"names {lines[0]}, outside the folder {folder}"
    return None


def installed_origin(prefix: Path, package: LockedPackage) -> object:
    """What the install of `package` in the venv at `prefix` says it was installed from: its `direct_url.json`
    as parsed (PEP 610), None where the package or that file is not there, or it is not JSON."""
    dist_info = _dist_info(prefix, package)
    try:
        return json.loads((dist_info / "direct_url.json").read_bytes()) if dist_info is not None else None
    except (OSError, ValueError):
        return None
