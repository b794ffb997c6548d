"""lockgen's store of wheel files, and the proofs that let materialize trust it without reading it again.

uv installs the locked wheels from its cache by hard links (`UV_LINK_MODE=hardlink`: an installed file is
the cache's own inode; uv rewrites only RECORD and writes INSTALLER, direct_url.json and the launchers).
lockgen runs uv with a cache of its own, `$LOCKGEN_HOME/uv-cache`, on the filesystem of its environments
(so the links can be made) and written only by lockgen's runs of uv. A wheel's files are proven once: the
first install hashes every installed file against the wheel's RECORD (bound to the sha256 the lock pins);
each proven file of the cache folder uv linked from is then made read-only (`seal`: no write bit, for its
owner either, so a stray write through an environment's link is refused) and kept with its fingerprint under
`$LOCKGEN_HOME/proven/wheels/<wheel sha256>.json` (`PROOF_LAYOUT`).

A fingerprint is (device, inode, size, mtime_ns, mode) and, beside it, the link count and ctime it was seen
with. Later installs check them before uv runs (`trusted`; `split_by_proof` after it): a file whose five fields
are unchanged is trusted by its inode after uv linked it, and is not read. Making or removing a hard link moves
an inode's ctime and its link count, and is no edit: where the link count is not the one recorded (an
environment was made or removed since), the ctime is not compared; where it is the same, a moved ctime is an
edit, even one that put the size and mtime back, and the file is hashed again. Any other file, a changed one,
a copy (uv fell back to copying: another filesystem) or a file uv wrote, is hashed as before and refused if it
no longer matches. What a stat cannot see (an edit that put size and mtime back while an environment was
removed) is found by a scrub that reads every byte: `lockgen store verify` (`store_scrub`), `materialize
--verify` and `check --lock --full`. The check and the record happen under one lock, around uv's run."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import NamedTuple, cast

from lockgen.adapters.proof import fingerprint_records
from lockgen.adapters.store import file_guard
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.core.env.confined import child
from lockgen.errors import UserError

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


_FINGERPRINT_FIELDS = attrgetter("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_mode", "st_nlink", "st_ctime_ns")


def _fingerprint(info: os.stat_result) -> list[int]:
    """What a proof keeps of a file's lstat: the five fields an edit moves, then the link count and ctime seen with
    them."""
    return list(_FINGERPRINT_FIELDS(info))


WIDTH = 7  # the integers of a fingerprint
# a record's form (`fingerprint_records`): its files' paths (in the cache folder), their fingerprints end to end
# (`WIDTH` integers each) and their sha256 end to end (64 hex digits each). A record of another form is none: its
# files are hashed again, once
PROOF_LAYOUT = 3  # 2 kept ctime among the fields that must match: every environment removed threw the proofs away
Proven = tuple[list[str], list[int], str]  # paths, fingerprints, sha256s: the files of a record, in order

_READ: dict[str, tuple[tuple[int, ...], dict, bytes]] = {}  # records read by this process, by their file's stat


def _read(wheel_sha256: str) -> dict | None:
    """A wheel's proof record (`folder`, `paths`, `fingerprints`, `sha256`: `fingerprint_records`); read once per
    process while its file is the same (`trusted` before uv and `prove` after it both need it: a torch's record is
    12,000 files)."""
    path = _record_path(wheel_sha256)
    try:
        info = os.stat(path)
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if wheel_sha256 in _READ and _READ[wheel_sha256][0] == stamp:
            return _READ[wheel_sha256][1]
        data = path.read_bytes()
    except OSError:
        return None
    record = fingerprint_records.decode(data, PROOF_LAYOUT, WIDTH, digests=True)
    if record is None or not isinstance(record.get("folder"), str):
        return None
    _READ[wheel_sha256] = (stamp, record, data)
    return record


def _write(wheel_sha256: str, folder: str, proven: Proven) -> None:
    paths, fingerprints, digests = proven
    fields = {"layout": PROOF_LAYOUT, "wheel": wheel_sha256, "folder": folder}
    write_bytes_atomic(_record_path(wheel_sha256), fingerprint_records.encode(fields, paths, fingerprints, digests))


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


def stands(
    now: os.stat_result, device: int, inode: int, size: int, mtime: int, mode: int, links: int, ctime: int
) -> bool:
    """Whether a store file's lstat `now` is the fingerprint its proof recorded: compared field by field, most likely
    to differ first (no list per file); the ctime only where the link count is the one recorded (a link made or
    removed moves both: no edit)."""
    return (
        now.st_ino == inode
        and now.st_mtime_ns == mtime
        and now.st_size == size
        and now.st_mode == mode
        and now.st_dev == device
        and (now.st_nlink != links or now.st_ctime_ns == ctime)
    )


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
        kept, digests = iter(record["fingerprints"]), record["sha256"]  # `WIDTH` at a time, by zip
        for relative, device, inode, size, mtime, mode, links, ctime, at in zip(
            record["paths"], kept, kept, kept, kept, kept, kept, kept, range(0, len(digests), 64)
        ):
            try:
                now = lstat(f"{folder}/{relative}")  # no join per file: 15,000 cost 0.06 s
            except OSError:
                continue
            if stands(now, device, inode, size, mtime, mode, links, ctime):
                found[(device, inode)] = (size, mtime, digests[at : at + 64])
    return found


class Proof(NamedTuple):
    """A wheel's proof record as read: its cache folder (`archive-v0/<id>`), the paths of its proven files in that
    folder, their fingerprints end to end (`WIDTH` integers each) and their sha256 end to end (64 hex digits each)."""

    folder: str
    paths: list[str]
    fingerprints: list[int]
    sha256: str


def climbing(paths: Sequence[str]) -> bool:
    """Whether any of these relative paths leaves its folder or is no plain path: an empty, `.` or `..` part, or a NUL
    (a newline inside a path only splits it into parts each judged too). Three substring searches over them all,
    each path framed by slashes and each line break made a part's end (a torch's 15,000 paths: 2 ms; one search of a
    pattern 25 ms, one by one 0.05 s)."""
    joined = "\n".join(paths)
    framed = "/" + joined.replace("\n", "/\n/") + "/"
    return "\0" in joined or "//" in framed or "/./" in framed or "/../" in framed


def proof_of(wheel_sha256: str) -> Proof | None:
    """A wheel's proof record, when there is one whose folder and paths stay inside the store."""
    record = _read(wheel_sha256)
    if record is None or _folder_path(record) is None or climbing(record["paths"]):
        return None
    return Proof(record["folder"], record["paths"], record["fingerprints"], record["sha256"])


def renew(wheel_sha256: str, proof: Proof, infos: Sequence[os.stat_result]) -> None:
    """Records a wheel's proof again with the lstat now of each of its files (`infos`, in the record's order: links
    to them just made, the same inodes), so the next check compares the link count and ctime those links left: the
    record's bytes as read with their fingerprints replaced (`fingerprint_records.with_fingerprints`), else encoded
    whole."""
    fingerprints = list(chain.from_iterable(map(_FINGERPRINT_FIELDS, infos)))
    kept = _READ.get(wheel_sha256)
    same = kept is not None and kept[1]["paths"] is proof.paths and kept[1]["sha256"] is proof.sha256
    data = fingerprint_records.with_fingerprints(kept[2], fingerprints) if kept is not None and same else None
    if data is None:
        _write(wheel_sha256, proof.folder, (proof.paths, fingerprints, proof.sha256))
    else:
        write_bytes_atomic(_record_path(wheel_sha256), data)


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


WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def seal(prefix: Path, infos: Mapping[str, os.stat_result]) -> dict[str, os.stat_result]:
    """Takes the write bits off the store files behind installed files just proven (`infos`: prefix-relative path
    -> lstat; a hard link, more than one link, is the store's own inode: a copy uv made is left as it is); returns
    the lstat now of each file changed (the mode is part of its fingerprint and of the environment's record)."""
    sealed = {}
    top = str(prefix)
    for relative, info in infos.items():
        if info.st_nlink > 1 and info.st_mode & WRITE_BITS:
            path = f"{top}/{relative}"
            os.chmod(
                path, stat.S_IMODE(info.st_mode) & ~WRITE_BITS
            )  # a regular file (`split_by_proof`) of the folder being built
            sealed[relative] = os.lstat(path)
    return sealed


def prove(
    wheel_sha256: str,
    dist_info: str,
    files: Sequence[str],
    installed: Mapping[str, os.stat_result],
    digests: Mapping[str, str],
) -> None:
    """Records the cache files behind one wheel's installed files (`files`, prefix-relative), each of which was just
    proven to have the sha256 in `digests` (installed path -> sha256; `installed`: the lstat after the install of
    every regular file of the environment, this wheel's among them; `dist_info`: the wheel's `.dist-info` folder
    name). Nothing is recorded where uv copied. Where the wheel's record already names every linked inode, only the
    fingerprints are renewed (the cache folder is not walked again). One pass over `files` picks the linked ones."""
    by_inode = {
        (info.st_dev, info.st_ino): (info, digests[path])
        for path in files
        if (info := installed.get(path)) is not None and info.st_nlink > 1 and path in digests
    }
    record = _read(wheel_sha256)
    proven = _renewed(record, by_inode) if record is not None else None
    if proven is not None and record is not None:
        folder: str | None = record["folder"]
    else:
        ends = f"{dist_info}/METADATA"
        metadata = next((installed[path] for path in files if path.endswith(ends) and path in installed), None)
        folder = _folder_of(metadata, dist_info) if metadata is not None and metadata.st_nlink > 1 else None
        proven = _linked_files(folder, by_inode) if folder is not None else None
    if folder is None or proven is None or not proven[0]:
        _record_path(wheel_sha256).unlink(missing_ok=True)
        return
    _write(wheel_sha256, folder, proven)


def _renewed(record: dict, by_inode: Mapping[tuple[int, int], tuple[os.stat_result, str]]) -> Proven | None:
    """The record's files that are the inodes of proven installed files, with their fingerprints now; None
    when an installed file links an inode the record does not name (the cache folder is walked then). Where every
    file of the record is linked by one, as after each install from the store, its columns are made at C speed
    (no loop of Python over a torch's 12,000 files)."""
    kept = record["fingerprints"]
    keys = list(zip(kept[0::WIDTH], kept[1::WIDTH]))  # each file's (device, inode)
    linked = list(map(by_inode.get, keys))
    if None not in linked:
        every = cast("list[tuple[os.stat_result, str]]", linked)  # no None in it
        digests = list(map(itemgetter(1), every))
        if set(map(len, digests)) <= {64}:
            if len(set(keys)) != len(by_inode):
                return None
            fingerprints = list(chain.from_iterable(map(_FINGERPRINT_FIELDS, map(itemgetter(0), every))))
            return list(record["paths"]), fingerprints, "".join(digests)
    paths: list[str] = []
    fingerprints = []
    kept_digests: list[str] = []
    named = set()
    for relative, key, found in zip(record["paths"], keys, linked):  # some file not linked: the rest renewed
        if found is not None and len(found[1]) == 64:
            paths.append(relative)
            fingerprints += _fingerprint(found[0])
            kept_digests.append(found[1])
            named.add(key)
    return (paths, fingerprints, "".join(kept_digests)) if len(named) == len(by_inode) else None


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


def _inside(relative: str) -> bool:
    """Whether a record's path stays inside its folder (a record is lockgen's own, but a file anyone who can write the
    store can change)."""
    return all(part not in ("", ".", "..") for part in relative.split("/"))


def _folder_path(record: dict) -> Path | None:
    """The cache folder a record names (`archive-v0/<id>`), else None."""
    top, _, name = record["folder"].partition("/")
    try:
        return child(cache_dir() / top, name, "a wheel's cache folder") if top == "archive-v0" else None
    except UserError:  # no plain name: a record changed by hand names no folder of the store
        return None


def proven_folders() -> Iterator[tuple[str, Path, dict[str, str]]]:
    """Every wheel with a proof record: its sha256, the cache folder uv links it from, and each proven file of that
    folder (folder-relative) with the sha256 it was proven to have. A record that names a path outside its folder
    proves nothing and is left out."""
    try:
        names = sorted(os.listdir(_proofs()))
    except OSError:
        return
    for name in names:
        wheel = name.removesuffix(".json")
        record = _read(wheel) if name.endswith(".json") and len(wheel) == 64 else None
        folder = _folder_path(record) if record is not None else None
        if record is None or folder is None or not all(map(_inside, record["paths"])):
            continue
        digests = record["sha256"]
        yield wheel, folder, {relative: digests[64 * at : 64 * at + 64] for at, relative in enumerate(record["paths"])}


def proven_folder(wheel_sha256: str, inodes: Iterable[tuple[int, int]]) -> Path | None:
    """The cache folder of a wheel whose proof names one of these (device, inode): a store file proven before and
    found changed since, which is damage (a file never proven may be a wheel whose own RECORD is wrong)."""
    record = _read(wheel_sha256)
    if record is None:
        return None
    kept, wanted = iter(record["fingerprints"]), set(inodes)
    named = any((device, inode) in wanted for _, device, inode, *_ in zip(record["paths"], *[kept] * WIDTH))
    return _folder_path(record) if named else None


def drop_entries(folder: Path) -> None:
    """Removes uv's entries for an archive folder moved out of the cache (`archive-v0/<id>`): the links to it and the
    pointer files beside them (`.http`, `.rev`, `.msgpack`) or naming its id, so that uv fetches the wheel again
    rather than fail on a folder that is gone."""
    needle, top = folder.name.encode(), str(cache_dir())
    for root, folders, names in os.walk(top):
        if root == top:
            folders[:] = [name for name in folders if name != "archive-v0"]  # the unpacked wheels: no entry there
        for name in names:
            path = os.path.join(root, name)
            if os.path.islink(path):
                if os.path.basename(os.readlink(path)) == folder.name:
                    for stale in (path, *(f"{path}{suffix}" for suffix in (".http", ".rev", ".msgpack"))):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(stale)
            elif (
                name.endswith((".http", ".rev"))
                and os.path.getsize(path) < 1 << 20
                and needle in Path(path).read_bytes()
            ):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def forget(wheel_sha256: str) -> None:
    """Drops the proof of a wheel whose installed files did not match (its cache folder was changed)."""
    _record_path(wheel_sha256).unlink(missing_ok=True)


def split_by_proof(
    walked: Mapping[str, os.stat_result], stated: Iterable[str], trusted: Trusted
) -> tuple[dict[str, os.stat_result], dict[str, str], list[str]]:
    """In one pass over the `stated` files (prefix-relative): (the lstat of each one the walk `walked` found as a
    regular file, those that are links to an unchanged proven store file -> their proven sha256, the others: the
    files to read). A stated file missing, or reached only through a link to a folder, is in none of them (the
    caller refuses it)."""
    infos: dict[str, os.stat_result] = {}
    known: dict[str, str] = {}
    unread: list[str] = []
    is_regular = stat.S_ISREG
    for relative in stated:
        info = walked.get(relative)
        if info is None or not is_regular(info.st_mode):
            continue
        infos[relative] = info
        proof = trusted.get((info.st_dev, info.st_ino))
        if proof is not None and proof[0] == info.st_size and proof[1] == info.st_mtime_ns:
            known[relative] = proof[2]
        else:
            unread.append(relative)
    return infos, known, unread
