"""Use cases `lockgen pack` and `lockgen unpack`: a lock's artifacts carried to a machine with no network, as one tar
archive, and the lock's environment made there from it.

pack: every artifact the lock pins for one platform (conda archives and wheels, fetched through lockgen's package
store and hash-checked against the lock's sha256; checked again as each is copied in), the lock's own bytes and an index
(`core.pack_rules`), written byte-reproducibly and atomically (`adapters.pack_archive`).

unpack: the archive read in one strict pass into a staging folder of lockgen's home; the index checked against the
lock it carries (and, with `--lock`, that lock byte for byte against the user's) and every member against the lock's
sha256, before any is used. Then lockgen's stores are seeded from the verified members (conda archives into the package
store, wheels into the wheel file store with their RECORD manifests) and the environment is made by the same step
`lockgen materialize` uses, with the original lock, so its digest is exactly materialize's. uv fetches wheels by the
lock's URLs as it always does, answered from the verified files by a loopback mirror (`adapters.pypi.wheel_mirror`):
nothing
reaches the network. A refused archive leaves nothing at the prefix.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lockgen.adapters import home, http_deadline, pack_archive
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable
from lockgen.adapters.pypi import wheel_mirror
from lockgen.adapters.store import file_guard, package_store
from lockgen.adapters.lock.lockfile_yaml import loaded_lock, read_lock
from lockgen.api.steps.manifest_steps import keep_wheel_manifest
from lockgen.api.steps.materialize_steps import lock_platform
from lockgen.api.steps.shared_steps import Meter, materialize_into
from lockgen.core.lock import lock_builder
from lockgen.core import pack_rules
from lockgen.core.pack_rules import INDEX, LOCK, Planned
from lockgen.errors import PackError
from lockgen.model.lock import LoadedLock
from lockgen.model.pack import PackIndex, PackMember
from lockgen.model.results import PackedArchive


def _fetched(entry: Planned) -> tuple[PackMember, Path]:
    store = package_store.wheels() if entry.package.manager == "pip" else None
    path = package_store.kept(entry.package, store) or package_store.fetch(entry.package, store)  # hashed as it goes in
    return PackMember(path=entry.path, size=path.stat().st_size, sha256=entry.sha256), path


def pack(
    lock_path: Path, out: Path, platform: str | None, progress: Callable[[str], None], meter: Meter | None = None
) -> PackedArchive:
    """Writes the archive `out` of the lock's artifacts for `platform` (default: this host's)."""
    check_writable(out, f"--out {out}", WRITABLE_HINT, file=True)  # before anything is fetched
    loaded = read_lock(lock_path)
    chosen = lock_platform(loaded.lock, platform)
    lock_builder.refuse_local(loaded.lock.packages_for(chosen), "packed")  # before anything is fetched
    entries = pack_rules.planned(loaded.lock, chosen)
    files = []
    with ThreadPoolExecutor(max_workers=8) as pool:  # downloads wait on the network, not the CPU
        for done, fetched in enumerate(pool.map(_fetched, entries), 1):
            files.append(fetched)
            if meter is not None:
                meter("fetch and check the artifacts", done, len(entries))
    progress(f"fetched {len(files)} artifacts for {chosen} (each against the lock's sha256)")
    lock_member = PackMember(path=LOCK, size=len(loaded.data), sha256=loaded.sha256)
    index = pack_rules.render_index(chosen, [lock_member, *(member for member, _ in files)])
    sha256, size = pack_archive.write(out, [(INDEX, index), (LOCK, loaded.data)], files, meter)
    progress(f"wrote {out} ({size / (1 << 20):.1f} MiB, {len(files)} artifacts, sha256:{sha256})")
    return PackedArchive(path=out, sha256=sha256, size=size, platform=chosen, artifacts=len(files))


def unpack(
    archive: Path,
    prefix: Path,
    platform: str | None,
    lock_path: Path | None,
    progress: Callable[[str], None],
    meter: Meter | None = None,
) -> tuple[Path, str]:
    """The environment of the archive's lock at `prefix`, made with no network; returns the prefix and its digest.
    `lock_path`: the lock the archive must carry, byte for byte."""
    expected = read_lock(lock_path) if lock_path is not None else None
    final = prefix.absolute()
    staging_parent = home.lockgen_home() / "unpack"
    staging_parent.mkdir(parents=True, exist_ok=True)
    with file_guard.temporary_folder(staging_parent, ".unpack-") as staging:
        verified = _read_verified(archive, staging, platform, expected, meter)
        progress(f"read {archive}: the lock and {len(verified.entries)} artifacts, every one against the lock's sha256")
        wheels = {}
        for number, entry in enumerate(verified.entries):
            member = staging / f"{number:06d}"
            if entry.package.manager == "conda":
                package_store.admit(entry.package, member)
            else:
                stored = package_store.admit(entry.package, member, package_store.wheels())
                keep_wheel_manifest(entry.package, stored)
                wheels[entry.package.url] = stored
        with wheel_mirror.serving(wheels) if wheels else contextlib.nullcontext():
            digest = materialize_into(verified.loaded, verified.index.platform, final, progress, meter)
    return final, digest


@dataclass(frozen=True)
class VerifiedArchive:
    """A pack archive read and checked: its lock, its index, and its artifacts (as the lock plans them)."""

    loaded: LoadedLock
    index: PackIndex
    entries: tuple[Planned, ...]


def _read_verified(
    archive: Path, staging: Path, platform: str | None, expected: LoadedLock | None, meter: Meter | None
) -> VerifiedArchive:
    """The archive's lock, index and artifacts (written to `staging/<n>` in index order), every one checked."""
    with pack_archive.reading(archive, INDEX) as reader:
        index = pack_rules.parse_index(
            reader.read_bytes(INDEX, pack_rules.MAX_INDEX), http_deadline.max_download_bytes()
        )
        loaded = loaded_lock(reader.read_member(index.members[0]), f"{archive}:{LOCK}")
        if expected is not None and expected.data != loaded.data:
            raise PackError(
                f"pack archive `{archive}`, member `{LOCK}`: it is not the lock {expected.source} byte for byte "
                f"(sha256 {loaded.sha256}, not {expected.sha256})",
                "pass --lock the lock the archive was packed from, or pack that lock again",
                LOCK,
            )
        entries = pack_rules.check_against_lock(index, loaded.lock, platform or index.platform)
        lock_platform(loaded.lock, index.platform)  # one of the lock's platforms, as materialize takes it
        total, done = sum(m.size for m in index.members[1:]), 0
        for number, (member, entry) in enumerate(zip(index.members[1:], entries)):
            assert member.path == entry.path  # both sorted by path, proven the same set
            reader.read_member(member, staging / f"{number:06d}")
            done += member.size
            if meter is not None and total >> 20:
                meter("read and check the archive (MiB)", done >> 20, total >> 20)
        reader.end()
    return VerifiedArchive(loaded, index, entries)
