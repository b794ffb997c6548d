"""A step below the use cases (materialize, export): the locked wheels installed by uv from lockgen's wheel
store and every installed file proven against its wheel's RECORD (bound to the sha256 the lock pins), or, into a
fresh venv, placed by lockgen itself as uv placed them before (`wheel_links`: what uv's install added, kept once it
was proven; placed again in one pass, each store file checked against its proof before its link and the link after,
any doubt leaving the venv to uv).

A file is read only when it is not a link to a store file proven before with its fingerprint unchanged
(`wheel_store`): hash once, then trust fingerprints; `verify` hashes every file (and never places). What was hashed
and matched is recorded as proven for the next install. A file that differs is refused, and its wheel's proof
dropped. After uv, the tree is walked once: that walk's lstat of each file is what its proof compares, and the
caller's checks and manifest take the same walk (nothing changes the tree in between); after lockgen's own
placing, the tree is what the pass saw (the venv's walk, each new link's lstat, each written file's), and where an
earlier environment placed from the same placement passed, its kept manifest entries vouch for the RECORDs'
agreement and the unstated check of the placement's files (`placed_entries`): none is read again."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple, NoReturn

from lockgen.adapters import parallel
from lockgen.adapters.proof import store_scrub
from lockgen.adapters.pypi import placed_entries, wheel_links, wheel_store
from lockgen.adapters.store import env_manifest, installers
from lockgen.core.env.conformance import ExpectedPackage
from lockgen.errors import LockFormatError, ToolFailedError
from lockgen.model.lock import LockedPackage
from lockgen.model.names import shown

Meter = Callable[[str, int, int], None]
# how uv --offline says its cache lacked what it needed: the last line of its error (uv 0.13: the hint), or the cause
OFFLINE_MISSES = ("the network was disabled", "Network connectivity is disabled")


def _sha256_of(package: LockedPackage) -> str:
    """The sha256 a wheel is installed by (uv's --require-hashes takes no md5)."""
    if package.hash.sha256 is None:
        raise LockFormatError(
            f"pip entry `{package.name}` {package.version} is pinned by md5 alone",
            "re-create the lock so every wheel pins a sha256 (PyPI publishes one for every file)",
        )
    return package.hash.sha256


@dataclass(frozen=True)
class Installed:
    """The wheels of a lock installed and proven: what each one's RECORD places (in the lock's order), the proven
    sha256 of every file they state (prefix-relative path -> sha256), and the walk of the tree taken right after
    uv ran (what the proof compared)."""

    placed: list[ExpectedPackage]
    proven: dict[str, str]
    tree: env_manifest.Tree
    # of a placement lockgen made: its files' manifest entries kept by the last environment made from it (None: none
    # kept), and what writes them aside from this environment's (`env_manifest.built`'s `entries`) where none were
    entries: env_manifest.Entries | None = None
    keep_entries: Callable[[env_manifest.Entries], None] | None = None
    # the paths whose RECORD agreement and unstated check the kept entries vouch for (`placed` and `proven` then hold
    # none of them: the caller's unstated check looks at the rest), and what keeps the entries written aside once this
    # environment passed its checks
    vouched: Collection[str] = ()
    vouch: Callable[[], None] | None = None


def _install(
    pip: list[LockedPackage], python: Path, progress: Callable[[str], None], stored: bool, placing: Callable[[], None]
) -> None:
    """uv's install of the wheels from lockgen's store: without a request when every wheel was installed from it
    before (`stored`): uv would otherwise revalidate each cached wheel whose index sent no lasting cache
    headers, and fail when that index is gone, although the locked bytes are in the store; anything not
    cached after all (the store was cleaned) is fetched by a second run with the index. `placing` runs once."""
    if stored:
        try:
            return installers.install_pip(pip, python, progress, wheel_store.uv_environment(), placing, offline=True)
        except ToolFailedError as exc:
            if not any(
                miss in exc.message for miss in OFFLINE_MISSES
            ):  # a hash refused, a full disk, a timeout: said as they are
                raise
            progress("a wheel is no longer in lockgen's store: installing with the index")
            return installers.install_pip(pip, python, progress, wheel_store.uv_environment())
    installers.install_pip(pip, python, progress, wheel_store.uv_environment(), placing)


def _refuse(
    wrong: list[tuple[str, str]],
    pins: list[str],
    expected: list[ExpectedPackage],
    infos: env_manifest.Walked,
    prefix: Path,
    progress: Callable[[str], None],
) -> NoReturn:
    """Refuses installed files that differ from their wheel's RECORD (`wrong`: package key, path). A wheel whose
    proof named a changed file's inode had its store folder damaged after it was proven: the folder is moved
    into the quarantine (uv fetches the wheel again, against its locked hash, on the next materialize) and the
    environments sharing the damaged files are named, each with the command that makes it again. A file never
    proven is refused as before (the wheel's own RECORD may be wrong: fetching it again would not help). The proofs
    of the wheels refused are dropped either way."""
    quarantined: list[str] = []
    for pin, placed in zip(pins, expected):
        paths = [path for key, path in wrong if key == placed.key]
        if not paths:
            continue
        inodes = {(infos[path].st_dev, infos[path].st_ino) for path in paths if path in infos}
        folder = wheel_store.proven_folder(pin, inodes)
        wheel_store.forget(pin)
        if folder is None or not folder.is_dir():
            continue
        site = posixpath.dirname(placed.dist_info) if placed.dist_info else ""
        relatives = [posixpath.relpath(path, site) if site else path for path in paths]
        for environment in store_scrub.sharing("wheel", inodes, relatives, besides=prefix):
            progress(
                f"{shown(str(environment.prefix), 400)} shares the damaged files; make it again: "
                f"{shown(environment.repair, 800)}"
            )
        quarantined.append(shown(str(store_scrub.quarantine(folder, "wheel")), 400))
        wheel_store.drop_entries(folder)
    first = f"{len(wrong)} installed files differ from their wheel's RECORD; first {wrong[0][0]}: {wrong[0][1]}"
    if quarantined:
        raise LockFormatError(
            f"{first}: lockgen's wheel store was damaged after it was proven; moved out to {', '.join(quarantined)}",
            "materialize (or unpack) again: the wheel is fetched again against its locked hash",
        )
    raise LockFormatError(
        first,
        f"lockgen's wheel store was changed: clear it (uv cache clean --cache-dir {wheel_store.cache_dir()}) and "
        "materialize again",
    )


def install_proven(
    pip: list[LockedPackage],
    place: Callable[[], list[ExpectedPackage]],
    prefix: Path,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    verify: bool = False,
    make_venv: Callable[[Callable[[], object]], None] | None = None,
    proven: Callable[[Installed], object] | None = None,
    python: str = "",
    whole: bool = False,
) -> Installed:
    """Installs the wheels `pip` into the venv at `prefix` (of Python `python`, X.Y) and proves every file they state;
    `place` gives the files each one's RECORD places (in the same order), worked out while uv installs. `make_venv`,
    when the venv is still to be made: makes it, doing the work it is given meanwhile (the store's fingerprints are
    checked while uv makes the venv; neither touches what the other does); into that fresh venv, wheels uv placed before
    are placed by lockgen itself where their kept placement holds (`wheel_links`), else uv installs them and what it
    placed is kept. `proven`: given what was installed once every file is proven and sealed, before the proofs are
    recorded for the next install (the caller starts its own work on the tree then, which the records do not change).
    `whole`: the tree the wheels leave is the environment (its record takes `Installed.entries`, its unstated check
    spares `Installed.vouched`): a placement whose entries an earlier environment kept, after it passed, is then placed
    without its wheels' RECORDs read again (`placed_entries.Vouched`)."""
    pins = [_sha256_of(package) for package in pip]
    work = _Work(pins, place)
    linkable = make_venv is not None and not verify and not wheel_links.by_uv()
    placement = wheel_links.key([(pin, package.url) for pin, package in zip(pins, pip)], python) if linkable else None
    with wheel_store.held():
        kept = wheel_links.kept(placement) if placement is not None else None
        with wheel_links.placing(kept, prefix) as placing:  # its folders made from now on, beside the venv
            planned = work.planned(kept) if kept is not None else None
            bound = placed_entries.binding(planned) if planned is not None and placement is not None else ""
            kept_entries: list[placed_entries.Vouched] = []

            def meanwhile() -> None:  # while uv makes the venv: kept entries or what the wheels place; or fingerprints
                if planned is None:
                    work.check(verify)
                    return
                vouched = placed_entries.kept(placement, planned, bound) if whole and placement else None
                if vouched is None:
                    work.placing()
                else:
                    kept_entries.append(vouched)

            if make_venv is not None:
                make_venv(meanwhile)
            else:
                meanwhile()
            # no link before the venv is made and is the one the placement was kept in: a pass dropped after its links
            # were made and removed again would leave their store files' ctime moved at the recorded link count
            holds = (
                planned is not None
                and wheel_links.made_in(planned.placement, prefix)
                and (bool(kept_entries) or work.agrees(planned))
            )
            if placing is not None:
                placing.link(planned if holds else None)
            placed = placing.finish(prefix) if placing is not None and holds else None
        if placed is not None and planned is not None and placement is not None:
            vouched = kept_entries[0] if kept_entries else None
            return _linked(work, _Kept(placement, bound, vouched), planned, placed, proven, progress)
        if planned is not None:  # a placement that did not hold: uv installs, on the fingerprints of now
            work.check(verify)
            if placing is not None:  # and on the pass's own checks of the files it linked before it was dropped
                work.trusted.update(placing.vouched())
        venv = env_manifest.scan_tree(prefix) if placement is not None else None  # what uv's install adds to
        installed, hashed = _installed(pip, work, prefix, progress, meter, proven)
        if placement is not None and venv is not None:
            _keep(placement, prefix, venv, work, installed)
    progress(
        f"installed {len(pip)} wheels with uv (every file against its RECORD: {hashed} hashed, "
        f"{len(work.stated) - hashed} proven before and unchanged)"
    )
    return installed


class _Work:
    """What an install of wheels works out besides the links: the files each wheel's RECORD places (`expected`, and
    each stated file's package key and sha256: `stated`) and the store files that stand (`trusted`)."""

    def __init__(self, pins: list[str], place: Callable[[], list[ExpectedPackage]]) -> None:
        self.pins, self._place = pins, place
        self.expected: list[ExpectedPackage] = []
        self.stated: dict[str, tuple[str, str]] = {}
        self.trusted: wheel_store.Trusted = {}

    def placing(self) -> None:
        """The files each wheel places, from the manifests alone (once: while uv links, or while the venv is made)."""
        if not self.expected:
            self.expected.extend(self._place())
            self.stated.update(
                {f.path: (package.key, f.sha256) for package in self.expected for f in package.files if f.sha256}
            )

    def check(self, verify: bool) -> None:
        """The store files whose fingerprint stands, before uv links (none with `verify`: every file is hashed)."""
        self.trusted = {} if verify else wheel_store.trusted(self.pins)

    def planned(self, kept: wheel_links.Placement) -> wheel_links.Plan | None:
        """A kept placement bound to the wheels' proofs of now, where it holds."""
        proofs = {pin: proof for pin in self.pins if (proof := wheel_store.proof_of(pin)) is not None}
        return wheel_links.plan(kept, proofs)

    def agrees(self, planned: wheel_links.Plan) -> bool:
        """Whether the plan places every file a wheel's RECORD states with the sha256 the RECORD gives it, and every
        file it states without one (its RECORD itself)."""
        self.placing()
        found = planned.found
        return all(found.get(path) == digest for path, (_, digest) in self.stated.items()) and all(
            file.path in found for package in self.expected for file in package.files
        )


class _Kept(NamedTuple):
    """A placement's key, the binding of its entries (`placed_entries.binding`) and the entries kept under it."""

    placement: str
    bound: str
    vouched: placed_entries.Vouched | None


def _linked(
    work: _Work,
    kept: _Kept,
    planned: wheel_links.Plan,
    placed: wheel_links.Placed,
    proven: Callable[[Installed], object] | None,
    progress: Callable[[str], None],
) -> Installed:
    """The wheels lockgen placed itself: the environment's tree is what the pass saw (its record takes the manifest
    entries of the placement's files kept by the last environment made from it, else writes them aside to be kept
    once this one passed), and each proof is renewed with the lstat of the links just made to its files (the link
    count and ctime they moved)."""
    vouched = kept.vouched
    if vouched is not None:  # the RECORDs' agreement and the unstated check of the placement's files: kept with them
        installed = Installed([], {}, placed.tree, vouched.entries, vouched=planned.found)
        stated, hashed = vouched.stated, vouched.hashed
    else:
        stated = len(work.stated)
        hashed = sum(1 for entry in planned.placement.written if entry.path in work.stated)
        keep = partial(placed_entries.keep, kept.placement, planned, kept.bound, stated, hashed)
        proven_sha256 = {path: digest for path, (_, digest) in work.stated.items()}
        vouch = partial(placed_entries.vouch, kept.placement)
        installed = Installed(work.expected, proven_sha256, placed.tree, None, keep, vouch=vouch)
    if proven is not None:
        proven(installed)
    for wheel, proof, start, end in planned.spans:
        wheel_store.renew(wheel, proof, placed.links[start:end])
    checked = (
        f"every file against its RECORD when the placement was first checked, kept with its entries: {stated} files"
        if vouched is not None
        else f"every file against its RECORD: {hashed} hashed, {stated - hashed} proven before and unchanged"
    )
    progress(f"linked {len(work.pins)} wheels from lockgen's store as uv placed them ({checked})")
    return installed


def _installed(
    pip: list[LockedPackage],
    work: _Work,
    prefix: Path,
    progress: Callable[[str], None],
    meter: Meter | None,
    proven: Callable[[Installed], object] | None,
) -> tuple[Installed, int]:
    """uv's install of the wheels, every file it placed proven, and the proofs recorded; with the number of files
    read to prove them."""
    pins, stated, expected = work.pins, work.stated, work.expected
    _install(pip, prefix / "bin" / "python", progress, wheel_store.stored(pins), work.placing)
    tree = env_manifest.scan_tree(prefix)
    infos, known, unread = wheel_store.split_by_proof(tree[0], stated, work.trusted)
    hashed = parallel.hash_files(
        [(str(prefix / path), infos[path].st_size) for path in unread],
        (lambda done, total: meter("hash files (MiB)", done >> 20, total >> 20)) if meter else None,
    )
    found = {**known, **{path: hashed[str(prefix / path)] for path in unread}}
    wrong = sorted((key, path) for path, (key, digest) in stated.items() if found.get(path) != digest)
    if wrong:
        _refuse(wrong, pins, expected, infos, prefix, progress)
    sealed = wheel_store.seal(prefix, infos)  # read-only from now on (`found` is every file of `infos`)
    infos.update(sealed)
    tree[0].update(sealed)
    installed = Installed(expected, {path: digest for path, (_, digest) in stated.items()}, tree)
    if proven is not None:
        proven(installed)
    for pin, placed in zip(pins, expected):
        if placed.dist_info is not None:  # every file it states was found (none `wrong`), most of them in `infos`
            mine = [f.path for f in placed.files if f.sha256]
            wheel_store.prove(pin, posixpath.basename(placed.dist_info), mine, infos, found)
    return installed, len(unread)


def _keep(placement: str, prefix: Path, venv: env_manifest.Tree, work: _Work, installed: Installed) -> None:
    """What uv's install added to the fresh venv, kept for the next install of the same wheels to place itself; not
    where a wheel has no proof (uv copied it) or places no `.dist-info` folder."""
    proofs = {pin: proof for pin in work.pins if (proof := wheel_store.proof_of(pin)) is not None}
    sites = {posixpath.dirname(package.dist_info) for package in work.expected if package.dist_info}
    if len(proofs) == len(work.pins) and len(sites) == 1 and all(package.dist_info for package in work.expected):
        wheel_links.keep(placement, prefix, venv, installed.tree, sites.pop(), proofs)
