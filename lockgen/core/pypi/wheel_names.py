"""Wheel file names and project names: PEP 503 name normalisation, the binary distribution format's
`{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`, choosing, among a release's wheels, the one
an installed distribution came from (its `WHEEL` tags and build tag), and the one an installer would
install on a target (CPython X.Y on manylinux of a glibc and machine).

The installer's choice follows the order of the platform compatibility tags specification, as
`packaging.tags.sys_tags` yields it for CPython: `cpXY-cpXY-PLAT`, `cpXY-abi3-PLAT`, `cpXY-none-PLAT`, the
older `abi3` versions, `pyXY`/`pyX`/older `py3V-none-PLAT`, `cpXY-none-any`, then `pyXY`/`pyX`/older
`py3V-none-any`; PLAT from the newest manylinux the glibc allows down to `manylinux_2_5`, then `linux`. uv
lists every compatible wheel of a release in pylock.toml, in file-name order, so the first listed is often
not the one to install (`multiprocess`'s `py310` wheel before its `py312` one on Python 3.12).

A wheel whose `WHEEL` says `linux_<arch>` may be published under a `manylinux*_<arch>` file name: torch's
wheels are renamed, not retagged (torch 2.5.1's `manylinux1_x86_64` wheel says `cp312-cp312-linux_x86_64`).
When no file name covers the installed tags, such a manylinux file of the same python and abi counts; the
conformance check that follows proves or refutes the choice from the file's own RECORD.

Versions are compared as written (lowercased): installers write the normalised PEP 440 form into both
METADATA and wheel names, and lockgen takes on no version library for this one comparison.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple
from urllib.parse import unquote

from lockgen.core.env.wheel_files import expand_tags
from lockgen.model.names import shown
from lockgen.errors import UserError
from lockgen.model.names import normalize

_BUILD = re.compile(r"^\d\w*$")


class WheelName(NamedTuple):
    """A parsed wheel file name; `tags` is the expanded tag set. A named tuple: a frozen dataclass set each field
    through `object.__setattr__`, a third of a parse (a 300k-package uv.lock's import parses 1.8 million names)."""

    filename: str
    name: str
    version: str
    build: str | None
    tags: frozenset[str]


def wheel_file_name(url: str) -> str:
    """A wheel's file name as its URL ends, decoded (`torch-2.7.0%2Bcu128-…whl` is `torch-2.7.0+cu128-…whl`):
    PEP 751's `name` of a wheel, and what installers compare with the wheel's tags and version."""
    return unquote(url.split("#", 1)[0].rsplit("/", 1)[-1])


@functools.lru_cache(maxsize=256)
def parse_wheel_filename(filename: str) -> WheelName:
    """The parts of `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`; the last few names parsed are kept
    (read, never changed): a lock's import chooses among a release's wheels once for each platform in turn."""
    if not filename.endswith(".whl") or "/" in filename:
        raise UserError(f"`{shown(filename)}` is not a wheel file name", "wheel names end in .whl")
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6) or not all(parts[:2]) or (len(parts) == 6 and not _BUILD.fullmatch(parts[2])):
        raise UserError(
            f"`{shown(filename)}` is not name-version(-build)-python-abi-platform.whl",
            "see the binary distribution format specification",
        )
    return WheelName(
        filename, parts[0], parts[1], parts[2] if len(parts) == 6 else None, _tag_set("-".join(parts[-3:]))
    )


@functools.lru_cache(maxsize=4096)
def _tag_set(compressed: str) -> frozenset[str]:
    """A compressed tag triple's set, built once per triple: the releases of a lock share a few dozen of them."""
    return frozenset(expand_tags(compressed))


@functools.lru_cache(maxsize=4096)
def _modern_tags(tags: frozenset[str]) -> frozenset[str]:
    """The tags with legacy manylinux aliases written as PEP 600 names, once per tag set."""
    return frozenset("-".join((*t.split("-")[:2], _platform_tag(t.split("-")[2]))) for t in tags)


def covers(wheel: WheelName, name: str, version: str, tags: tuple[str, ...], build: str | None = None) -> bool:
    """Whether `wheel` is a file of `name==version` whose tag set holds every tag in `tags` (and the build tag,
    when one is given)."""
    return (
        normalize(wheel.name) == normalize(name)
        and wheel.version.lower() == version.lower()
        and set(tags) <= wheel.tags
        and (build is None or wheel.build == build)
    )


def _renamed_linux(tag: str, wheel_tags: frozenset[str]) -> bool:
    python, abi, platform = tag.split("-")
    if not platform.startswith("linux_"):
        return False
    arch = platform.removeprefix("linux_")
    return any(
        re.fullmatch(rf"{re.escape(python)}-{re.escape(abi)}-manylinux[0-9_]*_{re.escape(arch)}", t) for t in wheel_tags
    )


def _renamed(wheel: WheelName, name: str, version: str, tags: tuple[str, ...], build: str | None) -> bool:
    return covers(wheel, name, version, (), build) and all(
        t in wheel.tags or _renamed_linux(t, wheel.tags) for t in tags
    )


def choose(
    wheels: list[WheelName], name: str, version: str, tags: tuple[str, ...], build: str | None = None
) -> WheelName:
    """The one wheel of `name==version` an installed distribution with these tags came from; a wheel whose
    tags equal `tags` is preferred to one that only holds them."""
    fitting = sorted((w for w in wheels if covers(w, name, version, tags, build)), key=lambda w: w.filename)
    exact = [w for w in fitting if w.tags == set(tags)]
    chosen = (
        exact
        or fitting
        or sorted((w for w in wheels if _renamed(w, name, version, tags, build)), key=lambda w: w.filename)
    )
    tag_text = ", ".join(tags) or "no tags"
    if not chosen:
        raise UserError(
            f"no wheel of {name}=={version} covers the installed tags {tag_text}",
            "the index may not hold the file this distribution was installed from (a local build?)",
        )
    if len(chosen) > 1:
        raise UserError(
            f"{len(chosen)} wheels of {name}=={version} cover the tags {tag_text}: "
            + ", ".join(w.filename for w in chosen),
            "name the build tag of the installed WHEEL",
        )
    return chosen[0]


_LEGACY_MANYLINUX = {
    "manylinux1": "manylinux_2_5",
    "manylinux2010": "manylinux_2_12",
    "manylinux2014": "manylinux_2_17",
}


def _platform_tag(tag: str) -> str:
    """`manylinux2014_x86_64` as `manylinux_2_17_x86_64` (the legacy aliases of PEP 600)."""
    for legacy, modern in _LEGACY_MANYLINUX.items():
        if tag.startswith(f"{legacy}_"):
            return modern + tag[len(legacy) :]
    return tag


def glibc_floor(tags: frozenset[str]) -> str | None:
    """The oldest glibc (`2.NN`) any of a wheel's tags installs on: its lowest manylinux, None for none."""
    found = [
        int(m.group(1))
        for tag in tags
        if (m := re.search(r"-manylinux_2_(\d+)_", "-" + _platform_tag(tag.split("-")[-1])))
    ]
    return f"2.{min(found)}" if found else None


def target_tags(python: str, machine: str, glibc: str) -> list[str]:
    """The tags CPython `python` (X.Y) on linux `machine` with `glibc` (2.NN) installs, most preferred first."""
    major, minor = (int(part) for part in python.split(".")[:2])
    glibc_minor = int(glibc.split(".")[1])
    platforms = [f"manylinux_2_{g}_{machine}" for g in range(glibc_minor, 4, -1)] + [f"linux_{machine}"]
    cp = f"cp{major}{minor}"
    tags = [f"{cp}-{abi}-{plat}" for abi in (cp, "abi3", "none") for plat in platforms]
    tags += [f"cp{major}{v}-abi3-{plat}" for v in range(minor - 1, 1, -1) for plat in platforms]
    versions = [f"{major}{minor}", f"{major}"] + [f"{major}{v}" for v in range(minor - 1, -1, -1)]
    tags += [f"py{v}-none-{plat}" for v in versions for plat in platforms]
    return tags + [f"{cp}-none-any"] + [f"py{v}-none-any" for v in versions]


@functools.lru_cache(maxsize=64)
def _rank(python: str, machine: str, glibc: str) -> dict[str, int]:
    """Each tag of `target_tags` and its place: built once per target, not once per release (a 300k-package
    import asks for the same few targets 600k times). Read, never changed."""
    return {tag: number for number, tag in enumerate(target_tags(python, machine, glibc))}


def best_for_target(filenames: list[str], python: str, machine: str, glibc: str) -> str | None:
    """Of a release's wheel files, the one an installer picks for the target (earliest tag in `target_tags`,
    then the highest build number, then the file name); None when none fits. A name that is no wheel name
    is passed over."""
    scored = []
    for filename in filenames:
        try:
            wheel = parse_wheel_filename(filename)
        except UserError:
            continue
        best = _best_rank(wheel.tags, python, machine, glibc)
        if best is not None:
            number = re.match(r"\d+", wheel.build) if wheel.build else None  # PEP 427: a build tag starts with a digit
            build = int(number.group()) if number else -1
            scored.append((best, -build, filename))
    return min(scored)[2] if scored else None


@functools.lru_cache(maxsize=4096)
def _best_rank(tags: frozenset[str], python: str, machine: str, glibc: str) -> int | None:
    """The place in `target_tags` of a tag set's earliest tag (None when none fits), once per tag set and target:
    a lock's wheels share a few dozen tag sets."""
    rank = _rank(python, machine, glibc)
    return min((rank[t] for t in _modern_tags(tags) if t in rank), default=None)
