"""Certificate verdicts kept by bytes and key: a certificate's verdict under a public key is a function of its
file's bytes and that key alone, so what `fleet status` read of a certificate it accepted (its
`CertificateFacts`, as plain values) is kept, with the fingerprint of the key that verified its signature ("" when
no key was given: the file was only found canonical, its signature, if any, well formed). A later status reads
each file's bytes again, hashes them and takes the kept facts; only a file whose bytes have no kept verdict under
one of the keys given now is parsed and verified.

Where: packs, as git keeps objects: each process that keeps verdicts writes them all to ONE file,
`$LOCKGEN_HOME/kept/<lockgen version>-<SCHEMA>/certificates/<pid>-<random>.pack` (10,000 files written and
renamed cost a cold status 5 s): the marshal records one after another, then an index of (sha256, offset, length)
sorted by sha256, a fan-out table of where each two-byte prefix's entries end (what a lookup holds of a pack:
256 KiB, whatever the count), and a trailer. A lookup reads the few index entries of its prefix and the record.
Past `MOST_PACKS` packs, the writer merges them into one (`merged-*.pack`: the records are copied, the merged
pack renamed in, then the others removed: a reader that misses a pack removed meanwhile verifies the
certificate again). Bounded: a run that takes a verdict from a merged pack notes its sha256 in its own pack (an
index entry without a record, 44 bytes), and a merge copies from the merged packs only the verdicts some run
took or kept since (a fleet's certificates no longer read, replaced or removed, are dropped there: their 5 KB
records, 500 MB a 100,000, no longer outlive them); a folder not read in `MOST_PACKS` packs' time is verified
again when it is.

What a kept verdict trusts: that a pack under lockgen's home was written by lockgen, after this version of
lockgen proved exactly the bytes whose sha256 names the record (signed by the key whose fingerprint it records:
over the file's own bytes, its frame exact, or over the canonical JSON of a file proven canonical; its body
accepted by the models) — the bytes are hashed on every run, so an edited, re-serialized or
re-signed file has another sha256 and is verified again, and refused as before. A verdict is kept only for
bytes the quick proof accepted as read (never for a refusal, which is made again each run and words its own
reason, nor for a file `read_signed` accepted by reading it a second time). A pack is written whole (a temporary
file and a rename) or not at all (a temporary left by a process stopped or killed is removed by a later run once
its writer is gone: `_sweep`); a record is taken only when it names the same sha256, lockgen version, rules (a
digest of the sources a certificate is accepted by, its models and its file's forms and signatures: a verdict an
older lockgen kept, which accepted what this one refuses, is no verdict now) and schema, and one of the keys given;
anything else (a pack cut short, an index out of its file) reads as not kept. Keeping is best-effort: a home
lockgen cannot write keeps nothing. `LOCKGEN_REPARSE=1`, or removing the `kept/` folder, verifies every
certificate."""

from __future__ import annotations

import array
import fcntl
import heapq
import marshal
import os
import re
import struct
import sys
import time
from collections.abc import Callable, Collection, Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

from lockgen import __version__
from lockgen.adapters.atomic_files import UMASK, temporary_beside
from lockgen.adapters.proof.kept_runs import kept_folder, trusted
from lockgen.adapters.spill_files import SortedSpill, SpillFile
from lockgen.errors import UserError

SCHEMA = 4  # the record's form: raised whenever what is kept, or what a reader takes from it, changes
RECORD_LIMIT = 1 << 20  # a record holds one certificate's figures and fingerprint: a few KiB
# the sources of what a certificate must be to be accepted (the schema and its models; its file's form and
# signature, and how each form's body is validated), from lockgen's folder
RULE_SOURCES = (
    "model/base.py",
    "model/certificate.py",
    "model/certificate_time.py",
    "model/plain_certificate.py",
    "model/json_values.py",
    "../verify/schema.py",
    "adapters/node/signing.py",
    "api/steps/certificate_steps.py",
    "api/steps/certificate_proof.py",
    "adapters/node/kept_schema.py",
)
_stamp: list[str] = []


def stamp() -> str:
    """lockgen's version and the sha256 of the rules' sources: what a kept verdict was made under."""
    if not _stamp:
        import hashlib

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        digest = hashlib.sha256()
        for source in RULE_SOURCES:
            try:
                with open(os.path.join(root, source), "rb") as stream:
                    digest.update(stream.read())
            except OSError:  # not installed beside lockgen: the rules cannot be told, so nothing kept is taken
                digest.update(os.urandom(16))
        _stamp.append(f"{__version__} rules {digest.hexdigest()[:16]}")
    return _stamp[0]


PACK = ".pack"
MERGED = "merged-"  # a merged pack's name begins so: its verdicts outlive the next merge only when taken meanwhile
TRAILER = struct.Struct("<QQ8s")  # where the index starts, how many entries, MAGIC
MAGIC = b"lgkept02"
ENTRY = struct.Struct("<32sQI")  # sha256 (raw), offset, length: sorted by sha256
FANOUT = 1 << 16  # per two-byte prefix of the sha256, how many entries have it or a smaller one
ENTRIES_HELD = 20_000  # a pack's index entries are sorted in runs of this many, spilled and merged
ENTRIES_READ = 4096  # a pack's index entries read at a time by a merge (176 KiB)
MOST_PACKS = 8  # more packs than this after a write: merged into one (each lookup reads every pack's index)
# a pack being written: `temporary_beside`'s name for `[merged-]<pid>-<16 hex>.pack`
_TEMPORARY = re.compile(rf"\.(?:{MERGED})?(\d{{1,7}})-[0-9a-f]{{16}}\.pack\.[^/]+\.tmp")  # Linux: pids < 2**22
STALE_S = 60  # a temporary pack of a process that is gone, untouched this long, is removed (`_sweep`)
MERGE_LOCK = ".merge.lock"  # held (flock) by the one merge that runs; the packs are listed again once it is held


class _Pack:
    """One pack, opened: its descriptor and fan-out table; records and index entries read as asked."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.merged = os.path.basename(path).startswith(MERGED)
        self._descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(self._descriptor).st_size
            if size < TRAILER.size:
                raise ValueError(path)
            self._index, self.count, magic = TRAILER.unpack(
                os.pread(self._descriptor, TRAILER.size, size - TRAILER.size)
            )
            fanout_at = self._index + self.count * ENTRY.size
            if magic != MAGIC or fanout_at + 4 * FANOUT + TRAILER.size != size:
                raise ValueError(path)
            self._fanout = array.array("I", os.pread(self._descriptor, 4 * FANOUT, fanout_at))
            if sys.byteorder != "little":
                self._fanout.byteswap()
        except BaseException:
            os.close(self._descriptor)
            raise

    def record(self, raw: bytes) -> bytes | None:
        prefix = int.from_bytes(raw[:2], "big")
        first = self._fanout[prefix - 1] if prefix else 0
        last = self._fanout[prefix]
        if not first < last <= self.count:
            return None
        entries = os.pread(self._descriptor, (last - first) * ENTRY.size, self._index + first * ENTRY.size)
        for sha256, offset, length in ENTRY.iter_unpack(entries):
            if sha256 == raw and 0 < length <= RECORD_LIMIT and offset + length <= self._index:
                return os.pread(self._descriptor, length, offset)
        return None

    def entries(self) -> Iterator[tuple[bytes, int, int]]:
        """(raw sha256, offset, length) of every entry, in index order (a length of 0: a verdict taken, no record)."""
        for first in range(0, self.count, ENTRIES_READ):  # a merge reads every pack's at once: a few at a time
            size = min(ENTRIES_READ, self.count - first) * ENTRY.size
            for sha256, offset, length in ENTRY.iter_unpack(
                os.pread(self._descriptor, size, self._index + first * ENTRY.size)
            ):
                if offset + length <= self._index and length <= RECORD_LIMIT:
                    yield sha256, offset, length

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._descriptor, length, offset)

    def close(self) -> None:
        os.close(self._descriptor)


class _PackWriter:
    """A pack being written to a temporary file beside the packs; renamed in whole by `finish`."""

    def __init__(self, folder: str, merged: bool = False) -> None:
        self._path = os.path.join(folder, f"{MERGED * merged}{os.getpid()}-{os.urandom(8).hex()}{PACK}")
        handle, temporary = temporary_beside(Path(self._path))  # `.NAME.pack.XXXX.tmp`: no reader takes it
        self._temporary = str(temporary)
        try:
            os.fchmod(handle, 0o666 & ~UMASK)  # as the other kept files are made
            self._stream = os.fdopen(handle, "wb")
        except BaseException:
            os.close(handle)
            os.unlink(self._temporary)
            raise
        self._entries = SpillFile()  # the index entries, sorted when the pack is finished (never one list)
        self._count = 0
        self._written = 0

    def add(self, raw: bytes, record: bytes) -> None:
        self._stream.write(record)
        self._entries.append(ENTRY.pack(raw, self._written, len(record)))
        self._count += 1
        self._written += len(record)

    def note(self, raw: bytes) -> None:
        """Notes that the verdict of `raw` was taken from a merged pack (an entry without a record)."""
        self._entries.append(ENTRY.pack(raw, 0, 0))
        self._count += 1

    def finish(self) -> str:
        """The pack's path, renamed in; its index, fan-out table and trailer written after the records."""
        self._entries.finish()
        fanout = array.array("I", bytes(4 * FANOUT))
        for entry in SortedSpill(self._entries.records(self._count), lambda entry: entry, ENTRIES_HELD):
            fanout[int.from_bytes(entry[:2], "big")] += 1
            self._stream.write(entry)
        total = 0
        for prefix in range(FANOUT):
            total += fanout[prefix]
            fanout[prefix] = total
        if sys.byteorder != "little":
            fanout.byteswap()
        self._stream.write(fanout.tobytes())
        self._stream.write(TRAILER.pack(self._written, self._count, MAGIC))
        self._stream.close()
        os.replace(self._temporary, self._path)
        return self._path

    def abandon(self) -> None:
        self._stream.close()
        try:
            os.unlink(self._temporary)
        except OSError:
            pass  # nothing was made


def folder() -> str:
    return kept_folder("certificates", SCHEMA)


class KeptVerdicts:
    """The kept verdicts of this home, opened once for a run's lookups (`verdict`), and what the run keeps
    (`keep`), written as one pack by `close` (a forked share opens its own: a pack per process)."""

    def __init__(self) -> None:
        self._folder = folder()
        self._packs: list[_Pack] = []
        self._writer: _PackWriter | None = None
        self._failed = False  # a home that could not be written: nothing more is tried
        if not trusted():
            return
        try:
            listed = os.listdir(self._folder)
        except OSError:
            listed = []
        names = sorted(name for name in listed if name.endswith(PACK))
        _sweep(self._folder, [name for name in listed if name.endswith(".tmp")])
        for name in names:
            try:
                self._packs.append(_Pack(os.path.join(self._folder, name)))
            except (OSError, ValueError, struct.error):
                continue  # removed meanwhile, or not a whole pack: nothing kept in it

    def __enter__(self) -> KeptVerdicts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def verdict(self, sha256: str, keys: Collection[str]) -> Any:
        """The value kept for the certificate bytes whose sha256 is `sha256`, verified under one of `keys` (key
        fingerprints; `{""}` when no key is given); None when none is kept (or kept values are off)."""
        try:
            raw = bytes.fromhex(sha256)
        except ValueError:
            return None
        for pack in self._packs:
            try:
                data = pack.record(raw)
                if data is None:
                    continue
                record = marshal.loads(data)
            except (OSError, EOFError, ValueError, TypeError):
                continue
            if (
                type(record) is tuple
                and len(record) == 5
                and record[:3] == (sha256, stamp(), SCHEMA)
                and record[3] in keys
            ):
                if pack.merged:  # taken from a merged pack: noted, so the next merge keeps it
                    self._write(lambda writer: writer.note(raw))
                return record[4]
        return None

    def keep(self, sha256: str, key: str, value: Any) -> None:
        """Keeps `value` (plain values marshal holds) for the certificate bytes whose sha256 is `sha256`, verified
        under the key whose fingerprint is `key` ("" for none), in this run's pack."""
        try:
            record = marshal.dumps((sha256, stamp(), SCHEMA, key, value))
        except ValueError:  # a value marshal cannot hold
            return
        self._write(lambda writer: writer.add(bytes.fromhex(sha256), record))

    def _write(self, entry: Callable[[_PackWriter], None]) -> None:
        """`entry` written to this run's pack, made at the first; nothing more once the home could not be written."""
        if self._failed:
            return
        try:
            if self._writer is None:
                os.makedirs(self._folder, exist_ok=True)
                self._writer = _PackWriter(self._folder)
            entry(self._writer)
        except (OSError, UserError):  # a home lockgen cannot write (read-only, full, a folder that takes no file)
            self._give_up()

    def close(self) -> None:
        """Writes this run's pack (when it kept anything), merging the packs when there are too many."""
        for pack in self._packs:
            pack.close()
        self._packs = []
        if self._writer is None:
            return
        try:
            self._writer.finish()
            self._writer = None
            _merge_when_many(self._folder)
        except (OSError, UserError):
            self._give_up()

    def _give_up(self) -> None:
        self._failed = True
        if self._writer is not None:
            self._writer.abandon()
            self._writer = None


def _sweep(where: str, temporaries: list[str]) -> None:
    """Removes the temporary packs of processes that ended before finishing them (a share its parent stopped when
    the status failed or was interrupted, a process killed): each names its writer's pid. One whose writer lives,
    or written to in the last `STALE_S` (a writer in another pid namespace sharing this home), is left."""
    now = time.time()
    for name in temporaries:
        found = _TEMPORARY.fullmatch(name)
        if found is None or _alive(int(found[1])):
            continue
        path = os.path.join(where, name)
        try:
            if now - os.lstat(path).st_mtime >= STALE_S:
                os.unlink(path)
        except OSError:
            continue  # removed meanwhile, or not ours to remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


def _merge_when_many(where: str) -> None:
    """More than `MOST_PACKS` packs in `where`: all merged into one, renamed in before the others are removed.
    Of a merged pack's verdicts only those another pack holds or notes (taken or kept since it was merged) are
    copied: the others' certificates were not read since."""
    if sum(name.endswith(PACK) for name in os.listdir(where)) <= MOST_PACKS:
        return
    try:
        lock = os.open(os.path.join(where, MERGE_LOCK), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return
    try:  # one merge at a time: another, between its rename and its removals, would take its merged pack for old
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process merges now: its merge covers these packs
        os.close(lock)
        return
    try:
        _merge_packs(where, sorted(name for name in os.listdir(where) if name.endswith(PACK)))
    finally:
        os.close(lock)  # the lock goes with its descriptor


def _merge_packs(where: str, names: list[str]) -> None:
    if len(names) <= MOST_PACKS:
        return
    packs: list[_Pack] = []
    for name in names:
        try:
            packs.append(_Pack(os.path.join(where, name)))
        except FileNotFoundError:  # removed since listed: another merge runs (the two shares of one status),
            for pack in packs:  # and this one, missing that pack's notes, would drop verdicts taken since
                pack.close()
            return
        except (OSError, ValueError, struct.error):
            continue
    try:
        writer = _PackWriter(where, merged=True)
        try:
            entries = heapq.merge(*(_entries_of(pack) for pack in packs), key=lambda entry: entry[0])
            for raw, group in groupby(entries, key=lambda entry: entry[0]):
                found = list(group)
                if all(pack.merged for *_, pack in found):
                    continue  # neither taken nor kept since its pack was merged
                copied = set()
                for _, offset, length, pack in found:
                    record = pack.read(offset, length) if length else b""
                    if record and record not in copied:
                        copied.add(record)
                        writer.add(raw, record)
            writer.finish()
        except BaseException:
            writer.abandon()
            raise
    except (OSError, ValueError, UserError, struct.error):
        return
    finally:
        for pack in packs:
            pack.close()
    for pack in packs:
        try:
            os.unlink(pack.path)
        except OSError:
            pass  # removed by another merge meanwhile


def _entries_of(pack: _Pack) -> Iterator[tuple[bytes, int, int, _Pack]]:
    for sha256, offset, length in pack.entries():
        yield sha256, offset, length, pack
