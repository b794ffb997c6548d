"""A wheel's own statement of its files: `RECORD` rows, `WHEEL` tags, `entry_points.txt` scripts, and where an
installer puts each file of a wheel in a prefix.

Pure: text in, values out. Every path leaves here checked: absolute paths and paths that climb out of
the root (`..` past it) are refused, since an installer following them would write outside the prefix.
Placement follows the wheel spec as pip and uv do it on POSIX: purelib and platlib both go to the one
`site-packages` (a venv or conda prefix has one), scripts to `bin/`, headers to
`include/site/pythonX.Y/<dist-name>/`. An installer rewrites a `#!python` script's first line, so the
wheel's hash of a `.data/scripts` file is not the installed one: `expected_files` leaves it unhashed.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import posixpath
import re
from dataclasses import dataclass

from lockgen.errors import UserError
from lockgen.model.names import shown

_SCHEME_KEYS = ("purelib", "platlib", "scripts", "data", "headers")
_SCRIPT_GROUPS = {"console_scripts": "console", "gui_scripts": "gui"}
_TARGET = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SCRIPTS = re.compile(r"^[^/]+\.data/scripts/")


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One RECORD line: a path, the hex sha256 of its content (None when unstated) and its size."""

    path: str
    sha256: str | None
    size: int | None


@dataclass(frozen=True)
class WheelInfo:
    """The `WHEEL` file: format version, whether the root is purelib, build tag and the expanded tags."""

    wheel_version: str
    root_is_purelib: bool
    tags: tuple[str, ...]
    build: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptEntry:
    """A console or gui script an installer writes to `bin/<name>`, calling `target` (`module:func`)."""

    name: str
    target: str
    kind: str


@dataclass(frozen=True)
class Scheme:
    """Where an installer puts a wheel's parts, prefix-relative: `site_packages` like
    `lib/python3.12/site-packages`, `python` as `X.Y`, `dist_name` as the wheel's metadata name."""

    site_packages: str
    python: str
    dist_name: str

    def root_of(self, key: str) -> str:
        return {
            "purelib": self.site_packages,
            "platlib": self.site_packages,
            "scripts": "bin",
            "data": "",
            "headers": f"include/site/python{self.python}/{self.dist_name}",
        }[key]


OWN_FOLDER = ".lockgen"  # a prefix's record of itself (manifest, fingerprints, services): lockgen's alone


def in_own_folder(path: str) -> bool:
    """Whether a normalised prefix-relative path is lockgen's own folder or inside it: no package may write there
    (a package's `.lockgen/manifest.json` would be overwritten by the record, then fail every check)."""
    return path == OWN_FOLDER or path.startswith(OWN_FOLDER + "/")


def folders_above(path: str) -> list[str]:
    """The folders above a normalised relative path, outermost first: `a/b/c` -> `a`, `a/b` (what a write to it
    goes through: a package may not write through a link of its own)."""
    return [path[:index] for index, char in enumerate(path) if char == "/"]


def inside(base: str, path: str, what: str = "path") -> str:
    """`path` joined to the folder `base` (both relative to a root) and normalised; refuses absolute paths
    and paths that climb out of the root."""
    if not path or "\x00" in path or path.startswith(("/", "\\")) or _DRIVE.match(path):
        raise UserError(
            f"{what} `{shown(path)}` is absolute or empty", "a package may only place files inside its prefix"
        )
    if _normal(path) and (not base or _normal(base)):  # most paths: nothing for normpath to change (0.1 s a torch)
        return f"{base}/{path}" if base else path
    joined = posixpath.normpath(posixpath.join(base, path)) if base else posixpath.normpath(path)
    if joined in (".", "..") or joined.startswith("../"):
        raise UserError(f"{what} `{shown(path)}` leaves the prefix", "a package may only place files inside its prefix")
    return joined


def _normal(path: str) -> bool:
    """A relative path normpath leaves as it is: no empty, `.` or `..` part (a part that merely starts with a dot,
    `.libs`, is sent to normpath too, which keeps it)."""
    return "//" not in path and "/." not in path and not path.startswith(".") and not path.endswith("/")


def hex_of_record_hash(value: str) -> str:
    """`sha256=<urlsafe base64, unpadded>` as hex; other algorithms and malformed digests are refused."""
    algorithm, sep, digest = value.partition("=")
    if not sep or algorithm != "sha256":
        raise UserError(
            f"RECORD hash `{shown(value)}` is not sha256=<digest>",
            "lockgen checks wheels by sha256, the hash every installer writes",
        )
    try:
        raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32 or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != digest:
        raise UserError(f"RECORD hash `{shown(value)}` is not a urlsafe-base64 sha256", "the RECORD is corrupt")
    return raw.hex()


def record_hash_of_hex(hex_digest: str) -> str:
    """The RECORD form (`sha256=...`) of a hex sha256."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode()


def _row(fields: list[str], base: str, number: int) -> RecordRow:
    if len(fields) != 3:
        raise UserError(
            f"RECORD line {number} has {len(fields)} fields, not 3 (path,hash,size)", "the RECORD is corrupt"
        )
    path, digest, size = fields
    inside(base, path, f"RECORD line {number} path")
    if size and not (size.isascii() and size.isdigit()):
        raise UserError(f"RECORD line {number} size `{shown(size, 40)}` is not a number", "the RECORD is corrupt")
    return RecordRow(path, hex_of_record_hash(digest) if digest else None, int(size) if size else None)


def parse_record(text: str, base: str = "") -> tuple[RecordRow, ...]:
    """The rows of a RECORD (CSV). Paths stay as written; each must stay inside the root once joined to
    `base` (the folder the paths are relative to: `""` in a wheel, site-packages when installed)."""
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise UserError(f"RECORD is not CSV: {shown(str(exc))}", "the RECORD is corrupt") from None
    return tuple(_row(fields, base, n) for n, fields in enumerate(lines, 1) if fields)


def render_record(rows: tuple[RecordRow, ...] | list[RecordRow]) -> str:
    """RECORD text for rows, as installers write it (CSV, `\\n` line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        digest = record_hash_of_hex(row.sha256) if row.sha256 else ""
        writer.writerow([row.path, digest, "" if row.size is None else str(row.size)])
    return out.getvalue()


def parse_wheel(text: str) -> WheelInfo:
    """The `WHEEL` file (email headers); compressed `Tag:` values (`py2.py3-none-any`) are expanded."""
    from email.parser import HeaderParser  # an installed wheel's only: no resolve needs the email package

    headers = HeaderParser().parsestr(text)
    version, purelib = (headers.get("Wheel-Version") or "").strip(), (headers.get("Root-Is-Purelib") or "").strip()
    if not version or purelib.lower() not in ("true", "false"):
        raise UserError("WHEEL lacks Wheel-Version or a true/false Root-Is-Purelib", "the wheel is malformed")
    tags: list[str] = []
    for value in headers.get_all("Tag") or []:
        tags += [t for t in expand_tags(value.strip()) if t not in tags]
    if not tags:
        raise UserError("WHEEL names no Tag", "the wheel is malformed")
    build = (headers.get("Build") or "").strip() or None
    return WheelInfo(version, purelib.lower() == "true", tuple(tags), build)


def expand_tags(compressed: str) -> tuple[str, ...]:
    """`py2.py3-none-any` -> `py2-none-any`, `py3-none-any`: every combination, in written order."""
    parts = compressed.split("-")
    if len(parts) != 3 or "" in ".".join(parts).split(".") or any(c.isspace() for c in compressed):
        raise UserError(f"wheel tag `{shown(compressed)}` is not python-abi-platform", "the wheel is malformed")
    return tuple(
        f"{py}-{abi}-{plat}"
        for py in parts[0].split(".")
        for abi in parts[1].split(".")
        for plat in parts[2].split(".")
    )


def parse_entry_points(text: str) -> tuple[ScriptEntry, ...]:
    """The console and gui scripts of an `entry_points.txt`, sorted by name; other groups are ignored."""
    import configparser  # here: a conda stack's resolve reads no entry_points.txt

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, comment_prefixes=("#", ";"), strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise UserError(
            f"entry_points.txt is not INI: {shown(str(exc).split(chr(10))[0])}", "the wheel is malformed"
        ) from None
    scripts = []
    for group, kind in _SCRIPT_GROUPS.items():
        for name, value in parser.items(group) if parser.has_section(group) else []:
            target = (value or "").split("[", 1)[0].strip().replace(" ", "")
            if not name or "/" in name or "\\" in name or name in (".", "..") or not _TARGET.fullmatch(target):
                raise UserError(
                    f"entry point `{shown(name)}` = `{shown(value or '')}` is not name = module:func",
                    "the wheel is malformed",
                )
            scripts.append(ScriptEntry(name, target, kind))
    return tuple(sorted(scripts, key=lambda s: s.name))


def wheel_to_prefix(path: str, scheme: Scheme) -> str:
    """The prefix-relative path an installer writes a wheel member to (`NAME.data/<key>/p` to the key's root)."""
    clean = inside("", path, "wheel member")
    head, _, rest = clean.partition("/")
    if not head.endswith(".data") or not rest:  # a normal path under a normal folder stays normal once joined
        site = scheme.site_packages
        # (`clean` is then the member's own path, which passed inside's checks above)
        return f"{site}/{clean}" if site and _normal(site) and _normal(path) else inside(site, clean, "wheel member")
    key, _, inner = rest.partition("/")
    if key not in _SCHEME_KEYS or not inner:
        raise UserError(
            f"wheel member `{shown(path)}` uses an unknown data scheme `{shown(key, 40)}`",
            "installers accept only purelib, platlib, scripts, data and headers",
        )
    placed = inside(scheme.root_of(key), inner, "wheel member")
    if in_own_folder(placed):
        raise UserError(
            f"wheel member `{shown(path)}` would be written into {OWN_FOLDER}/, lockgen's record of the environment",
            "no package may write there: use another wheel",
        )
    return placed


def installed_to_prefix(path: str, site_packages: str) -> str:
    """The prefix-relative path of an installed RECORD's row (written relative to site-packages)."""
    return inside(site_packages, path, "installed RECORD path")


def is_script(path: str) -> bool:
    """A wheel member in its `.data/scripts/` folder: installed into bin/, its `#!python` line rewritten and made
    executable whatever its mode in the wheel (pip and uv)."""
    return ".data/" in path and _SCRIPTS.match(posixpath.normpath(path)) is not None


def expected_files(rows: tuple[RecordRow, ...], scheme: Scheme) -> tuple[RecordRow, ...]:
    """A wheel's RECORD as prefix-relative rows, sorted; `.data/scripts` files unhashed (rewritten on install)."""
    placed = []
    for row in rows:
        target = wheel_to_prefix(row.path, scheme)
        scripted = is_script(row.path)
        placed.append(RecordRow(target, None, None) if scripted else RecordRow(target, row.sha256, row.size))
    return tuple(sorted(placed, key=lambda r: r.path))
