"""lockgen's store of wheel files, and the proofs that let materialize trust it without reading it again.

uv installs the locked wheels from its cache by hard links (`UV_LINK_MODE=hardlink`: an installed file is
the cache's own inode; uv rewrites only RECORD and writes INSTALLER, direct_url.json and the launchers).
lockgen runs uv with a cache of its own, `$LOCKGEN_HOME/uv-cache`, on the filesystem of its environments
(so the links can be made) and written only by lockgen's runs of uv. A wheel's files are proven once: the
first install hashes every installed file against the wheel's RECORD (bound to the sha256 the lock pins);
each proven file of the cache folder uv linked from is then kept with its fingerprint (device, inode, size,
mtime_ns, ctime_ns) under `$LOCKGEN_HOME/proven/wheels/<wheel sha256>.json` (`PROOF_LAYOUT`).

Later installs check those fingerprints before uv runs (`trusted`; `split_by_proof` after it): a file whose fingerprint is unchanged is
trusted by its inode after uv linked it, and is not read; any other file, a changed one (an edit, even with
its mtime put back, moves its ctime), a copy (uv fell back to copying: another filesystem) or a file uv
wrote, is hashed as before and refused if it no longer matches. Making or removing a hard link moves the
ctime of every link of an inode, so the fingerprints are recorded again after each install (`prove`), and
a file whose ctime moved for another reason (an environment removed) is re-hashed once. The check and the
record happen under one lock, around uv's run; an edit by another program during that run is not seen,
which is why `materialize --verify` and `check --lock --full` hash every file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from lockgen.adapters import file_guard
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.core.confined import child

Trusted = dict[tuple[int, int], tuple[int, int, str]]  # (device, inode) -> (size, mtime_ns, sha256)


def cache_dir() -> Path:
    """uv's cache as lockgen runs it: its wheel store."""
    return lockgen_home() / "uv-cache"


def uv_environment() -> dict[str, str]:
    """What uv is run with to install from lockgen's store: its cache, and hard links from it."""
    return {**os.environ, "UV_CACHE_DIR": str(cache_dir()), "UV_LINK_MODE": "hardlink"}


def _proofs() -> Path:
    return lockgen_home() / "proven" / "wheels"


def _record_path(wheel_sha256: str) -> Path:
    return child(_proofs(), f"{wheel_sha256}.json", "a wheel's proof record")


def _fingerprint(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


# a record's form: its files' paths (in the cache folder), their fingerprints end to end (5 integers each) and
# their sha256 end to end (64 hex digits each); flat lists read and write 3-4 times faster than a dict of lists
# (a torch's record, 12,000 files: 8 ms instead of 32 to read, 12 instead of 36 to write). A record of another
# form is none: its files are hashed again, once
PROOF_LAYOUT = 2
Proven = tuple[list[str], list[int], str]  # paths, fingerprints, sha256s: the files of a record, in order

_READ: dict[str, tuple[tuple[int, ...], dict]] = {}  # records read by this process, by their file's stat


def _read(wheel_sha256: str) -> dict | None:
    """A wheel's proof record (`folder`, `paths`, `fingerprints`, `sha256`); read once per process while its file
    is the same (`trusted` before uv and `prove` after it both need it: a torch's record is 12,000 files)."""
    path = _record_path(wheel_sha256)
    try:
        info = os.stat(path)
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if wheel_sha256 in _READ and _READ[wheel_sha256][0] == stamp:
            return _READ[wheel_sha256][1]
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not (
        isinstance(record, dict)
        and record.get("layout") == PROOF_LAYOUT
        and isinstance(record.get("folder"), str)
        and isinstance(record.get("paths"), list)
        and isinstance(record.get("fingerprints"), list)
        and isinstance(record.get("sha256"), str)
        and len(record["fingerprints"]) == 5 * len(record["paths"])
        and len(record["sha256"]) == 64 * len(record["paths"])
    ):
        return None
    _READ[wheel_sha256] = (stamp, record)
    return record


def _write(wheel_sha256: str, folder: str, proven: Proven) -> None:
    paths, fingerprints, digests = proven
    record = {"layout": PROOF_LAYOUT, "wheel": wheel_sha256, "folder": folder, "paths": paths, "fingerprints": fingerprints, "sha256": digests}
    write_bytes_atomic(_record_path(wheel_sha256), json.dumps(record).encode())


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The store held for one install: its fingerprints checked before uv links and recorded after. uv unpacks
    each wheel into a `.tmp*` folder of the cache and renames it into place; a uv that is stopped (Ctrl-C, or
    killed as a run ends) leaves it there, so the `.tmp*` folders that appeared while the store was held (no
    other run of lockgen's uv writes the cache meanwhile) are removed as the hold ends, however it ends."""
    _proofs().mkdir(parents=True, exist_ok=True)
    with file_guard.held(_proofs() / ".lock"):
        before = _unpacking()
        try:
            yield
        finally:
            for leftover in _unpacking() - before:
                shutil.rmtree(leftover, ignore_errors=True)


def _unpacking() -> set[Path]:
    """uv's temporary folders in the cache."""
    return set(cache_dir().glob(".tmp*"))


def trusted(wheels: Iterable[str]) -> Trusted:
    """The proven cache files of these wheels (by sha256) whose fingerprint is what was recorded: by their
    (device, inode), with the size, mtime and sha256 an installed link of them must show."""
    found: Trusted = {}
    top, lstat = str(cache_dir()), os.lstat
    for wheel in wheels:
        record = _read(wheel)
        if record is None:
            continue
        folder = os.path.join(top, record["folder"])
        kept, digests = iter(record["fingerprints"]), record["sha256"]  # five at a time, by zip
        for relative, device, inode, size, mtime, ctime, at in zip(record["paths"], kept, kept, kept, kept, kept, range(0, len(digests), 64)):
            try:
                now = lstat(f"{folder}/{relative}")  # no join per file: 15,000 cost 0.06 s
            except OSError:
                continue
            # the fingerprint compared field by field, most likely to differ first: no list per file
            if now.st_ctime_ns == ctime and now.st_ino == inode and now.st_mtime_ns == mtime and now.st_size == size and now.st_dev == device:
                found[(device, inode)] = (size, mtime, digests[at : at + 64])
    return found


def stored(wheels: Iterable[str]) -> bool:
    """Whether every one of these wheels (by sha256) has a proof record: each was installed from the store
    before, so uv can install them from its cache without a request (the cache may have been cleaned since:
    the caller then installs with the index)."""
    return all(_read(wheel) is not None for wheel in wheels)


def _folder_of(dist_info_metadata: os.stat_result, dist_info: str) -> str | None:
    """The cache folder (`archive-v0/<id>`) uv linked a wheel from: the one whose METADATA is the installed
    METADATA's inode."""
    archives = cache_dir() / "archive-v0"
    try:
        names = os.listdir(archives)
    except OSError:
        return None
    for name in names:
        try:
            info = os.lstat(os.path.join(archives, name, dist_info, "METADATA"))
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == (dist_info_metadata.st_dev, dist_info_metadata.st_ino):
            return f"archive-v0/{name}"
    return None


def prove(wheel_sha256: str, dist_info: str, installed: Mapping[str, os.stat_result], digests: Mapping[str, str]) -> None:
    """Records the cache files behind one wheel's installed files, each of which was just proven to have the
    sha256 in `digests` (installed path -> sha256; `installed`: their lstat after the install;
    `dist_info`: the wheel's `.dist-info` folder name). Nothing is recorded where uv copied. Where the
    wheel's record already names every linked inode, only the fingerprints are renewed (the cache folder is
    not walked again)."""
    by_inode = {(info.st_dev, info.st_ino): (info, digests[path]) for path, info in installed.items() if info.st_nlink > 1 and path in digests}
    record = _read(wheel_sha256)
    proven = _renewed(record, by_inode) if record is not None else None
    if proven is not None and record is not None:
        folder: str | None = record["folder"]
    else:
        metadata = next((info for path, info in installed.items() if path.endswith(f"{dist_info}/METADATA")), None)
        folder = _folder_of(metadata, dist_info) if metadata is not None and metadata.st_nlink > 1 else None
        proven = _linked_files(folder, by_inode) if folder is not None else None
    if folder is None or proven is None or not proven[0]:
        _record_path(wheel_sha256).unlink(missing_ok=True)
        return
    _write(wheel_sha256, folder, proven)


def _renewed(record: dict, by_inode: Mapping[tuple[int, int], tuple[os.stat_result, str]]) -> Proven | None:
    """The record's files that are the inodes of proven installed files, with their fingerprints now; None
    when an installed file links an inode the record does not name (the cache folder is walked then)."""
    paths: list[str] = []
    fingerprints: list[int] = []
    digests: list[str] = []
    kept, named = iter(record["fingerprints"]), set()
    for relative, device, inode, *_ in zip(record["paths"], kept, kept, kept, kept, kept):
        key = (device, inode)
        linked = by_inode.get(key)
        if linked is not None and len(linked[1]) == 64:
            info = linked[0]
            paths.append(relative)
            fingerprints += (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            digests.append(linked[1])
            named.add(key)
    return (paths, fingerprints, "".join(digests)) if len(named) == len(by_inode) else None


def _linked_files(folder: str, by_inode: Mapping[tuple[int, int], tuple[os.stat_result, str]]) -> Proven:
    """The files of a cache folder that are the inodes of proven installed files, with their fingerprints."""
    paths: list[str] = []
    fingerprints: list[int] = []
    digests: list[str] = []
    top = os.path.join(str(cache_dir()), folder)
    for root, _, names in os.walk(top):
        base = root[len(top) + 1 :]
        for name in names:
            info = os.lstat(f"{root}/{name}")
            linked = by_inode.get((info.st_dev, info.st_ino))
            if linked is not None and _fingerprint(info) == _fingerprint(linked[0]) and len(linked[1]) == 64:
                paths.append(f"{base}/{name}" if base else name)
                fingerprints += _fingerprint(info)
                digests.append(linked[1])
    return paths, fingerprints, "".join(digests)


def forget(wheel_sha256: str) -> None:
    """Drops the proof of a wheel whose installed files did not match (its cache folder was changed)."""
    _record_path(wheel_sha256).unlink(missing_ok=True)


def regular_files(walked: Mapping[str, os.stat_result], stated: Iterable[str]) -> dict[str, os.stat_result]:
    """The lstat of each `stated` file (prefix-relative) that the walk `walked` found as a regular file (a
    missing one, or one reached only through a link to a folder, is refused by the caller)."""
    infos = {}
    for relative in stated:
        info = walked.get(relative)
        if info is not None and stat.S_ISREG(info.st_mode):
            infos[relative] = info
    return infos


def split_by_proof(infos: dict[str, os.stat_result], trusted: Trusted) -> tuple[dict[str, str], list[str]]:
    """(files that are links to an unchanged proven store file -> their proven sha256, the files to read)."""
    known, unread = {}, []
    for relative, info in infos.items():
        proof = trusted.get((info.st_dev, info.st_ino))
        if proof is not None and proof[:2] == (info.st_size, info.st_mtime_ns):
            known[relative] = proof[2]
        else:
            unread.append(relative)
    return known, unread
