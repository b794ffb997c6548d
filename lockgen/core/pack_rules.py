"""The rules of a pack archive (`lockgen pack` / `unpack`), pure: which members a lock's platform makes, the index
member's exact bytes, and the checks an index read back must pass before any other member is trusted.

An archive is, in this order: the index (`lockgen-pack.json`), the lock (`lock.conda-lock.yml`, its bytes as read),
then one member per artifact the lock pins for the platform, sorted by path: `conda/<archive file name>` and
`pypi/<wheel file name>`, the file names of the lock's URLs (checked by `lock_fields` when the lock was read). The index
lists every member after itself with its size and sha256, as canonical JSON; an index whose bytes are not the canonical
rendering of what it says is refused, so a flipped byte anywhere in it is found. The artifacts' sha256 are the lock's
own pins: the archive proves nothing the lock does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from pydantic import ValidationError

from lockgen.core.lock import lock_builder
from lockgen.core.env.confined import file_name
from lockgen.core.lock.lock_fields import PLATFORM
from lockgen.model.names import shown
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError, PackError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.pack import PACK_FORMAT, PackIndex, PackMember

INDEX = "lockgen-pack.json"
LOCK = "lock.conda-lock.yml"
MAX_INDEX = 16 << 20  # bytes: an index of 100,000 members is about 15 MB
MAX_LOCK = 64 << 20  # bytes: the largest lock of the public corpus is under 2 MB
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FOLDERS = {"conda": "conda", "pip": "pypi"}
_REFUSED_HINT = "the archive was damaged or changed after lockgen pack wrote it: pack the lock again"


@dataclass(frozen=True)
class Planned:
    """One artifact of the lock that goes into the archive: its member path and the lock entry it is."""

    path: str
    package: LockedPackage

    @property
    def sha256(self) -> str:
        return self.package.hash.sha256 or ""


def member_of(package: LockedPackage) -> str:
    """The member path of a lock entry's artifact: `conda/` or `pypi/`, then the file name its URL ends in."""
    name = unquote(urlsplit(package.url).path.rsplit("/", 1)[-1])
    return f"{_FOLDERS[package.manager]}/{file_name(name, f'the archive file name of `{package.name}`')}"


def planned(lock: Lock, platform: str) -> tuple[Planned, ...]:
    """The artifacts the lock pins for `platform`, sorted by member path (one member per file; two entries of one
    file must pin one sha256). An entry that pins no sha256 or has no published file cannot be packed."""
    found: dict[str, Planned] = {}
    for package in lock.packages_for(platform):
        if package.manager == "pip" and lock_builder.is_check_only(package):
            raise LockFormatError(
                f"the lock's {package.name} {package.version} is check-only (no published wheel to pack)",
                "pack a lock whose every package has a URL; check-only entries serve check and verify",
            )
        if package.hash.sha256 is None:
            raise LockFormatError(
                f"`{package.name}` {package.version} is pinned by md5 alone: an archive member is checked by sha256",
                "re-create the lock so it pins a sha256 (lockgen resolve)",
            )
        entry = Planned(member_of(package), package)
        before = found.setdefault(entry.path, entry)
        if before.sha256 != entry.sha256:
            raise LockFormatError(
                f"two entries of the lock name the file {entry.path} with different sha256",
                "the lock is not one consistent environment: re-resolve it",
            )
    if not found:
        raise LockFormatError(
            f"the lock holds no package for {platform}: there is nothing to pack",
            "pass --platform with one of the lock's platforms, or re-create it with lockgen resolve",
        )
    return tuple(found[path] for path in sorted(found))


def render_index(platform: str, members: list[PackMember]) -> bytes:
    """The index member's exact bytes (canonical JSON and a newline)."""
    index = PackIndex(platform=platform, members=tuple(members))
    return canonical_json(index.model_dump(mode="json")) + b"\n"


def _refuse(problem: str, member: str = INDEX) -> PackError:
    return PackError(f"pack archive member `{shown(member, 120)}`: {problem}", _REFUSED_HINT, member)


def parse_index(data: bytes, max_member: int) -> PackIndex:
    """The index read back: canonical, of this format, every member a known path of at most `max_member` bytes
    with a sha256, the lock first and the artifacts sorted after it, none twice."""
    try:
        index = PackIndex.model_validate_json(data, strict=True)
    except ValidationError:
        raise _refuse("it is not a lockgen pack index") from None
    if index.format != PACK_FORMAT:
        raise _refuse(f"format `{shown(index.format, 60)}` is not {PACK_FORMAT}")
    if not PLATFORM.fullmatch(index.platform):
        raise _refuse(f"platform `{shown(index.platform, 60)}` is not a platform")
    if render_index(index.platform, list(index.members)) != data:
        raise _refuse("its bytes are not the index lockgen writes (changed after it was written)")
    paths = [m.path for m in index.members]
    if not paths or paths[0] != LOCK:
        raise _refuse(f"the index does not name the lock ({LOCK}) first")
    if paths[1:] != sorted(set(paths[1:])) or LOCK in paths[1:]:
        raise _refuse("the index names its members out of order or twice")
    for member in index.members:
        folder, _, name = member.path.partition("/")
        if member.path != LOCK and (folder not in _FOLDERS.values() or _plain(name) is None):
            raise _refuse(f"the index names `{shown(member.path, 120)}`, which is no member lockgen writes")
        if not _SHA256.fullmatch(member.sha256):
            raise _refuse(f"the sha256 it gives `{shown(member.path, 120)}` is not 64 lowercase hex digits")
        bound = MAX_LOCK if member.path == LOCK else max_member
        if not 0 <= member.size <= bound:
            raise _refuse(f"it gives `{shown(member.path, 120)}` {member.size} bytes, outside 0..{bound}")
    return index


def _plain(name: str) -> str | None:
    try:
        return file_name(name, "a member's file name")
    except LockFormatError:
        return None


def check_against_lock(index: PackIndex, lock: Lock, platform: str) -> tuple[Planned, ...]:
    """The artifacts of the index, proven to be exactly those the lock pins for `platform` (by path and sha256);
    the first difference is refused, naming the member."""
    if platform != index.platform:
        raise PackError(
            f"the pack archive holds the artifacts of {index.platform}, not {platform}",
            f"unpack it with --platform {index.platform} (or pack the lock again with --platform {platform})",
        )
    expected = planned(lock, platform)
    stated = {m.path: m for m in index.members[1:]}
    for entry in expected:
        member = stated.get(entry.path)
        if member is None:
            raise _refuse(
                f"the lock pins {entry.package.name} {entry.package.version} but the index does not name its member",
                entry.path,
            )
        if member.sha256 != entry.sha256:
            raise _refuse(f"the index gives sha256 {member.sha256}, the lock pins {entry.sha256}", entry.path)
    extra = sorted(stated.keys() - {entry.path for entry in expected})
    if extra:
        raise _refuse("the index names it but the lock pins no such file", extra[0])
    return expected
