"""What a conda package archive (`.conda` or `.tar.bz2`, already verified against the lock's hash) says
it installs: `info/paths.json` (path, sha256, size, prefix placeholder, text or binary mode, link or
file; a file whose entry states no sha256, as in older packages, is hashed from the archive itself), `info/link.json`'s noarch-python entry points, and the bytes a placeholder file has once the
installer writes a prefix into it (text: every occurrence replaced; binary: inside each NUL-terminated
string, padded with NULs to the same length, as conda and rattler do)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lockgen.core.package_identity import require_conda_index
from lockgen.core.wheel_files import inside, shown
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage
from lockgen.model.manifests import ManifestFile, PackageManifest


def _tars(archive: Path, part: str) -> Iterator[tarfile.TarFile]:
    """The tar streams of `part` (`info` or `pkg`) of an archive."""
    if archive.name.endswith(".tar.bz2"):
        with tarfile.open(archive, "r:bz2") as tar:
            yield tar
        return
    import zstandard

    with zipfile.ZipFile(archive) as outer:
        for inner in outer.namelist():
            if inner.startswith(f"{part}-") and inner.endswith(".tar.zst"):
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(outer.read(inner))).read()
                with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                    yield tar


def _link_targets(archive: Path, wanted: set[str]) -> dict[str, str]:
    """The targets of the archive's links named in `wanted`, as its tar holds them."""
    targets: dict[str, str] = {}
    for tar in _tars(archive, "pkg"):
        for member in tar.getmembers():
            if member.name in wanted and member.issym():
                targets[member.name] = member.linkname
    return targets


def _members(archive: Path, part: str, wanted: set[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for tar in _tars(archive, part):
        for member in tar.getmembers():
            if member.name in wanted and member.isfile():
                found[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return found


def _confine(package: LockedPackage, paths: list[dict[str, Any]], has_prefix: bytes, points: dict[str, str]) -> None:
    """Refuses a package any of whose named paths would leave the prefix or pass through one of its own
    links: paths.json `_path`s, has_prefix entries, noarch entry-point names (rattler links what they say)."""
    label = f"`{package.name}` {package.version}"
    links = {e["_path"] for e in paths if e.get("path_type") == "softlink"}
    named = [e["_path"] for e in paths] + [line.split()[-1] for line in has_prefix.decode("utf-8", "replace").splitlines()
                                             if line.strip()]
    for path in named:
        try:
            clean = inside("", path, "path")
        except UserError:
            raise LockFormatError(f"{label} is refused: its paths.json or has_prefix names `{shown(path)}`, outside the prefix",
                                  "the package tries to write outside the environment; nothing was installed") from None
        parents = [clean[:i] for i, char in enumerate(clean) if char == "/"]
        through = next((parent for parent in parents if parent in links), None)
        if through is not None:
            raise LockFormatError(f"{label} is refused: `{shown(clean)}` goes through its own link `{shown(through)}`",
                                  "a package may not write through a link; nothing was installed")
    for name in points:
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise LockFormatError(f"{label} is refused: entry point name `{shown(name)}` is not a file name in bin/",
                                  "the package names a script outside bin/; nothing was installed")


def read_manifest(archive: Path, package: LockedPackage) -> PackageManifest:
    """The manifest of a verified archive of `package`; a package naming paths outside the prefix is refused."""
    info = _members(archive, "info", {"info/paths.json", "info/link.json", "info/index.json", "info/has_prefix"})
    if "info/paths.json" not in info:
        raise LockFormatError(f"`{package.name}` {package.version} ({archive.name}) has no info/paths.json",
                              "lockgen checks conda packages against their paths.json (conda-build 3 and later write it)")
    paths: list[dict[str, Any]] = json.loads(info["info/paths.json"]).get("paths", [])
    link = json.loads(info.get("info/link.json", b"{}")).get("noarch") or {}
    index = json.loads(info.get("info/index.json", b"null"))
    require_conda_index(package, index)
    unhashed = {e["_path"] for e in paths if not e.get("sha256") and e.get("path_type") != "softlink"}
    if unhashed:  # older packages state no sha256: taken from the verified archive's own bytes
        content = _members(archive, "pkg", unhashed)
        paths = [{**e, "sha256": hashlib.sha256(content[e["_path"]]).hexdigest(), "size_in_bytes": len(content[e["_path"]])}
                 if e["_path"] in content else e for e in paths]
    links = {e["_path"] for e in paths if e.get("path_type") == "softlink"}
    targets_of_links = _link_targets(archive, links) if links else {}
    files = tuple(ManifestFile(path=e["_path"], sha256=e.get("sha256"), size=e.get("size_in_bytes"),
                               kind="link" if e["_path"] in links else "file",
                               placeholder=e.get("prefix_placeholder"), text_mode=e.get("file_mode", "text") == "text",
                               target=targets_of_links.get(e["_path"]))
                  for e in paths)
    points = dict(point.split("=", 1) for point in link.get("entry_points", []) if "=" in point)
    targets = {name.strip(): target.strip() for name, target in points.items()}
    _confine(package, paths, info.get("info/has_prefix", b""), targets)
    scripts = tuple(sorted(targets))
    return PackageManifest(sha256=package.hash.sha256 or package.hash.md5 or "", name=package.name,
                           version=package.version, kind="conda", files=files, scripts=scripts, entry_points=targets,
                           noarch_python=link.get("type") == "python" or index.get("noarch") == "python",
                           source=package.url)


def patched_bytes(data: bytes, placeholder: str, prefix: str, text_mode: bool) -> bytes:
    """`data` with `prefix` written where `placeholder` stands, as the installer writes it."""
    old, new = placeholder.encode(), prefix.encode()
    if text_mode:
        return data.replace(old, new)

    def padded(match: re.Match[bytes]) -> bytes:
        string = match.group(0)
        replaced = string.replace(old, new)
        if len(replaced) > len(string):
            raise LockFormatError(f"the prefix {prefix} is longer than the package's placeholder",
                                  "use a shorter prefix for binary files with placeholders")
        return replaced[:-1] + b"\0" * (len(string) - len(replaced) + 1)

    return re.sub(re.escape(old) + rb"[^\0]*\0", padded, data)


def patched_digests(archive: Path, manifest: PackageManifest, prefix: str) -> dict[str, str]:
    """The sha256 of each placeholder file of the archive once `prefix` is written into it."""
    wanted = {f.path: f for f in manifest.files if f.placeholder is not None}
    if not wanted:
        return {}
    contents = _members(archive, "pkg", set(wanted))
    return {path: hashlib.sha256(patched_bytes(data, wanted[path].placeholder or "", prefix, wanted[path].text_mode)).hexdigest()
            for path, data in contents.items()}
