"""Use case `lockgen import`: another tool's lock becomes a lockgen lock (pip and conda entries, every
platform, hashes kept), a starting point for teams that bring what they have. A uv.lock is read with the
settings of its workspace's pyproject.toml (`--project`, else the one beside the lock). Each format takes its own
options (`ImportOptions`); one given to a format that does not take it is refused (`adapters/foreign`).

A wheel a lock (uv.lock, pylock.toml, pixi.lock, conda-lock) chose without a sha256 is looked up on the index its
package came from (where the lock names none per package, on those its reader gives, in turn): the sha256 that
index's page lists for the file of exactly that name pins it. Where no page can be read or gives one, the import
fails naming those packages, unless `allow_partial` (`--allow-partial`), which locks the rest and records them as
left out."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_pieces_atomic
from lockgen.adapters.foreign.foreign_locks import read_foreign
from lockgen.adapters.pypi.pypi_index import IndexedWheel, listed_hashes
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.adapters.lock.lockfile_yaml import checked_lock_pieces
from lockgen.core.credentials import scrub_url
from lockgen.core.lock.lock_builder import LockgenMeta, imported_lock
from lockgen.core.stack.stack_layout import default_lock_path
from lockgen.model.names import shown
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.requests import ImportOptions
from lockgen.model.results import ImportNotes


def import_lock(
    source: Path, target: str, out: Path | None = None, options: ImportOptions = ImportOptions()
) -> tuple[Path, Lock]:
    """Converts `source` and writes it to `out` (default `locks/<target>.conda-lock.yml`); `options` are what the
    import was told for the file's format (a uv.lock's: what `uv sync` would be told, and where its pyproject is);
    `options.allow_partial` locks the rest where a wheel without a sha256 finds none on its index."""
    with _no_cycle_collection():
        return _import(source, target, out, options)


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


def _import(source: Path, target: str, out: Path | None, options: ImportOptions) -> tuple[Path, Lock]:
    path = out or default_lock_path(target)
    check_writable(path, f"the lock {path}", WRITABLE_HINT, file=True)  # before the conversion and any index asked
    imported = read_foreign(source, options)
    if imported.unhashed:
        pinned, left_out = _pinned_from_index(imported.unhashed)
        if left_out and not options.allow_partial:
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
            + (f" in environment `{options.environment}`" if options.environment else ""),
            "lock it for linux-64 or linux-aarch64 too (pixi: [workspace] platforms; conda-lock: -p linux-64)",
        )
    packages = _once_each(imported.packages, source)
    lock = imported_lock(
        target,
        source.name,
        imported.format,
        imported.sha256,
        options.environment,
        imported.skipped,
        imported.channels,
        imported.platforms,
        packages,
        imported.virtual_packages,
        imported.assumed,
        imported.python,
    )
    write_pieces_atomic(
        path,
        checked_lock_pieces(
            lock,
            f"imported from {source}",
            "the foreign lock holds this value: correct it there (or lock again with its own tool) and import again",
        ),
    )
    return path, lock


def _pinned_from_index(
    wheels: Sequence[UnhashedWheel],
) -> tuple[tuple[LockedPackage, ...], list[tuple[UnhashedWheel, str]]]:
    """The wheels whose index lists a sha256 for a file of exactly their name at exactly their URL, pinned by it;
    and the others, each with why it has none. A wheel's indexes are asked in turn (a pixi.lock names its
    environment's, not each package's): the first that lists the file pins it; one listing a file of that name at
    another URL pins nothing (the hash is of a file the lock does not fetch). Each index page is read once."""
    pages: dict[tuple[str, str], dict[str, IndexedWheel] | LookupError] = {}
    pinned: list[LockedPackage] = []
    left_out: list[tuple[UnhashedWheel, str]] = []
    for wheel in wheels:
        if not wheel.indexes:
            left_out.append((wheel, wheel.unindexed))
            continue
        listed, unread, elsewhere, unread_count = None, None, None, 0
        for index in wheel.indexes:
            key = (index, wheel.name)
            if key not in pages:
                try:
                    pages[key] = listed_hashes(wheel.name, index)
                except LookupError as exc:
                    pages[key] = exc
            page = pages[key]
            if isinstance(page, LookupError):
                unread, unread_count = unread or page, unread_count + 1
            elif wheel.filename in page and _same_file(page[wheel.filename].url, wheel.url):
                listed = page[wheel.filename].sha256
                break
            elif wheel.filename in page:
                elsewhere = elsewhere or page[wheel.filename].url
        if listed is not None:
            pinned.append(wheel.locked(listed))
        elif unread is not None and unread_count == len(wheel.indexes):  # none could be read: none said no
            named = ", ".join(scrub_url(index) for index in wheel.indexes)
            left_out.append(
                (wheel, str(unread) if unread_count == 1 else f"none of its indexes ({named}) could be read; {unread}")
            )
        else:
            left_out.append((wheel, _none_lists(wheel.indexes, unread, elsewhere)))
    return tuple(pinned), left_out


def _same_file(listed: str, locked: str) -> bool:
    """Whether the URL an index lists a file at is the lock's URL of it (any `#fragment` aside)."""
    return listed.partition("#")[0] == locked.partition("#")[0]


def _none_lists(indexes: Sequence[str], unread: LookupError | None, elsewhere: str | None) -> str:
    """Why none of a wheel's indexes pinned it, naming them (the first that could not be read, and the first URL
    other than the lock's where one lists a file of that name)."""
    other = f"; a file of that name is listed at {scrub_url(elsewhere)}, not at the lock's URL" if elsewhere else ""
    if len(indexes) == 1:
        return f"its index {scrub_url(indexes[0])} lists no sha256 for a file of that name at that URL{other}"
    named = ", ".join(scrub_url(index) for index in indexes)
    lists = f"none of its indexes ({named}) lists a sha256 for a file of that name at that URL{other}"
    return lists + (f"; {unread}" if unread else "")


def _named(left_out: Sequence[tuple[UnhashedWheel, str]]) -> str:
    """The packages left out, once each (a package is left out on each platform)."""
    names = list(dict.fromkeys(wheel.name for wheel, _ in left_out))
    return ", ".join(f"`{name}`" for name in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _once_each(packages: Sequence[LockedPackage], source: Path) -> list[LockedPackage]:
    """Each package once per platform: an entry listed again as it is (an @EXPLICIT file naming an archive twice)
    is kept once, as conda installs it once; two entries of one name that differ (versions, builds) are refused.
    Where the entries come in the lock's order (a uv.lock's do), an entry listed again follows its first, so only
    the last kept is compared (a table of every entry, 600k at 300k packages, was the peak of the import's last
    phase); from the first entry out of that order on, each is looked up among all kept before it."""
    kept: list[LockedPackage] = []
    firsts: dict[tuple[str, str, str], LockedPackage] | None = None  # made at the first entry out of order
    for package in packages:
        key = (package.platform, package.manager, package.name)
        if firsts is None and kept and package.sort_key() < kept[-1].sort_key():
            firsts = {}
            for earlier in kept:
                firsts.setdefault((earlier.platform, earlier.manager, earlier.name), earlier)
        if firsts is None:
            last = kept[-1] if kept else None
            first = last if last is not None and (last.platform, last.manager, last.name) == key else package
        else:
            first = firsts.setdefault(key, package)
        if first is package:
            kept.append(package)
        elif (first.version, first.build, first.url, first.hash) != (
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
    return kept


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
