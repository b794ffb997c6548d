"""What a conda package archive (`.conda` or `.tar.bz2`, already verified against the lock's hash) says
it installs: `info/paths.json` (path, sha256, size, prefix placeholder, text or binary mode, link or
file; a file whose entry states no sha256, as in older packages, is hashed from the archive itself), `info/link.json`'s
noarch-python entry points, each file's exec bit (its member's mode), and the bytes a placeholder file has once the
installer writes a prefix into it (text: every occurrence replaced; binary: inside each NUL-terminated
string, padded with NULs to the same length, as conda and rattler do)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from lockgen.adapters.conda.conda_archive import members
from lockgen.core.env.package_identity import require_conda_index
from lockgen.core.env.wheel_files import OWN_FOLDER, folders_above, in_own_folder, inside
from lockgen.model.names import shown
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage
from lockgen.model.manifests import ManifestFile, PackageManifest


def _members(archive: Path, part: str, wanted: set[str]) -> dict[str, bytes]:
    """The content of the regular files named in `wanted` (a later member of one name replaces an earlier one,
    as when the archive is extracted)."""
    return {name: data for name, _, data in members(archive, part, wanted.__contains__) if data is not None}


def _payload(archive: Path, unhashed: set[str]) -> tuple[dict[str, bytes], dict[str, str], set[str]]:
    """In one pass over the package's files (a later member of one name replaces an earlier one, as when the
    archive is extracted): the content of the regular files named in `unhashed`, every link's target as its tar
    holds it, and the files installed executable (any exec bit: rattler keeps the member's mode; a hard link
    member is its target's inode, so it has its target's mode)."""
    content: dict[str, bytes] = {}
    targets: dict[str, str] = {}
    executable: dict[str, bool] = {}
    for name, member, data in members(archive, "pkg", unhashed.__contains__):
        if data is not None:
            content[name] = data
        if member.issym():
            targets[name] = member.linkname
        executable[name] = (
            executable.get(member.linkname, False) if member.islnk() else member.isfile() and bool(member.mode & 0o111)
        )
    return content, targets, {name for name, is_executable in executable.items() if is_executable}


_INFO = ("info/paths.json", "info/link.json", "info/index.json", "info/has_prefix")
_PATH_FIELDS: dict[str, tuple[type, ...]] = {
    "_path": (str,),
    "path_type": (str,),
    "sha256": (str, type(None)),
    "size_in_bytes": (int, type(None)),
    "prefix_placeholder": (str, type(None)),
    "file_mode": (str, type(None)),
}


def _malformed(label: str, name: str, what: str) -> LockFormatError:
    return LockFormatError(
        f"{label} is refused: its {name} {what}",
        "the package's metadata is malformed (its publisher's build is broken): nothing was installed",
    )


def _info_files(archive: Path, label: str) -> dict[str, bytes]:
    """The info/ files lockgen reads, each once and a regular file (rattler reads the last of a name)."""
    found: dict[str, bytes] = {}
    for name, _, data in members(archive, "info", _INFO.__contains__):
        if name in _INFO and (name in found or data is None):
            raise _malformed(label, name, "is repeated in the archive" if name in found else "is not a regular file")
        if data is not None:
            found[name] = data
    return found


def _document(label: str, name: str, data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise _malformed(label, name, "is not UTF-8 JSON (or is nested too deep)") from None
    if not isinstance(document, dict):
        raise _malformed(label, name, "is not a JSON object")
    return document


def _info(archive: Path, label: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], bytes]:
    """(paths.json's entries, link.json's noarch table, index.json, has_prefix), their shapes checked."""
    info = _info_files(archive, label)
    if "info/paths.json" not in info:
        raise LockFormatError(
            f"{label} has no info/paths.json",
            "lockgen checks conda packages against their paths.json (conda-build 3 and later write it)",
        )
    paths = _document(label, "info/paths.json", info["info/paths.json"]).get("paths", [])
    if not isinstance(paths, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("_path"), str)
        and not isinstance(e.get("size_in_bytes"), bool)
        and all(isinstance(e[k], types) for k, types in _PATH_FIELDS.items() if k in e)
        for e in paths
    ):
        raise _malformed(
            label, "info/paths.json", "is not a list of path entries (`_path`, `sha256`, `size_in_bytes`, …)"
        )
    link = _document(label, "info/link.json", info.get("info/link.json", b"{}")).get("noarch") or {}
    points = link.get("entry_points", []) if isinstance(link, dict) else None
    if (
        not isinstance(points, list)
        or not all(isinstance(p, str) for p in points)
        or not isinstance(link.get("type", ""), str)
    ):
        raise _malformed(label, "info/link.json", "has no noarch table of a type and entry point strings")
    index = _document(label, "info/index.json", info.get("info/index.json", b"{}"))
    return paths, link, index, info.get("info/has_prefix", b"")


def _confine(package: LockedPackage, paths: list[dict[str, Any]], has_prefix: bytes, points: dict[str, str]) -> None:
    """Refuses a package any of whose named paths would leave the prefix or pass through one of its own
    links: paths.json `_path`s, has_prefix entries, noarch entry-point names (rattler links what they say)."""
    label = f"`{package.name}` {package.version}"
    links = {e["_path"] for e in paths if e.get("path_type") == "softlink"}
    named = [e["_path"] for e in paths] + [
        line.split()[-1] for line in has_prefix.decode("utf-8", "replace").splitlines() if line.strip()
    ]
    for path in named:
        try:
            clean = inside("", path, "path")
        except UserError:
            raise LockFormatError(
                f"{label} is refused: its paths.json or has_prefix names `{shown(path)}`, outside the prefix",
                "the package tries to write outside the environment; nothing was installed",
            ) from None
        if in_own_folder(clean):
            raise LockFormatError(
                f"{label} is refused: it names `{shown(clean)}`, in {OWN_FOLDER}/, lockgen's record of the environment",
                "no package may write there; nothing was installed",
            )
        through = next((parent for parent in folders_above(clean) if parent in links), None)
        if through is not None:
            raise LockFormatError(
                f"{label} is refused: `{shown(clean)}` goes through its own link `{shown(through)}`",
                "a package may not write through a link; nothing was installed",
            )
    for name in points:
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise LockFormatError(
                f"{label} is refused: entry point name `{shown(name)}` is not a file name in bin/",
                "the package names a script outside bin/; nothing was installed",
            )


def read_manifest(archive: Path, package: LockedPackage) -> PackageManifest:
    """The manifest of a verified archive of `package`; a package naming paths outside the prefix is refused."""
    label = f"`{package.name}` {package.version} ({archive.name})"
    paths, link, index, has_prefix = _info(archive, label)
    require_conda_index(package, index)
    unhashed = {e["_path"] for e in paths if not e.get("sha256") and e.get("path_type") != "softlink"}
    content, targets_of_links, executable = _payload(archive, unhashed)
    if unhashed:  # older packages state no sha256: taken from the verified archive's own bytes
        paths = [
            {**e, "sha256": hashlib.sha256(content[e["_path"]]).hexdigest(), "size_in_bytes": len(content[e["_path"]])}
            if e["_path"] in content
            else e
            for e in paths
        ]
    links = {e["_path"] for e in paths if e.get("path_type") == "softlink"}
    files = tuple(
        ManifestFile(
            path=e["_path"],
            sha256=e.get("sha256"),
            size=e.get("size_in_bytes"),
            kind="link" if e["_path"] in links else "file",
            placeholder=e.get("prefix_placeholder"),
            text_mode=e.get("file_mode", "text") == "text",
            target=targets_of_links.get(e["_path"]) if e["_path"] in links else None,
            executable=None if e["_path"] in links else e["_path"] in executable,
        )
        for e in paths
    )
    points = dict(point.split("=", 1) for point in link.get("entry_points", []) if "=" in point)
    targets = {name.strip(): target.strip() for name, target in points.items()}
    _confine(package, paths, has_prefix, targets)
    scripts = tuple(sorted(targets))
    return PackageManifest(
        sha256=package.hash.sha256 or package.hash.md5 or "",
        name=package.name,
        version=package.version,
        kind="conda",
        files=files,
        scripts=scripts,
        entry_points=targets,
        noarch_python=link.get("type") == "python" or index.get("noarch") == "python",
        source=package.url,
    )


def patched_bytes(data: bytes, placeholder: str, prefix: str, text_mode: bool) -> bytes:
    """`data` with `prefix` written where `placeholder` stands, as the installer writes it."""
    old, new = placeholder.encode(), prefix.encode()
    if text_mode:
        return data.replace(old, new)

    def padded(match: re.Match[bytes]) -> bytes:
        string = match.group(0)
        replaced = string.replace(old, new)
        if len(replaced) > len(string):
            raise LockFormatError(
                f"the prefix {prefix} is longer than the package's placeholder",
                "use a shorter prefix for binary files with placeholders",
            )
        return replaced[:-1] + b"\0" * (len(string) - len(replaced) + 1)

    return re.sub(re.escape(old) + rb"[^\0]*\0", padded, data)


def patched_digests(archive: Path, manifest: PackageManifest, prefix: str) -> dict[str, str]:
    """The sha256 of each placeholder file of the archive once `prefix` is written into it."""
    wanted = {f.path: f for f in manifest.files if f.placeholder is not None}
    if not wanted:
        return {}
    contents = _members(archive, "pkg", set(wanted))
    return {
        path: hashlib.sha256(
            patched_bytes(data, wanted[path].placeholder or "", prefix, wanted[path].text_mode)
        ).hexdigest()
        for path, data in contents.items()
    }
