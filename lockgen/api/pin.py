"""Use case `lockgen pin`: a node's inventory (`freeze --inventory`, written where there is no network)
becomes a lock on a connected machine.

Each distribution installed from an index is found on that index (name, version, the tags of its
`WHEEL` file); only the wheel's RECORD is read (HTTP range requests on its zip directory), and the
index's own sha256 of the file is the pin. The installed RECORD must state exactly the wheel's files
(plus what installers derive: byte code of its sources, INSTALLER/REQUESTED/direct_url.json, console
scripts), and the node's re-hash of every installed file must agree with it. A file changed after the
install fails the pin, unless `--accept-changed PATH` names it: the lock then records that path with the
hash found, and `check` accepts exactly those bytes. A distribution no index publishes (a local build)
is named; with `--allow-unpublished` it becomes a check-only entry pinned by its RECORD's digest, which
`check` and `verify` accept and `materialize` refuses. The wheels' manifests are written beside the lock
as a bundle for `check --manifests` on the node.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.node import inventory_file, inventory_probe
from lockgen.adapters.proof import manifest_store
from lockgen.adapters.pypi import pypi_index
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import checked_lock_text
from lockgen.api.steps.manifest_steps import manifest_of
from lockgen.core.lock import lock_builder
from lockgen.core.env.conformance import compare
from lockgen.core.credentials import scrub_url
from lockgen.core.env.expected_env import from_installed_record, python_xy, wheel_expected
from lockgen.core.env.wheel_files import hex_of_record_hash, installed_to_prefix
from lockgen.core.stack.stack_layout import default_lock_path, manifests_path
from lockgen.errors import ChannelError, UserError
from lockgen.model.inventory import InstalledDistribution, NodeInventory
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.manifests import ManifestFile, PackageManifest
from lockgen.model.names import normalize
from lockgen.model.names import PLATFORM_OF_MACHINE
from lockgen.model.results import PinnedLock


@dataclass(frozen=True)
class Pinned:
    """One distribution's outcome: its lock entry and manifest; or why no index wheel is it (`unpublished`:
    none found, or the installed RECORD is another build's); or files changed after the install."""

    dist: InstalledDistribution
    package: LockedPackage | None = None
    manifest: PackageManifest | None = None
    unpublished: str = ""
    problems: tuple[str, ...] = ()


def _changed_on_disk(dist: InstalledDistribution, document: NodeInventory, accepted: dict[str, str]) -> tuple[str, ...]:
    stem = dist.dist_info.rsplit("/", 1)[-1].removesuffix(".dist-info")
    return tuple(
        f"{m.path} differs from its RECORD on disk"
        for m in document.rehash.mismatches
        if m.distribution == stem and m.path not in accepted
    )


def _pin_one(
    dist: InstalledDistribution, document: NodeInventory, platform: str, index: str, accepted: dict[str, str]
) -> Pinned:
    inventory = document.inventory
    changed = _changed_on_disk(dist, document, accepted)
    try:
        wheel = pypi_index.find_wheel(dist.name, dist.version, dist.wheel_tags, index)
    except UserError:
        return Pinned(dist, unpublished="no wheel with its tags on the index", problems=changed)
    package = LockedPackage(
        name=normalize(dist.name),
        version=dist.version,
        manager="pip",
        platform=platform,
        url=wheel.url,
        hash=PackageHash(sha256=wheel.sha256),
    )
    manifest, _ = manifest_of(package, {})  # kept by the wheel's hash, or its RECORD read by range requests
    # the RECORDs compared (changed files apart); the inventory holds no script text, so launchers are
    # checked where the files are, by check --lock
    placed = wheel_expected(
        manifest, inventory.python
    )  # an installed RECORD states no modes: exec bits are not compared
    expected = dataclasses.replace(
        placed, entry_points=(), files=tuple(f._replace(executable=None) for f in placed.files)
    )
    report = compare([expected], from_installed_record(dist, inventory.site_packages), inventory.site_packages)
    if not report.clean:  # the installed RECORD is not the index wheel's: another build of this version
        return Pinned(dist, unpublished=f"not the index's {wheel.filename} ({report.lines()[0]})", problems=changed)
    return Pinned(dist, package, manifest, problems=changed)


def _check_only(
    dist: InstalledDistribution, site_packages: str, platform: str
) -> tuple[LockedPackage, PackageManifest]:
    """A distribution no index publishes, pinned by the digest of its installed RECORD."""
    digest = dist.record_sha256 or ""
    files = tuple(
        ManifestFile(path=installed_to_prefix(f.path, site_packages), sha256=f.sha256, size=f.size) for f in dist.record
    )
    manifest = PackageManifest(
        sha256=digest,
        name=normalize(dist.name),
        version=dist.version,
        kind="installed",
        files=files,
        dist_info=dist.dist_info,
        scripts=dist.scripts,
        source="installed RECORD",
    )
    package = LockedPackage(
        name=normalize(dist.name),
        version=dist.version,
        manager="pip",
        platform=platform,
        url=lock_builder.unpublished_url(normalize(dist.name), dist.version),
        hash=PackageHash(sha256=digest),
    )
    return package, manifest


def _accepted(document: NodeInventory, paths: Sequence[str]) -> dict[str, str]:
    found = {m.path: m for m in document.rehash.mismatches}
    accepted = {}
    for path in paths:
        mismatch = found.get(path)
        if mismatch is None or mismatch.found is None:
            raise UserError(
                f"--accept-changed {path}: the inventory shows no changed file there",
                "name a path the inventory's re-hash lists as differing (prefix-relative)",
            )
        accepted[path] = hex_of_record_hash(mismatch.found)
    return accepted


def pin(
    inventory_path: Path,
    target: str,
    out: Path | None,
    index: str,
    allow_unpublished: bool,
    accept_changed: Sequence[str],
    progress: Callable[[str], None],
) -> PinnedLock:
    """Writes the lock and its manifests bundle; returns both paths and the lock."""
    path = _lock_path(out, target)
    document, sha256 = inventory_file.read(inventory_path)
    return _pinned(
        document, inventory_path.name, sha256, target, path, index, allow_unpublished, accept_changed, progress
    )


def pin_python(
    python: str,
    target: str,
    out: Path | None,
    index: str,
    allow_unpublished: bool,
    accept_changed: Sequence[str],
    progress: Callable[[str], None],
) -> PinnedLock:
    """`freeze --python` on a connected machine: the interpreter inventoried and pinned in one step (what
    `freeze --inventory` and then `pin` do, without the file between them); the lock names the interpreter."""
    path = _lock_path(out, target)
    document = inventory_probe.node_inventory(Path(python), progress)
    try:
        return _pinned(
            document,
            python,
            hashlib.sha256(inventory_file.as_bytes(document)).hexdigest(),
            target,
            path,
            index,
            allow_unpublished,
            accept_changed,
            progress,
        )
    except ChannelError as exc:
        raise ChannelError(
            exc.message,
            f"{exc.hint}; on a node without network: lockgen freeze --python {python} --inventory inv.json.gz, "
            f"then lockgen pin inv.json.gz --target {target} where there is one",
        ) from None


def _lock_path(out: Path | None, target: str) -> Path:
    path = out or default_lock_path(target)
    if path.is_dir():
        raise UserError(
            f"`{path}` is a folder", "pass the path of the lock file to write (--out locks/NAME.conda-lock.yml)"
        )
    check_writable(path, f"the lock {path}", WRITABLE_HINT)  # before the interpreter is probed or an index asked
    return path


def _pinned(
    document: NodeInventory,
    source: str,
    source_sha256: str,
    target: str,
    path: Path,
    index: str,
    allow_unpublished: bool,
    accept_changed: Sequence[str],
    progress: Callable[[str], None],
) -> PinnedLock:
    inventory = document.inventory
    machine = inventory.platform.rsplit("-", 1)[-1]
    platform = PLATFORM_OF_MACHINE.get(machine)
    if platform is None:
        raise UserError(
            f"the inventory is of a {inventory.platform} interpreter", "lockgen pins linux x86_64 and aarch64"
        )
    recordless = [d.key for d in inventory.distributions if d.record_sha256 is None]
    if recordless:
        raise UserError(
            f"{len(recordless)} distributions have no RECORD, so nothing can say what they installed: "
            f"{', '.join(recordless[:6])}",
            "reinstall them from wheels (pip or uv writes the RECORD)",
        )
    accepted = _accepted(document, accept_changed)
    progress(f"finding {len(inventory.distributions)} distributions on {scrub_url(index)} (RECORDs by range requests)")
    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(lambda d: _pin_one(d, document, platform, index, accepted), inventory.distributions))
    unpublished = [o.dist.key for o in outcomes if o.unpublished]
    if unpublished and not allow_unpublished:
        first = next(o for o in outcomes if o.unpublished)
        raise UserError(
            f"{len(unpublished)} distributions are no wheel {index} publishes ({', '.join(unpublished[:6])}); "
            f"{first.dist.key}: {first.unpublished}"[:600],
            "install them from published wheels, or pass --allow-unpublished to keep them check-only",
        )
    failed = [o for o in outcomes if o.problems]
    if failed:
        first = failed[0]
        raise UserError(
            f"{len(failed)} distributions have files changed since they were installed; {first.dist.key}: "
            f"{first.problems[0]}",
            "reinstall them, or accept a changed file by name with --accept-changed PATH",
        )
    entries = [
        (o.package, o.manifest) for o in outcomes if o.package is not None and o.manifest is not None
    ]  # set together
    entries += [_check_only(o.dist, inventory.site_packages, platform) for o in outcomes if o.unpublished]
    lock = lock_builder.pinned_lock(
        target,
        source,
        source_sha256,
        platform,
        python_xy(inventory.python),
        accepted,
        unpublished,
        [package for package, _ in entries],
    )
    text = checked_lock_text(
        lock,
        "pinned from the inventory",
        "the inventory holds this value: take the inventory on the node again (lockgen freeze --inventory) and "
        "pin it again",
    )
    bundle = manifests_path(path)  # written once the lock is known good: a refused lock leaves neither
    manifest_store.write_bundle(bundle, [manifest for _, manifest in entries])
    write_atomic(path, text)
    progress(
        f"pinned {len(entries) - len(unpublished)} distributions to their index wheels"
        + (f", {len(unpublished)} check-only" if unpublished else "")
        + (f"; {len(accepted)} changed files accepted by name" if accepted else "")
    )
    return PinnedLock(path, bundle, lock)
