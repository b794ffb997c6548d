"""The kept `run`: what `lockgen run LOCK -- CMD` (and a repeated `materialize LOCK`) needs to find a lock's
environment made and unchanged, kept as one small record per (lock bytes, lock file name, `--platform`, `--prefix`,
machine) under `$LOCKGEN_HOME/kept/<lockgen version>-<SCHEMA>/run/<key>`, read with nothing imported but `os`, a
SHA-256 (`stat_digest.sha256`), `marshal` and `time` (no pathlib, re, json, typing or dataclasses: a command that
only starts a program in a made environment costs little more than the interpreter's own start).

A record is written (`keep`) only after the full fast path proved the environment (`kept_inputs`' checked lock, the
drift check's kept clean verdict of the tree's stat walk, within the stat trust window), and holds: the
environment's prefix, the digest of the stat walk that verdict was for, the time that check last read every byte,
and the identity (device, inode, size, mtime, ctime) of the verdict's and the read time's files as they were when
the verdict was confirmed. `found` stands for that same proof only while all of it holds again: the lock file's
bytes hash to the record's key, both files are exactly the ones confirmed (any rewrite, a dropped verdict or a
newer read time moves an identity: every record is written whole to a new file), the trust window has not
ended (`LOCKGEN_STAT_TRUST_S`, read now), and a fresh stat walk of the whole tree gives the verdict's digest with
every file's link count and ctime as the verdict saw them (one moved with its link count: the full path, which
renews the verdict, then the record).
Anything else reads as not kept, and the command goes the full way, which words every error. So it trusts what
the drift verdict trusts (docs/guide/store.md), and no more: the lockgen home is lockgen's own, as for every kept
value. `LOCKGEN_REPARSE=1`, or removing `kept/`, turns it off.

It also holds what every kind of kept value shares: the switch (`trusted`), their folders (`kept_folder`), and
the stamp of the rules a kept input was made under (`rules_stamp`)."""

from __future__ import annotations

import marshal
import os
import time

from lockgen import __version__
from lockgen.adapters import user_files
from lockgen.adapters.proof import stat_digest
from lockgen.adapters.home import home_folder
from lockgen.errors import LockgenError

TYPE_CHECKING = False  # typing is not imported: this module is the kept `run`'s whole path
if TYPE_CHECKING:
    from hashlib import _Hash as Hash
    from pathlib import Path

SCHEMA = 2  # the record's form: raised whenever what is kept, or what `found` takes from it, changes
REPARSE = "LOCKGEN_REPARSE"
RECORD_LIMIT = 1 << 16  # a record is a few hundred bytes
Identity = tuple[int, int, int, int, int]


class KeptRun:
    """A lock's environment found made and unchanged by its kept record: its prefix, kind (`conda`, `venv`),
    the name its activation gives it, its environment digest (64 hex digits), and the lines saying it was
    found and naming its prefix (escaped when they were kept)."""

    __slots__ = ("digest", "kind", "name", "prefix", "said", "shown")

    def __init__(self, prefix: str, kind: str, name: str, digest: str, said: str, shown: str) -> None:
        self.prefix, self.kind, self.name, self.digest, self.said, self.shown = prefix, kind, name, digest, said, shown


def trusted() -> bool:
    """Whether kept values may be used (not when `$LOCKGEN_REPARSE` is set to anything but 0 or empty)."""
    return os.environ.get(REPARSE, "") in ("", "0")


def kept_folder(kind: str, schema: int | None) -> str:
    """The folder of kept values of `kind` (`lock`, `stack`, `run`) for this lockgen and their form's `schema`; for
    None, one folder for every lockgen: its records name the rules they were made under themselves (`rules_stamp`)."""
    return os.path.join(home_folder(), "kept", kind if schema is None else f"{__version__}-{schema}/{kind}")


_rules_stamp: list[str] = []


def rules_stamp() -> str:
    """What a kept value was made under: lockgen's version and a digest of the stat (path, size, mtime, ctime,
    inode) of every file of its package (its sources, the kept forms' readers among them, and the data its rules
    read) and of the certificate schema it may import (`verify/schema.py`). Any edit, install or checkout of any of
    them gives another stamp, so no one need remember to raise a number when a rule or a kept form changes.

    It trusts the stat, as git's index does: a file rewritten moves its ctime (which no program can set back), so
    only an edit within the same clock tick as the file's last change, with its size kept, would go unseen. The
    files' bytes are not read (hashing the sources costs about eight times their stat: docs/measurements.md), and
    the stat is taken once per process, only by a command that reads or keeps a kept input (the kept `run` of a
    lock reads none)."""
    if not _rules_stamp:
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        digest = stat_digest.sha256(__version__.encode())
        try:
            folders = [package]
            while folders:
                folder = folders.pop()
                with os.scandir(folder) as entries:
                    for entry in sorted(entries, key=lambda found: found.name):
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name != "__pycache__":
                                folders.append(entry.path)
                            continue
                        _stat_into(digest, entry.path, entry.stat())
            schema = os.path.join(os.path.dirname(package), "verify", "schema.py")
            if os.path.isfile(schema):
                _stat_into(digest, schema, os.stat(schema))
        except OSError:  # the package cannot be listed: its rules cannot be told, so nothing kept is taken
            digest.update(os.urandom(16))
        _rules_stamp.append(f"{__version__} rules {digest.hexdigest()[:32]}")
    return _rules_stamp[0]


def _stat_into(digest: Hash, path: str, found: os.stat_result) -> None:
    identity = (path, found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino, found.st_dev)
    digest.update("\0".join(map(str, identity)).encode("utf-8", "surrogateescape") + b"\n")


def _given_prefix(prefix: str | None) -> str:
    """A `--prefix` as the key names it: absolute, without empty or `.` parts ("" when none is given)."""
    if prefix is None:
        return ""
    parts = [part for part in os.path.join(os.getcwd(), prefix).split("/") if part not in ("", ".")]
    return "/" + "/".join(parts)


def _inputs(lock_sha256: str, lock_name: str, platform: str | None, prefix: str | None) -> list[str]:
    return [lock_sha256, lock_name, platform or "", _given_prefix(prefix), os.uname().machine]


def _record_path(inputs: list[str]) -> str:
    return os.path.join(
        kept_folder("run", SCHEMA), stat_digest.sha256("\0".join(inputs).encode("utf-8", "surrogateescape")).hexdigest()
    )


def _identity(path: str) -> Identity | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def identities(verdict: Path, read: Path) -> tuple[Identity | None, Identity | None]:
    """The identities of the drift verdict's file and its read time's file (None: not there)."""
    return _identity(str(verdict)), _identity(str(read))


def keep(
    lock_sha256: str,
    lock_name: str,
    platform: str | None,
    prefix: str | None,
    found: KeptRun,
    tree: tuple[str, str],
    files: tuple[Path, Path],
    confirmed: tuple[Identity, Identity],
    read_at: float,
) -> None:
    """Keeps the record of an environment the full fast path just proved (`found`), by the drift verdict of the
    stat walk `tree` (its digest, and the `stamps_digest` of its link counts and ctimes) whose files (`files`: verdict,
    read time) had the identities `confirmed` before and after
    that proof, its bytes last read whole at `read_at`. Best-effort: a home lockgen cannot write keeps nothing."""
    from lockgen.adapters.atomic_files import write_bytes_atomic  # tempfile: only a command that keeps loads it

    inputs = _inputs(lock_sha256, lock_name, platform, prefix)
    record = {
        "inputs": [__version__, str(SCHEMA), *inputs],
        "prefix": found.prefix,
        "kind": found.kind,
        "name": found.name,
        "digest": found.digest,
        "said": found.said,
        "shown": found.shown,
        "tree": tree[0],
        "stamps": tree[1],
        "files": [str(files[0]), str(files[1])],
        "confirmed": [list(confirmed[0]), list(confirmed[1])],
        "read_at": float(read_at),
    }
    path = _record_path(inputs)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        from pathlib import Path

        write_bytes_atomic(Path(path), marshal.dumps(record))
    except (OSError, LockgenError):  # a home lockgen cannot write: the next run goes the full way again
        return


def standing(lock_sha256: str, lock_name: str, platform: str | None, prefix: str | None) -> bool:
    """Whether a record for these inputs is kept and its proof's files still stand (no walk: for a writer that
    need not write it again)."""
    inputs = _inputs(lock_sha256, lock_name, platform, prefix)
    record = _record(_record_path(inputs), [__version__, str(SCHEMA), *inputs])
    return record is not None and _proof_stands(record)


def found(lock: str, platform: str | None, prefix: str | None) -> KeptRun | None:
    """The environment of the lock file `lock` (`--platform`, `--prefix` as given) when its kept record holds
    again in full (this module's docstring), the dead builds beside it swept; None, with nothing said or done,
    for anything else."""
    if not trusted():
        return None
    try:
        data = user_files.read_bytes(lock)
    except OSError:
        return None
    inputs = _inputs(stat_digest.sha256(data).hexdigest(), os.path.basename(lock), platform, prefix)
    record = _record(_record_path(inputs), [__version__, str(SCHEMA), *inputs])
    if record is None or not _proof_stands(record):
        return None
    final = record["prefix"]
    try:
        walked = stat_digest.small_tree_digests(final)
        if walked is None:  # a tree too big for one process: walked as the full path walks it, shared among the cores
            from pathlib import Path

            from lockgen.adapters.proof.stat_walk import tree_fingerprint

            whole = tree_fingerprint(Path(final))
            walked = (whole.digest, stat_digest.stamps_digest(whole.stamps))
        if walked != (record["tree"], record["stamps"]):  # the same walk, every link count and ctime as they were
            return None
        _sweep_dead_builds(final)
    except OSError:  # gone, or unreadable: the full path says which
        return None
    return KeptRun(final, record["kind"], record["name"], record["digest"], record["said"], record["shown"])


def _record(path: str, inputs: list[str]) -> dict | None:
    """The record at `path` when it is one `keep` wrote for exactly `inputs`, every field of its type."""
    try:
        record = marshal.loads(user_files.read_bytes(path, RECORD_LIMIT, "kept run record"))
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(record, dict) or record.get("inputs") != inputs:
        return None
    strings = ("prefix", "kind", "name", "digest", "said", "shown", "tree", "stamps")
    if (
        not all(isinstance(record.get(key), str) for key in strings)
        or record["kind"] not in ("conda", "venv")
        or not os.path.isabs(record["prefix"])
    ):
        return None
    if len(record["digest"]) != 64 or record["digest"].strip("0123456789abcdef"):  # said as it is: hex digits only
        return None
    files, confirmed, read_at = record.get("files"), record.get("confirmed"), record.get("read_at")
    if not (isinstance(files, list) and len(files) == 2 and all(isinstance(f, str) for f in files)):
        return None
    if not (
        isinstance(confirmed, list)
        and len(confirmed) == 2
        and all(isinstance(i, list) and len(i) == 5 and all(type(n) is int for n in i) for i in confirmed)
    ):
        return None
    return record if type(read_at) is float else None


def _proof_stands(record: dict) -> bool:
    """Whether the drift verdict and read time the record was confirmed with are the very files there now, and
    the stat trust window that read began has not ended (read now: an unreadable setting is the full path's to word)."""
    verdict, read = record["files"]
    if [_identity(verdict), _identity(read)] != [tuple(i) for i in record["confirmed"]]:
        return False
    try:
        window = stat_digest.trust_window_s()
    except LockgenError:  # the setting is not a number of seconds: the full path refuses it, worded
        return False
    read_at, now = record["read_at"], time.time()
    return bool(read_at <= now < read_at + window)


def _sweep_dead_builds(final: str) -> None:
    """Removes what an interrupted build of this environment left beside it (`file_guard.sweep_dead_builds`),
    looked for by name first: the guard's imports only when one is there."""
    parent, name = os.path.split(final)
    if any(entry.startswith(f".{name}.tmp-") for entry in os.listdir(parent)):
        from pathlib import Path

        from lockgen.adapters.store.file_guard import sweep_dead_builds

        sweep_dead_builds(Path(parent), name)
