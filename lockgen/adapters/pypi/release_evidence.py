"""Evidence from an index about torch releases newer than the facts: the PEP 691 project page (versions,
platform tags, PEP 700 upload times) and, for the newest patch of each newer minor release, one wheel's
METADATA for the platform (its PEP 658 file, else read by range requests), kept in the download cache
under the wheel's sha256 (an index's files are immutable), so a second resolve reads only the page.

And what any torch source serves (the stack's index, PyPI, or a PyTorch variant index `…/whl/cu126`): the newest
patch of each minor release with a wheel for the platform and Python, of that source's builds (PyPI's carry no
local version, a variant index's `+cu126`), uploaded before the cut-off (a file without an upload time is kept out
under a cut-off, as uv keeps it out). Both read a project page the caller has read once (`torch_page`); such pages
may be PEP 503 HTML."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

from packaging.version import InvalidVersion, Version

from lockgen.adapters import home
from lockgen.adapters.pypi import pypi_index, wheel_record
from lockgen.adapters.atomic_files import write_atomic
from lockgen.core.gpu.versions import as_tuple
from lockgen.core.pypi.wheel_names import WheelName, glibc_floor, parse_wheel_filename
from lockgen.errors import UserError
from lockgen.model.facts import ReleaseEvidence, ServedRelease
from lockgen.model.names import MACHINE_OF_PLATFORM

MAX_RELEASES = 6  # newer minor releases read per platform: bounded work on an index that lists many
_REQUIRES = re.compile(r"^Requires-Dist:\s*(.+)$", re.MULTILINE)


def cutoff_of(exclude_newer: dt.date | dt.datetime | None) -> dt.datetime | None:
    """A stack's `exclude-newer` as a UTC moment (a date means its midnight, as uv reads it)."""
    if exclude_newer is None:
        return None
    if not isinstance(exclude_newer, dt.datetime):
        return dt.datetime.combine(exclude_newer, dt.time(), tzinfo=dt.timezone.utc)
    return exclude_newer if exclude_newer.tzinfo else exclude_newer.replace(tzinfo=dt.timezone.utc)


def _uploaded_before(uploaded: str | None, cutoff: dt.datetime | None) -> bool:
    if cutoff is None:
        return True
    if uploaded is None:
        return False  # an index without upload times cannot show a file is older than the cut-off
    try:
        moment = dt.datetime.fromisoformat(uploaded.replace("Z", "+00:00"))
    except ValueError:
        return False
    return moment < cutoff


def _fits(tags: frozenset[str], platform: str, python: str | None) -> bool:
    machine = MACHINE_OF_PLATFORM[platform]
    wanted = f"cp{python.replace('.', '')}" if python else None
    return any(
        re.fullmatch(r"(cp3\d+)-(cp3\d+t?|abi3)-(manylinux[0-9_]*|linux)_" + re.escape(machine), tag)
        and (wanted is None or tag.startswith(f"{wanted}-"))
        for tag in tags
    )


def _metadata(wheel: pypi_index.IndexedWheel) -> str:
    """A wheel's METADATA, kept under its sha256 (a file the page gives no hash of is read each time)."""
    cached = home.cache_dir() / "wheel-metadata" / f"{wheel.sha256}.METADATA"
    if wheel.sha256 and cached.is_file():
        return cached.read_text(encoding="utf-8")
    text = wheel_record.read_metadata_url(wheel.url, wheel.metadata)
    if wheel.sha256:
        write_atomic(cached, text)
    return text


def torch_page(index: str) -> dict[str, pypi_index.IndexedWheel]:
    """Every wheel file an index lists for torch (PEP 691 JSON, or PEP 503 HTML as download.pytorch.org serves)."""
    return pypi_index.project_wheels("torch", index, html=True)


def newer_releases(
    page: dict[str, pypi_index.IndexedWheel],
    platform: str,
    python: str | None,
    newer_than: tuple[int, int],
    cutoff: dt.datetime | None,
) -> tuple[ReleaseEvidence, ...]:
    """The newest patch of each minor release on a project `page` newer than `newer_than` with a wheel for the
    platform (and `python`'s tag) uploaded before `cutoff`, each with its METADATA's requirements."""
    by_minor: dict[tuple[int, int], tuple[Version, pypi_index.IndexedWheel]] = {}
    for wheel, parsed, version in _final_wheels(page):
        if version.local:
            continue
        minor = (version.major, version.minor)
        if (
            minor <= newer_than
            or not _fits(parsed.tags, platform, python)
            or not _uploaded_before(wheel.uploaded, cutoff)
        ):
            continue
        if minor not in by_minor or version > by_minor[minor][0]:
            by_minor[minor] = (version, wheel)
    found = []
    for minor in sorted(by_minor)[:MAX_RELEASES]:
        version, wheel = by_minor[minor]
        requires = tuple(m.strip() for m in _REQUIRES.findall(_metadata(wheel)))
        found.append(
            ReleaseEvidence(
                torch=str(version), platform=platform, wheel=wheel.filename, requires=requires, uploaded=wheel.uploaded
            )
        )
    return tuple(found)


def _final_wheels(
    page: dict[str, pypi_index.IndexedWheel],
) -> Iterator[tuple[pypi_index.IndexedWheel, WheelName, Version]]:
    """Each wheel of a page, by file name, that names a final release (no pre-, dev- or yanked release), with
    its parsed file name and version; a file whose name or version does not parse is passed over."""
    for filename, wheel in sorted(page.items()):
        try:
            parsed = parse_wheel_filename(filename)
            version = Version(parsed.version)
        except (UserError, InvalidVersion):
            continue
        if not (version.is_prerelease or version.is_devrelease or wheel.yanked):
            yield wheel, parsed, version


def cuda_variants(page: dict[str, pypi_index.IndexedWheel]) -> tuple[str, ...]:
    """The CUDA variants (`cu126`, `cu130`: local versions) a project page has final releases of, sorted."""
    return tuple(
        sorted(
            {
                str(version.local)
                for _, _, version in _final_wheels(page)
                if version.local and re.fullmatch(r"cu\d{3,4}", str(version.local))
            }
        )
    )


def served_releases(
    page: dict[str, pypi_index.IndexedWheel],
    local: str | None,
    platform: str,
    python: str | None,
    cutoff: dt.datetime | None,
) -> tuple[ServedRelease, ...]:
    """The torch releases a source's `page` serves for the platform, its builds being those of local version
    `local` (`cu126` on a variant index, None on PyPI): the newest patch of each minor, oldest first, its wheel
    with the oldest glibc floor; and each release it has builds of for the platform but none kept, with why
    (`python`: none for that Python; `exclude-newer`: none uploaded before the cut-off)."""
    kept: dict[tuple[int, int], tuple[Version, str, str | None]] = {}
    out: dict[tuple[int, int], tuple[Version, str]] = {}
    for wheel, parsed, version in _final_wheels(page):
        if version.local != local or not _fits(parsed.tags, platform, None):
            continue
        minor = (version.major, version.minor)
        why = (
            "python"
            if not _fits(parsed.tags, platform, python)
            else "exclude-newer"
            if not _uploaded_before(wheel.uploaded, cutoff)
            else ""
        )
        if why:
            if why == "exclude-newer" or minor not in out:
                out[minor] = (max(version, out.get(minor, (version, ""))[0]), why)
            continue
        floor = glibc_floor(parsed.tags)
        best = kept.get(minor)
        if (
            best is None
            or version > best[0]
            or (version == best[0] and as_tuple(floor or "0") < as_tuple(best[2] or "0"))
        ):
            kept[minor] = (version, wheel.filename, floor)
    found = [
        ServedRelease(torch=str(v), release=f"{m[0]}.{m[1]}", wheel=name, glibc=floor)
        for m, (v, name, floor) in kept.items()
    ]
    found += [
        ServedRelease(torch=str(v), release=f"{m[0]}.{m[1]}", wheel="", excluded=why)
        for m, (v, why) in out.items()
        if m not in kept
    ]
    return tuple(sorted(found, key=lambda r: as_tuple(r.release)))
