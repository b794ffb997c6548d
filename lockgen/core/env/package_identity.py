"""The package is what the lock says: a conda archive's `info/index.json` name, version and build, and a
wheel's dist-info folder and METADATA `Name`/`Version`, must equal the lock entry that pins the file's
hash. A hash proves the bytes are the ones someone locked, not that the entry's name and version describe
them: `hello 9.9.9` pinned to hello-1.0's archive would otherwise install 1.0 and report 9.9.9 in every
check, SBOM and certificate. PyPI names compare by PEP 503 and versions by PEP 440 (`1.0` is `1.0.0`);
conda fields compare exactly, as conda's own index keys them."""

from __future__ import annotations

from typing import Any

from lockgen.model.names import shown
from lockgen.errors import LockFormatError
from lockgen.model.lock import LockedPackage
from lockgen.model.names import normalize

_HINT = "the lock pins a file that is another package: re-create the lock with lockgen resolve, check its source"


def same_version(a: str, b: str) -> bool:
    """PEP 440 equality (`1.0` is `1.0.0`); versions that are no PEP 440 compare as written, case folded."""
    if a == b:  # equal as written, equal either way (a lock's entry and its wheel's name mostly are)
        return True
    from packaging.version import InvalidVersion, Version  # here: a conda lock's checks never compare PEP 440 versions

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.lower() == b.lower()


def _mismatch(manager: str, stated: str, what: str, says: str) -> LockFormatError:
    return LockFormatError(
        f"the lock's {manager} entry `{shown(stated)}` pins a file whose {what} says `{shown(says)}`", _HINT
    )


def require_conda_index(package: LockedPackage, index: Any) -> None:
    """Refuses a conda archive whose `info/index.json` is not a mapping naming the entry's name, version
    and build."""
    if not isinstance(index, dict):
        raise LockFormatError(
            f"`{package.name}` {package.version}: info/index.json is not a JSON object",
            "the archive is malformed; nothing was installed",
        )
    found = tuple(str(index.get(key, "")) for key in ("name", "version", "build"))
    if found != (package.name, package.version, package.build or ""):
        raise _mismatch(
            "conda", f"{package.name} {package.version} {package.build}", "info/index.json", " ".join(found)
        )


def require_wheel_metadata(package_name: str, package_version: str, dist_info: str, metadata: str) -> None:
    """Refuses a wheel whose dist-info folder or METADATA names another project or version than the entry."""
    stated = f"{package_name} {package_version}"
    stem_name, _, stem_version = dist_info.removesuffix(".dist-info").partition("-")
    if normalize(stem_name) != normalize(package_name) or not same_version(stem_version, package_version):
        raise _mismatch("pip", stated, "dist-info folder", dist_info)
    from email.parser import HeaderParser  # a wheel's METADATA only: no resolve needs the email package

    headers = HeaderParser().parsestr(metadata, headersonly=True)
    name, version = headers.get("Name", ""), headers.get("Version", "")
    if normalize(str(name)) != normalize(package_name) or not same_version(str(version), package_version):
        raise _mismatch("pip", stated, "METADATA", f"{name} {version}")


def require_manifest_of(package: LockedPackage, manifest_name: str, manifest_version: str) -> None:
    """Refuses a kept manifest (found by the pinned hash) that was read from another name or version."""
    if package.manager == "conda":
        same = manifest_name == package.name and manifest_version == package.version
    else:
        same = normalize(manifest_name) == normalize(package.name) and same_version(manifest_version, package.version)
    if not same:
        raise _mismatch(
            package.manager,
            f"{package.name} {package.version}",
            "manifest (read from the file itself)",
            f"{manifest_name} {manifest_version}",
        )
