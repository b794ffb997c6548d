"""The environment manifest: every file of a prefix (path, size, mode, sha256; links as links), sorted.

Its sha256 is the environment digest. What an install makes machine-specific is normalised so the
same lock gives the same digest on every machine at the same prefix path: `.pyc` files and
`__pycache__` are left out (derived caches with timestamps), conda-meta records are hashed without
the fields that name the local package store (`extracted_package_dir`, `package_tarball_full_path`,
`url`, `channel`, `files`/`paths_data` order kept), and `.lockgen/` itself is not covered.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import chain
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple, cast

from lockgen.model.environment_record import EnvironmentManifest, ManifestEntry, ManifestStats

from lockgen.adapters.conda import conda_meta
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.proof import fingerprint_records
from lockgen.core.env.stat_rules import ctime_stands
from lockgen.digests import canonical_digest, canonical_json, canonical_json_with
from lockgen.errors import UserError

MANIFEST = ".lockgen/manifest.json"
STATS = ".lockgen/stats.json"
Walked = dict[str, os.stat_result]  # a walk of a tree: each path with its lstat
Tree = tuple[Walked, Walked]  # a whole walk: its files and links, and its folders


def covered(relative: str) -> bool:
    """Whether the manifest covers a path (caches and `.lockgen/` it leaves out by design)."""
    return not (relative.startswith(".lockgen/") or relative.endswith(".pyc") or "/__pycache__/" in f"/{relative}")


def _content(path: Path, relative: str) -> bytes:
    data = path.read_bytes()
    return conda_meta.digest_content(data) if conda_meta.is_record(relative) else data


def content_digest(relative: str, data: bytes) -> str:
    """The sha256 the manifest gives a file of these bytes at `relative` (a record without its volatile fields)."""
    return hashlib.sha256(conda_meta.digest_content(data) if conda_meta.is_record(relative) else data).hexdigest()


def overlay(lower: Mapping[str, ManifestEntry], manifest: EnvironmentManifest) -> EnvironmentManifest:
    """`manifest` (of a tree built on a lower environment it does not hold) over the lower environment's
    entries by path: the manifest of the union, as if it had been built whole."""
    files = {**lower, **{entry["path"]: entry for entry in manifest["files"]}}
    return {**manifest, "files": [files[path] for path in sorted(files)]}


def entry_of(prefix: Path, relative: str) -> ManifestEntry:
    path = prefix / relative
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return {"path": relative, "type": "link", "target": os.readlink(path)}
    if not stat.S_ISREG(info.st_mode):  # a FIFO, device or socket is never opened (a FIFO would block)
        return {"path": relative, "type": "special", "mode": oct(stat.S_IFMT(info.st_mode))}
    data = _content(path, relative)
    return {
        "path": relative,
        "type": "file",
        "size": len(data),
        "mode": "755" if info.st_mode & 0o111 else "644",
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def walk(prefix: Path, covered_only: bool = True) -> list[str]:
    """Every file and symlink under `prefix`, relative and sorted; only those the manifest covers unless
    `covered_only` is false."""
    files, _ = walk_tree(prefix)
    return [relative for relative in files if covered(relative)] if covered_only else files


def walk_tree(prefix: Path) -> tuple[list[str], list[str]]:
    """In one pass: every file and symlink under `prefix`, and every folder (not through links), relative
    and sorted."""
    files, folders = scan_tree(prefix)
    return sorted(files), sorted(folders)


def scan_tree(prefix: Path) -> tuple[dict[str, os.stat_result], dict[str, os.stat_result]]:
    """Every file and symlink, and every folder (not through links), under `prefix`: relative path -> its
    lstat. One scandir pass; a link to a folder counts as a file (it is recorded as a link)."""
    files: dict[str, os.stat_result] = {}
    folders: dict[str, os.stat_result] = {}
    pending = [(str(prefix), "")]
    while pending:  # bounded: each folder is entered once (links are never followed)
        path, base = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                relative = f"{base}/{entry.name}" if base else entry.name
                if entry.is_dir(follow_symlinks=False):
                    folders[relative] = entry.stat(follow_symlinks=False)
                    pending.append((entry.path, relative))
                else:
                    files[relative] = entry.stat(follow_symlinks=False)
    return files, folders


def build(
    prefix: Path,
    known: Mapping[str, str] | None = None,
    scanned_tree: tuple[dict[str, os.stat_result], dict[str, os.stat_result]] | None = None,
    hashed: Mapping[str, list] | None = None,
) -> tuple[EnvironmentManifest, ManifestStats]:
    """The manifest of a prefix and, kept apart (they differ between machines), each file's fingerprint and the
    folders: `built`'s, its stats read back from their bytes (materialize writes them as made)."""
    made = built(prefix, known, scanned_tree, hashed)
    return made.manifest, stats_of(made.stats_json)


class Entries(NamedTuple):
    """Manifest entries of (part of) a tree: its covered paths, sorted, and each one's canonical JSON (`_entry_json`'s
    text, in the same order)."""

    paths: list[str]
    texts: list[str]


class Built(NamedTuple):
    """A prefix's manifest, the canonical JSON of its files (`entries_json`) and its stats' bytes (`stats_bytes`),
    made in one pass over the files: `write` then encodes no file again; and every entry's text (`entries`)."""

    manifest: EnvironmentManifest
    files_json: bytes
    stats_json: bytes
    entries: Entries


_FINGERPRINT_FIELDS = attrgetter("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_mode", "st_nlink")


def built(
    prefix: Path,
    known: Mapping[str, str] | None = None,
    scanned_tree: tuple[dict[str, os.stat_result], dict[str, os.stat_result]] | None = None,
    hashed: Mapping[str, list] | None = None,
    taken: Entries | None = None,
) -> Built:
    """The manifest of a prefix, its files' canonical JSON and its stats (each file's `fingerprint`, the folders:
    they differ between machines, so are kept apart), in one pass over the files.
    `known` gives the sha256 of files whose content was already proven (against their package's manifest),
    so they are not read again; `scanned_tree`: what `scan_tree` found, when the caller walked the prefix
    (unchanged since) for its own checks; `hashed`: path -> [device, inode, size, mtime_ns, ctime_ns, sha256, link
    count] of files a check just read (conformance), whose sha256 stands where the file's lstat is still that one
    (the same inode, untouched since: a hard link of it made or removed since counts, `stat_rules.ctime_stands`).
    `taken`: entries the caller vouches for, each a covered file of the walk (a placement's kept ones:
    `placed_entries.kept`), taken as their texts; only the other paths are worked out here, and the manifest's
    `files` then holds those alone (its whole encoding is `files_json`, as `write` takes it)."""
    scanned, folder_infos = scanned_tree or scan_tree(prefix)  # one lstat per path, from the walk itself
    known = {**_unchanged(scanned, hashed), **(known or {})} if hashed else (known or {})
    rest = scanned.keys() - set(taken.paths) if taken is not None else scanned
    own = sorted(relative for relative in rest if covered(relative))
    entries: list[ManifestEntry] = []
    texts: list[str] = []  # each entry's canonical JSON, made here rather than in a second pass (`_entry_json`)
    quote, is_record, is_regular = encode_basestring_ascii, conda_meta.is_record, stat.S_ISREG
    for relative in own:  # one pass: 15,000 files a torch, a venv's few dozen beside a placement's kept entries
        info = scanned[relative]
        mode, digest = info.st_mode, known.get(relative)
        if digest is not None and is_regular(mode) and not is_record(relative):
            size, bits = info.st_size, "755" if mode & 0o111 else "644"
            entry: ManifestEntry = {"path": relative, "type": "file", "size": size, "mode": bits, "sha256": digest}
            text = (
                f'{{"mode":"{bits}","path":{quote(relative)},"sha256":{quote(digest)},"size":{size},"type":"file"}}'
                if type(digest) is str
                else _entry_json(entry)
            )
        else:  # read: few and small
            entry = entry_of(prefix, relative)
            text = _entry_json(entry)
        entries.append(entry)
        texts.append(text)
    every = _merged(taken, Entries(own, texts)) if taken is not None else Entries(own, texts)
    infos = list(map(scanned.__getitem__, every.paths))
    fingerprints = list(chain.from_iterable(map(_FINGERPRINT_FIELDS, infos)))  # as `fingerprint`, at C speed
    stats_json = _stats_json(sorted(folder_infos), every.paths, fingerprints)
    files_json = ("[" + ",".join(every.texts) + "]").encode()
    return Built({"format": 1, "files": entries}, files_json, stats_json, every)


def _merged(taken: Entries, own: Entries) -> Entries:
    """Two sorted runs of entries of distinct paths as one sorted run: `own`'s few put in place among `taken`'s many
    (slices of the long lists, no loop over them)."""
    paths: list[str] = []
    texts: list[str] = []
    start = 0
    for relative, text in zip(own.paths, own.texts):
        at = bisect_left(taken.paths, relative, start)
        paths += taken.paths[start:at]
        texts += taken.texts[start:at]
        paths.append(relative)
        texts.append(text)
        start = at
    return Entries(paths + taken.paths[start:], texts + taken.texts[start:])


def _unchanged(scanned: Mapping[str, os.stat_result], hashed: Mapping[str, list]) -> dict[str, str]:
    """The sha256 of each hashed file whose lstat now is the one it was hashed with."""
    found = {}
    for relative, seen in hashed.items():
        info = scanned.get(relative)
        links = seen[6] if len(seen) > 6 and type(seen[6]) is int else None
        if (
            info is not None
            and seen[:4] == [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]
            and ctime_stands(links, info.st_nlink, seen[4], info.st_ctime_ns)
        ):
            found[relative] = seen[5]
    return found


def fingerprint(info: os.stat_result) -> list[int]:
    """What the fast check compares before re-hashing a file (`unchanged`): size, mtime, ctime (moved by any write or
    chmod, and not settable back), inode (a file replaced by another), the full mode (setuid, o+w), and the link
    count the ctime was seen with."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode, info.st_nlink]


def unchanged(before: list | None, now: list[int]) -> bool:
    """Whether a recorded `fingerprint` still stands for the file whose fingerprint is `now`: the same size, mtime,
    inode and mode, and a ctime that stands (`stat_rules.ctime_stands`: the same, or moved with the link count,
    which is no edit: removing another environment that shares the file moves both). A record of five fields (an
    older lockgen's, without the link count) stands only where all five are the same."""
    if before is None or len(before) < 5:
        return False
    if len(before) == 5:
        return before == now[:5]
    return before[:2] == now[:2] and before[3:5] == now[3:5] and ctime_stands(before[5], now[5], before[2], now[2])


def refresh_fingerprints(prefix: Path, stats: ManifestStats, verified: dict[str, list[int]]) -> None:
    """Records the fingerprints of files just re-hashed and found equal. A file's ctime is shared by every
    hard link of its inode, and environments hard-link the package cache: materializing a sibling
    environment (or `cp -al`, or exporting with hard links) moves it for all of them. Without this, every
    fast check after such churn would re-hash those files again. Only bytes just proven are recorded; an
    environment lockgen cannot write (an image, a read-only mount) is left as it is."""
    if not os.access(prefix / STATS, os.W_OK):
        return
    try:
        write_bytes_atomic(prefix / STATS, stats_bytes({**stats, "files": {**stats["files"], **verified}}))
    except OSError:
        return


def digest(manifest: EnvironmentManifest) -> str:
    """The environment digest: the sha256 of the manifest's canonical JSON (its files encoded by `entries_json`)."""
    if not isinstance(manifest.get("files"), list):
        return canonical_digest(manifest)
    return hashlib.sha256(canonical_json_with(manifest, {"files": entries_json(manifest["files"])})).hexdigest()


FILE_KEYS = ("mode", "path", "sha256", "size", "type")  # a file entry's keys, sorted as canonical JSON sorts them
_FILE_KEY_SET = frozenset(FILE_KEYS)


def _entry_json(entry: Any) -> str:
    """`canonical_json(entry)` as text; a file entry (the bulk of a manifest) written field by field, which is two
    to three times faster than the encoder sorting each entry's keys, anything else by the encoder itself."""
    if isinstance(entry, dict) and entry.get("type") == "file" and entry.keys() == _FILE_KEY_SET:
        mode, path, sha256, size = entry["mode"], entry["path"], entry["sha256"], entry["size"]
        if type(mode) is str and type(path) is str and type(sha256) is str and type(size) is int:
            quote = encode_basestring_ascii
            return f'{{"mode":{quote(mode)},"path":{quote(path)},"sha256":{quote(sha256)},"size":{size},"type":"file"}}'
    return canonical_json(entry).decode()


def entries_json(entries: Sequence[Any]) -> bytes:
    """The canonical JSON of a manifest's list of entries, byte for byte `canonical_json(entries)` (the tests hold
    it to that), made in a third of the time: 15,000 files of a torch 0.03 s instead of 0.08 s here."""
    return ("[" + ",".join(map(_entry_json, entries)) + "]").encode()


STATS_LAYOUT = 2  # stats.json as `fingerprint_records` columns; 1 (no `layout`): an object of lists per path
STATS_WIDTH = 6  # the integers of a `fingerprint`


def stats_bytes(stats: ManifestStats) -> bytes:
    """`.lockgen/stats.json` (`fingerprint_records`, layout `STATS_LAYOUT`): the folders (`dirs`, sorted), the files'
    paths, and their `fingerprint`s end to end (size, mtime_ns, ctime_ns, inode, mode, link count each)."""
    files = {path: fingerprint for path, fingerprint in stats["files"].items() if len(fingerprint) == STATS_WIDTH}
    return _stats_json(stats["dirs"], list(files), list(chain.from_iterable(files.values())))


def _stats_json(dirs: list[str] | None, paths: list[str], fingerprints: list[int]) -> bytes:
    return fingerprint_records.encode({"layout": STATS_LAYOUT, "dirs": dirs}, paths, fingerprints) + b"\n"


def write(
    prefix: Path,
    manifest: EnvironmentManifest,
    stats: ManifestStats | bytes | None,
    extra: Mapping[str, str],
    files_json: bytes | None = None,
) -> str:
    """Writes the manifest with `extra` and its environment digest (`digest(manifest)`, which it returns) under
    `environment_digest`, and the stats (`stats_bytes`, or their bytes: `built`'s). The files are encoded once for
    both the digest and the file (canonical, so compact: json's C encoder runs only without indent; 60,000 files in
    0.1 s, not 1 s), or not at all where `files_json` is their encoding already (`built`). `stats` None: no file was
    fingerprinted here (an existing environment's record), written as no fingerprints."""
    files = {"files": files_json if files_json is not None else entries_json(manifest["files"])}
    environment = hashlib.sha256(canonical_json_with(manifest, files)).hexdigest()
    (prefix / ".lockgen").mkdir(exist_ok=True)
    # replaced, never written in place: a file there that is a hard link (a package's, or a store's) keeps its bytes
    write_bytes_atomic(
        prefix / MANIFEST, canonical_json_with({**manifest, **extra, "environment_digest": environment}, files) + b"\n"
    )
    if not isinstance(stats, bytes):
        stats = stats_bytes(stats or {"files": {}, "dirs": None})
    write_bytes_atomic(prefix / STATS, stats)
    return environment


def read(prefix: Path) -> tuple[EnvironmentManifest, ManifestStats]:
    """The manifest and the stats (`files` fingerprints, `dirs`). A manifest that is not one (cut short by a
    crash or a full disk, or edited) is an error naming it; stats that are not lockgen's (an older lockgen's,
    size and mtime per path, or damaged ones) read as fingerprints that never match, so every file is
    re-hashed."""
    path = prefix / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except (
        ValueError,
        RecursionError,
    ):  # not UTF-8 JSON (UnicodeDecodeError is a ValueError), or nested past the parser
        manifest = None
    why = not_a_manifest(manifest)
    if why is not None:
        raise UserError(
            f"`{path}` is damaged ({why}): the environment's record cannot be read",
            "remove the environment and materialize it again",
        )
    return manifest, _stats(prefix / STATS)


def not_a_manifest(manifest: object) -> str | None:
    """What makes `manifest` not a manifest `build` writes, or None."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return "not a JSON object with a list of files"
    for entry in manifest["files"]:
        if not isinstance(entry, dict) or type(entry.get("path")) is not str:
            return "an entry without a path"
        kind = entry.get("type")
        if kind == "file" and not (
            type(entry.get("size")) is int and type(entry.get("mode")) is str and type(entry.get("sha256")) is str
        ):
            return f"file `{entry['path'][:200]}` without its size, mode and sha256"
        if kind == "link" and type(entry.get("target")) is not str:
            return f"link `{entry['path'][:200]}` without its target"
        if kind not in ("file", "link", "special"):
            return f"`{entry['path'][:200]}` of no known kind"
    return None


def _stats(path: Path) -> ManifestStats:
    """The stats at `path`; none where there are none or they cannot be read (`stats_of`)."""
    try:
        data = path.read_bytes() if path.is_file() else b""
    except OSError:
        data = b""
    return stats_of(data)


def stats_of(data: bytes) -> ManifestStats:
    """The stats in `data` (`stats_bytes`); no fingerprints (every file hashed again) where they are not lockgen's
    of this layout: an older lockgen's, damaged ones, or none written. The folders are those of this layout's
    record or of an older lockgen's (`_older_folders`); none (no folder compared) where neither names them."""
    record = fingerprint_records.decode(data, STATS_LAYOUT, STATS_WIDTH)
    if record is None:
        return {"files": {}, "dirs": _older_folders(data)}
    paths, values = cast(list[str], record["paths"]), cast(list[int], record["fingerprints"])  # checked by `decode`
    files = dict(zip(paths, map(list, zip(*[iter(values)] * STATS_WIDTH))))  # `STATS_WIDTH` at a time
    return {"files": files, "dirs": _folders(record.get("dirs"))}


def _older_folders(data: bytes) -> list[str] | None:
    """The folders named by stats an older lockgen wrote (layout 1, no `layout` key: fingerprints as an object of
    lists per path, beside the same `dirs`), so a check still finds a folder added since, and keeps them when it
    writes the stats anew; None for anything else (damaged, another layout, or older still: no `dirs`)."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or "layout" in record or not isinstance(record.get("files"), dict):
        return None
    return _folders(record.get("dirs"))


def _folders(dirs: object) -> list[str] | None:
    return dirs if isinstance(dirs, list) and all(type(d) is str for d in dirs) else None
