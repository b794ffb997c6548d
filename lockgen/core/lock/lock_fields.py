"""The rules every field of a lock meets before anything uses it: a lock from a pull request or a mirror
is input, and its fields become folder names, cache keys, child-process arguments and output lines.

Checked once, when a lock is read (`lockfile_yaml.read_lock`) and before one is written: conda names,
versions and builds by conda's character rules (rattler's `PackageName`, conda's `VersionOrder`: no `-`
in a version or build, since archive names are `name-version-build`); PyPI names by PEP 508 and versions
by PEP 440 (`packaging`); `sha256` exactly 64 and `md5` 32 lowercase hex digits; URLs parsed, of an
allowed scheme, without whitespace or control characters, whose file name is the entry's own archive
(a conda entry's `name-version-build.conda|.tar.bz2`, a wheel's `name-version-…whl` of the same name and
version); platforms as conda subdirs; `lockgen.target` by the target-name rule and `lockgen.python.*` an
`X.Y`; no control character in any string. A bad field is one `LockFieldError` naming the entry.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from lockgen.core.credentials import carries_credential, plain_index_url, scrub_url, split_url
from lockgen.core.lock.lock_builder import LockgenMeta, local_of, package_set
from lockgen.core.stack.stack_layout import TARGET_NAME
from lockgen.core.env.package_identity import same_version
from lockgen.model.names import shown
from lockgen.errors import LockFieldError, LockFormatError, UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.names import CONTROL, normalize
from lockgen.model.spec import local_path

if TYPE_CHECKING:
    from lockgen.core.pypi.wheel_names import WheelName

CONDA_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
CONDA_VERSION = re.compile(r"[A-Za-z0-9_*][A-Za-z0-9_.+!*]{0,99}")
CONDA_BUILD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+]{0,199}")
PYPI_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")
PLATFORM = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
SHA256 = re.compile(r"[0-9a-f]{64}")
MD5 = re.compile(r"[0-9a-f]{32}")
PYTHON_XY = re.compile(r"[0-9]\.[0-9]{1,2}")
PYTHON_XYZ = re.compile(r"[0-9]\.[0-9]{1,2}\.[0-9]{1,3}")
CATEGORY = re.compile(r"[A-Za-z0-9_.-]{1,100}")
PACKAGE_SCHEMES = ("https", "http", "file")
CHECK_ONLY_SCHEME = "unpublished"
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_CONDA_SUFFIXES = (".conda", ".tar.bz2")
MAX_TEXT = 100_000  # no field of a real lock comes near (a pypi-constraints line of 200 pins is ~6,000)

_HINT = "re-create the lock with `lockgen resolve` (or `lockgen import`); never edit a lock by hand"


class _EntryPlace:
    """Where an entry is in a lock, in words (`package 3 (pip `torch`)`), made only where a refusal names it: each of
    a large lock's 600k entries made that line before its fields were judged."""

    __slots__ = ("_index", "_package")

    def __init__(self, package: LockedPackage, index: int) -> None:
        self._package = package
        self._index = index

    def __str__(self) -> str:
        return f"package {self._index + 1} ({self._package.manager} `{shown(self._package.name, 60)}`)"


_Where = str | _EntryPlace  # what a refusal line names: a key of the metadata, or an entry


def _refuse(source: str, where: _Where, problem: str) -> LockFieldError:
    return LockFieldError(f"lock `{source}`: {where}: {problem}", _HINT)


def _credential(source: str, where: _Where, url: str) -> LockFormatError:
    """A URL with a credential in it: named without the credential, never echoed."""
    return LockFormatError(
        f"lock `{source}`: {where}: url `{shown(scrub_url(url))}` carries a credential (user info or a token)",
        "a lock never holds one: take it out of the URL and give it for the host in ~/.netrc or $RATTLER_AUTH_FILE",
    )


def _text(source: str, where: _Where, value: str) -> None:
    if len(value) > MAX_TEXT:
        raise _refuse(source, where, f"{len(value)} characters is no lock field")
    if CONTROL.search(value):
        raise _refuse(source, where, f"`{shown(value)}` holds a control character")


def check_lock(lock: Lock, source: str) -> None:
    """Refuses a lock any of whose fields breaks its rule (the first one found, named)."""
    meta = lock.metadata
    for platform in meta.platforms:
        if not PLATFORM.fullmatch(platform):
            raise _refuse(
                source, "metadata.platforms", f"`{shown(platform)}` is not a platform (linux-64, linux-aarch64, …)"
            )
    for channel in meta.channels:
        _text(source, "metadata.channels", channel.url)
        if _SPACE_OR_CONTROL.search(channel.url):
            raise _refuse(source, "metadata.channels", f"`{shown(scrub_url(channel.url))}` holds whitespace")
        try:  # one that does not parse is no URL (carries_credential would count it as carrying one)
            urlsplit(channel.url)
        except ValueError:
            raise _refuse(source, "metadata.channels", f"`{shown(scrub_url(channel.url))}` is not a URL") from None
        if carries_credential(channel.url):
            raise _credential(source, "metadata.channels", channel.url)
    for key, value in [*meta.content_hash.items(), *meta.custom_metadata.items()]:
        _text(source, f"metadata key `{shown(key)}`", key)
        _text(source, f"metadata `{shown(key)}`", value)
    for value in meta.sources:
        _text(source, "metadata.sources", value)
    _check_lockgen_keys(lock, source)
    _check_once_each(lock, source)
    for index, package in enumerate(lock.package):
        check_package(package, source, index)
    _check_package_sets(lock, source)


def _check_once_each(lock: Lock, source: str) -> None:
    """Refuses an entry of a platform the lock does not list, or of a package it lists again for that platform
    (the first such entry). Before the fields: thousands of repeats would otherwise cost every later step. Where the
    entries are in the order lockgen writes them (platform, manager, name), a repeat follows its first: only that
    one is compared (the set of every entry seen, 600k at 300k packages, was a tenth of the import's peak memory),
    and from the first entry out of that order on, each is looked up among all those before it."""
    platforms = lock.metadata.platforms
    seen: set[tuple[str, str, str]] | None = None  # made at the first entry out of order
    previous: tuple[str, str, str] | None = None
    for index, package in enumerate(lock.package):
        identity = (package.platform, package.manager, package.name)
        if package.platform not in platforms:  # every reader picks a platform from the list, then its entries
            raise _refuse(
                source,
                f"{package.manager} package `{shown(package.name, 60)}`",
                f"its platform `{shown(package.platform, 30)}` is not among metadata.platforms",
            )
        if seen is None and previous is not None and identity < previous:
            seen = {(p.platform, p.manager, p.name) for p in lock.package[:index]}
        if identity == previous if seen is None else identity in seen:
            raise LockFieldError(
                f"lock `{source}` holds {package.manager} package `{shown(package.name, 60)}` twice for "
                f"{shown(package.platform, 30)}",
                "re-create it with `lockgen resolve`; a lock names each package once per platform",
            )
        if seen is not None:
            seen.add(identity)
        previous = identity


def _check_package_sets(lock: Lock, source: str) -> None:
    """Refuses a lock whose entries of a platform are not those lockgen wrote: one cut, added or edited by hand."""
    meta = LockgenMeta(lock)
    for platform in lock.metadata.platforms:
        recorded = meta.package_set(platform)
        if not recorded:  # a lock of an older lockgen, or one of another tool
            continue
        found = package_set(lock.packages_for(platform))
        if found != recorded:
            now, then = found.split(" ", 1)[0], recorded.split(" ", 1)[0]
            change = (
                f"{now} entries now, {shown(then, 12)} when written"
                if now != then
                else f"{now} entries, as written, one or more of them edited"
            )
            raise LockFormatError(
                f"lock `{source}`: its {platform} entries are not the ones lockgen wrote ({change})",
                "a lock is never edited by hand: re-create it with `lockgen resolve` (git diff shows what changed)",
            )


def _check_lockgen_keys(lock: Lock, source: str) -> None:
    target = LockgenMeta(lock).target
    if target and not TARGET_NAME.fullmatch(target):
        raise _refuse(
            source, "lockgen.target", f"`{shown(target)}` is not a target name (letters, digits, `.`, `_`, `-`)"
        )
    for key, value in lock.metadata.custom_metadata.items():
        if key.startswith("lockgen.python.") and not PYTHON_XY.fullmatch(value):
            raise _refuse(source, key, f"`{shown(value)}` is not a Python version X.Y")
        if key.startswith("lockgen.interpreter.") and not PYTHON_XYZ.fullmatch(value):
            raise _refuse(source, key, f"`{shown(value)}` is not a Python version X.Y.Z")


def check_package(package: LockedPackage, source: str, index: int = 0) -> None:
    """Refuses one entry whose name, version, build, platform, hashes, URL or dependencies break their rule."""
    where = _EntryPlace(package, index)
    if not PLATFORM.fullmatch(package.platform):
        raise _refuse(source, where, f"platform `{shown(package.platform)}` is not a platform")
    if not CATEGORY.fullmatch(package.category):
        raise _refuse(source, where, f"category `{shown(package.category)}` is not a name")
    if package.manager == "conda":
        _conda_identity(package, source, where)
    else:
        _pypi_identity(package, source, where)
    _hashes(package, source, where)
    for name, spec in package.dependencies.items():
        if len(name) > MAX_TEXT or len(spec) > MAX_TEXT or CONTROL.search(name) or CONTROL.search(spec):
            _text(source, f"{where} dependency", name)  # (the entry named only where one is refused)
            _text(source, f"{where} dependency `{shown(name)}`", spec)
    _url(package, source, where)


def _conda_identity(package: LockedPackage, source: str, where: _Where) -> None:
    if not CONDA_NAME.fullmatch(package.name):
        raise _refuse(source, where, "the name is not a conda package name (letters, digits, `_`, `.`, `-`)")
    if not CONDA_VERSION.fullmatch(package.version):
        raise _refuse(source, where, f"version `{shown(package.version)}` is not a conda version")
    if package.build is None or not CONDA_BUILD.fullmatch(package.build):
        raise _refuse(source, where, f"build `{shown(package.build or '')}` is not a conda build string")


def _pypi_identity(package: LockedPackage, source: str, where: _Where) -> None:
    if not PYPI_NAME.fullmatch(package.name):
        raise _refuse(source, where, "the name is not a PyPI project name (PEP 508)")
    if not _pep440(package.version):
        raise _refuse(source, where, f"version `{shown(package.version)}` is not a PEP 440 version")
    if package.build is not None and not CONDA_BUILD.fullmatch(package.build):
        raise _refuse(source, where, f"build `{shown(package.build)}` is not a build string")


_PEP440_SEEN: set[str] = set()  # versions that parsed: a lock repeats each on every platform, a release's in its extras
_PEP440_SEEN_AT_MOST = 1 << 14  # versions remembered (each at most `_PEP440_SEEN_LONGEST` characters)
_PEP440_SEEN_LONGEST = 64


def _pep440(version: str) -> bool:
    """Whether `version` is a PEP 440 version (`packaging`'s parse), parsed once per distinct string of a lock."""
    if version in _PEP440_SEEN:
        return True
    from packaging.version import InvalidVersion, Version  # here: a conda lock has no PyPI entry to parse

    try:
        Version(version)
    except InvalidVersion:
        return False
    if len(version) <= _PEP440_SEEN_LONGEST:
        if len(_PEP440_SEEN) >= _PEP440_SEEN_AT_MOST:
            _PEP440_SEEN.clear()
        _PEP440_SEEN.add(version)
    return True


def _hashes(package: LockedPackage, source: str, where: _Where) -> None:
    sha256, md5 = package.hash.sha256, package.hash.md5
    if sha256 == "" or md5 == "":
        raise _refuse(source, where, "an empty sha256 or md5 is no hash")
    if sha256 is not None and not SHA256.fullmatch(sha256):
        raise _refuse(source, where, f"sha256 `{shown(sha256, 80)}` is not 64 lowercase hex digits")
    if md5 is not None and not MD5.fullmatch(md5):
        raise _refuse(source, where, f"md5 `{shown(md5, 80)}` is not 32 lowercase hex digits")
    if sha256 is None and md5 is None:
        raise _refuse(source, where, "it has no hash")


def _url(package: LockedPackage, source: str, where: _Where) -> None:
    url = package.url
    # http(s), a bare host, a path of URL characters (so no whitespace or control character either): no port,
    # credential, query or fragment to refuse, and no local package
    if len(url) <= 4096 and plain_index_url(url):
        _file_named(package, source, where, url.rsplit("/", 1)[-1])
        return
    if len(url) > 4096 or _SPACE_OR_CONTROL.search(url):
        raise _refuse(
            source,
            where,
            f"url `{shown(scrub_url(url))}` holds whitespace or control characters (or is over 4,096 long)",
        )
    try:
        parts = split_url(url)
        parts.port  # noqa: B018 (raises for a port that is no number, which fetching would meet)
    except ValueError:
        raise _refuse(source, where, f"url `{shown(scrub_url(url))}` is not a URL") from None
    local = local_of(package)
    if local is not None:  # a local package: its folder below the stack's, by the stack's own rule
        try:
            if local_path(local[0]) != local[0] or (local[0] == "." and not local[1]):
                raise ValueError("not as lockgen writes it")
        except ValueError:
            raise _refuse(
                source, where, f"url `{shown(url)}` names no folder below the stack's (a relative path without `..`)"
            ) from None
        return
    if parts.scheme == CHECK_ONLY_SCHEME and package.manager == "pip":
        if normalize(url.partition(":")[2].partition("==")[0]) != normalize(package.name):
            raise _refuse(source, where, f"check-only url `{shown(scrub_url(url))}` names another project")
        return
    if parts.scheme not in PACKAGE_SCHEMES or (parts.scheme != "file" and not parts.hostname):
        raise _refuse(source, where, f"url `{shown(scrub_url(url))}` is not an https, http or file URL")
    if parts.query or parts.fragment:
        raise _refuse(
            source, where, f"url `{shown(scrub_url(url))}` has a query or fragment; a lock names the archive itself"
        )
    if carries_credential(url):
        raise _credential(source, where, url)
    _file_named(package, source, where, parts.path.rsplit("/", 1)[-1])


def _file_named(package: LockedPackage, source: str, where: _Where, last_segment: str) -> None:
    """Refuses an entry whose URL's last path segment (`last_segment`, as written) is not its own archive."""
    file_name = unquote(last_segment)
    problem = _conda_file(package, file_name) if package.manager == "conda" else _wheel_file(package, file_name)
    if problem:
        raise _refuse(source, where, problem)


def _conda_file(package: LockedPackage, file_name: str) -> str | None:
    expected = f"{package.name}-{package.version}-{package.build}"
    if not any(file_name == expected + suffix for suffix in _CONDA_SUFFIXES):
        return f"url names `{shown(file_name)}`, not this entry's archive {expected}.conda (or .tar.bz2)"
    return None


@functools.cache
def _wheel_name_parser() -> Callable[[str], WheelName]:
    """`parse_wheel_filename`, imported on first use (a conda lock names no wheel), not for each entry: an import
    statement in a function runs importlib's from-list handling on every call (2 µs, for each of 600k entries).
    Without its cache of the last names: a lock names each wheel once, so every name missed it, and pushed out the
    ones an import's wheel choice reads again."""
    from lockgen.core.pypi.wheel_names import parse_wheel_filename

    return parse_wheel_filename.__wrapped__


def _wheel_file(package: LockedPackage, file_name: str) -> str | None:
    try:
        wheel = _wheel_name_parser()(file_name)
    except UserError:
        return f"url names `{shown(file_name)}`, which is no wheel (lockgen installs wheels only)"
    if normalize(wheel.name) != normalize(package.name) or not same_version(wheel.version, package.version):
        return f"url names the wheel {shown(file_name)}, not one of {package.name} {package.version}"
    return None
