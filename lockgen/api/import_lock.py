"""Use case `lockgen import`: another tool's lock becomes a lockgen lock (pip and conda entries, every
platform, hashes kept), a starting point for teams that bring what they have. A uv.lock is read with the
settings of its workspace's pyproject.toml (`--project`, else the one beside the lock).

A wheel a PyPI lock (uv.lock, pylock.toml) chose without a sha256 is looked up on the index its package came
from: the sha256 that index's page lists for the file of exactly that name pins it. Where the page cannot be
read or gives none, the import fails naming those packages, unless `allow_partial` (`--allow-partial`), which
locks the rest and records them as left out."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from lockgen.adapters.atomic_files import write_atomic
from lockgen.adapters.foreign.foreign_locks import read_foreign
from lockgen.adapters.pypi.pypi_index import listed_hashes
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.adapters.lock.lockfile_yaml import checked_lock_text
from lockgen.adapters.foreign.uv_lock import UvChoices
from lockgen.core.credentials import scrub_url
from lockgen.core.lock.lock_builder import LockgenMeta, imported_lock
from lockgen.core.stack.stack_layout import default_lock_path
from lockgen.model.names import shown
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.results import ImportNotes


def import_lock(
    source: Path,
    target: str,
    environment: str | None = None,
    out: Path | None = None,
    uv: UvChoices = UvChoices(),
    project: Path | None = None,
    allow_partial: bool = False,
) -> tuple[Path, Lock]:
    """Converts `source` and writes it to `out` (default `locks/<target>.conda-lock.yml`); `uv` says what
    `uv sync` would be told (Python, extras, groups, root) for a uv.lock, `project` where its pyproject is;
    `allow_partial` locks the rest where a wheel without a sha256 finds none on its index."""
    with _no_cycle_collection():
        return _import(source, target, environment, out, uv, project, allow_partial)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """CPython's cycle collector paused while a lock is converted: the parsed file, the graph and the entries are
    millions of containers without cycles, which each collection walked again (a quarter of a 30k-package
    uv.lock's import: 12.3 against 9.1 s CPU). Garbage left meanwhile is collected once it runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _import(
    source: Path,
    target: str,
    environment: str | None,
    out: Path | None,
    uv: UvChoices,
    project: Path | None,
    allow_partial: bool,
) -> tuple[Path, Lock]:
    imported = read_foreign(source, environment, uv, project)
    if imported.unhashed:
        pinned, left_out = _pinned_from_index(imported.unhashed)
        if left_out and not allow_partial:
            first, why = left_out[0]
            raise UserError(
                f"`{source}` gives no sha256 for {_named(left_out)}, nor does an index: {first.left_out(why)}",
                "import with --allow-partial to lock the rest without them (recorded as left out), or lock again "
                "where the index serves hashes",
            )
        lines = tuple(wheel.left_out(why) for wheel, why in left_out)
        imported = replace(imported, packages=imported.packages + pinned, skipped=imported.skipped + lines, unhashed=())
    if not imported.packages:
        raise UserError(
            f"`{source}` holds no package for a Linux platform lockgen locks",
            "check --environment (pixi), or --python, --extra and --group (uv.lock)",
        )
    if not any(platform.startswith("linux-") for platform in imported.platforms):
        raise UserError(
            f"`{source}` holds no Linux platform (it has {', '.join(imported.platforms)})"
            + (f" in environment `{environment}`" if environment else ""),
            "lock it for linux-64 or linux-aarch64 too (pixi: [workspace] platforms; conda-lock: -p linux-64)",
        )
    packages = _once_each(imported.packages, source)
    lock = imported_lock(
        target,
        source.name,
        imported.format,
        imported.sha256,
        environment,
        imported.skipped,
        imported.channels,
        imported.platforms,
        packages,
        imported.virtual_packages,
        imported.assumed,
        imported.python,
    )
    path = out or default_lock_path(target)
    write_atomic(
        path,
        checked_lock_text(
            lock,
            f"imported from {source}",
            "the foreign lock holds this value: correct it there (or lock again with its own tool) and import again",
        ),
    )
    return path, lock


def _pinned_from_index(
    wheels: Sequence[UnhashedWheel],
) -> tuple[tuple[LockedPackage, ...], list[tuple[UnhashedWheel, str]]]:
    """The wheels whose index lists a sha256 for a file of exactly their name, pinned by it; and the others, each
    with why it has none. Each index page is read once."""
    pages: dict[tuple[str, str], dict[str, str] | LookupError] = {}
    pinned: list[LockedPackage] = []
    left_out: list[tuple[UnhashedWheel, str]] = []
    for wheel in wheels:
        if not wheel.index:
            left_out.append((wheel, "it comes from a direct URL, which no index lists"))
            continue
        key = (wheel.index, wheel.name)
        if key not in pages:
            try:
                pages[key] = listed_hashes(wheel.name, wheel.index)
            except LookupError as exc:
                pages[key] = exc
        page = pages[key]
        if isinstance(page, LookupError):
            left_out.append((wheel, str(page)))
        elif wheel.filename in page:
            pinned.append(wheel.locked(page[wheel.filename]))
        else:
            left_out.append((wheel, f"its index {scrub_url(wheel.index)} lists no sha256 for a file of that name"))
    return tuple(pinned), left_out


def _named(left_out: Sequence[tuple[UnhashedWheel, str]]) -> str:
    """The packages left out, once each (a package is left out on each platform)."""
    names = list(dict.fromkeys(wheel.name for wheel, _ in left_out))
    return ", ".join(f"`{name}`" for name in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _once_each(packages: Sequence[LockedPackage], source: Path) -> list[LockedPackage]:
    """Each package once per platform: an entry listed again as it is (an @EXPLICIT file naming an archive twice)
    is kept once, as conda installs it once; two entries of one name that differ (versions, builds) are refused."""
    kept: dict[tuple[str, str, str], LockedPackage] = {}
    for package in packages:
        key = (package.platform, package.manager, package.name)
        first = kept.setdefault(key, package)
        if first is not package and (first.version, first.build, first.url, first.hash) != (
            package.version,
            package.build,
            package.url,
            package.hash,
        ):
            one, other = _told_apart(first, package)
            raise LockFormatError(
                f"`{source}` holds {package.name} twice for {package.platform} ({one} and {other})",
                "name one with --python, --extra or --group (uv.lock), or keep one line of it",
            )
    return list(kept.values())


def _told_apart(first: LockedPackage, second: LockedPackage) -> tuple[str, str]:
    """What tells two entries of one package apart, in words: their versions and builds, else their URLs' file
    names, else their URLs, else the start of their hashes (one version from two places, or with two digests)."""
    pair = (first, second)
    if (first.version, first.build) != (second.version, second.build):
        said = [p.version + (f" {p.build}" if p.build else "") for p in pair]
    elif first.url.rsplit("/", 1)[-1] != second.url.rsplit("/", 1)[-1]:
        said = [f"{p.version} from {shown(scrub_url(p.url).rsplit('/', 1)[-1], 80)}" for p in pair]
    elif first.url != second.url:
        said = [f"{p.version} from {shown(scrub_url(p.url), 120)}" for p in pair]
    else:
        said = [f"{p.version} with sha256 {(p.hash.sha256 or '-')[:12]}, md5 {(p.hash.md5 or '-')[:12]}" for p in pair]
    return said[0], said[1]


def import_notes(lock: Lock) -> ImportNotes:
    """The format, the skipped entries and the assumptions an imported lock records."""
    meta = LockgenMeta(lock)
    return ImportNotes(meta.imported_format, meta.import_skipped, meta.assumed)
