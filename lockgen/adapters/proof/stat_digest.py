"""The records a stat walk hashes, with nothing imported but `os`, `stat`, a SHA-256 and `time`: one folder's
record, a subtree's, the top of a tree walked a level at a time, and the digest of a walk's records. `stat_walk`
builds its tree fingerprint from these (sharing a big tree's subtrees among forked children); the kept `run`
(`kept_runs`) walks a tree small enough for one process with them alone, so it costs no more imports than the
walk itself, and gives the same digest as `stat_walk.tree_fingerprint` of the same tree.

A file changed less than `RACY_NS` before a look is not trusted by its fingerprint later (git's racy entries): a
file system stamps times from a coarse clock (a jiffy, or a whole second on some), so an edit made in the same
tick right after lockgen read a file would leave it unchanged."""

from __future__ import annotations

import os
import stat
import time

from lockgen.errors import UserError

try:  # the interpreter's own SHA-256, which hashlib itself falls back to: the same digests without loading OpenSSL's
    # libcrypto (about 5 ms of CPU at each start) on the kept `run`'s path, which hashes only a lock and stat records
    from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]  # CPython >= 3.12
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]  # CPython 3.11
    except ImportError:  # an interpreter built without its own hashes
        from hashlib import sha256  # type: ignore[assignment,unused-ignore]

TYPE_CHECKING = False  # typing is not imported: this module is on the kept `run`'s path
if TYPE_CHECKING:
    from collections.abc import Callable

    Waiting = tuple[
        str, str, int, int
    ]  # a folder waiting to be looked at: its path, relative path with a slash, link count, size
    Keep = Callable[[str, os.stat_result], None]

RACY_NS = 1_000_000_000  # a whole second: the coarsest stamps of the file systems lockgen trusts fingerprints on
FRONTIER = 64  # the top of a walk is looked at a level at a time until this many folders wait to be shared
TRUST_ENV = "LOCKGEN_STAT_TRUST_S"
DEFAULT_TRUST_S = 86400.0  # a day


def settled_since() -> int:
    """The time (ns) after which a change leaves a walked path unsettled: `RACY_NS` before now."""
    return time.time_ns() - RACY_NS


def folder_record(path: str, base: str, since: int, folders: list[Waiting], keep: Keep | None) -> str:
    """One folder's record (`base`, the digest of its entries' lines, how many, whether none but folders changed
    since `since`, the link count and ctime of its files and links: "-" for none), each field ended by a NUL, the
    record by a newline; its subfolders appended to `folders` (path, relative path with a slash, its link count:
    how many folders it holds, its size: about how many entries); `keep`, when given, gets each path but the
    folders with its lstat."""
    settled = True
    lines: list[str] = []
    stamps: list[str] = []
    add, stamp = lines.append, stamps.append
    with os.scandir(path) as entries:
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            mode = info.st_mode
            relative = base + entry.name
            if stat.S_ISDIR(mode):
                folders.append((entry.path, f"{relative}/", info.st_nlink, info.st_size))
                add(
                    f"{relative}\0{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} "
                    f"{info.st_ctime_ns} {mode}\n"
                )
                continue
            if keep is not None:
                keep(relative, info)
            if info.st_ctime_ns >= since:
                settled = False
            leads = "d" if stat.S_ISLNK(mode) and os.path.isdir(entry.path) else ""
            add(f"{relative}\0{info.st_dev} {info.st_ino} {info.st_size} {info.st_mtime_ns} {mode}{leads}\n")
            stamp(f"{info.st_nlink} {info.st_ctime_ns}")
    digest = sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{base}\0{digest}\0{len(lines)}\0{int(settled)}\0{' '.join(stamps) or '-'}\0\n"


def subtree_records(path: str, base: str, since: int, keep: Keep | None = None) -> str:
    """The records of one folder and every folder below it."""
    records = []
    pending: list[Waiting] = [(path, base, 0, 0)]
    while pending:
        folder, relative, _, _ = pending.pop()
        records.append(folder_record(folder, relative, since, pending, keep))
    return "".join(records)


def top_of_tree(
    prefix: str, since: int, keep: Keep | None, most_waiting: int = FRONTIER
) -> tuple[list[str], list[Waiting]]:
    """The records of the top of the tree at `prefix`, looked at a level at a time until `most_waiting` folders
    wait (none, for a small tree: then the records are the whole walk), and the folders waiting."""
    records: list[str] = []
    frontier: list[Waiting] = [(prefix, "", 0, 0)]
    while frontier and len(frontier) < most_waiting:
        level, frontier = frontier, []
        for path, base, _, _ in level:
            records.append(folder_record(path, base, since, frontier, keep))
    return records, frontier


def digest_of(records: list[str]) -> tuple[str, int, bool, dict[str, str]]:
    """The digest of a walk's folder records (in any order: they are sorted by the folder's path), how many paths
    they cover, whether all of them are settled, and the stamps (link counts and ctimes) of each folder's files."""
    rows = sorted(record.split("\0") for record in "".join(records).split("\0\n") if record)
    text = "".join(f"{base}\0{digest} {count}\n" for base, digest, count, _, _ in rows)
    paths = sum(int(count) for _, _, count, _, _ in rows)
    settled = all(calm == "1" for _, _, _, calm, _ in rows)
    stamps = {base: stamped for base, _, _, _, stamped in rows}
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest(), paths, settled, stamps


def stamps_digest(stamps: dict[str, str]) -> str:
    """One sha256 of a walk's stamps, for a record that holds them exactly (the kept `run`'s)."""
    return sha256(
        "".join(f"{base}\0{stamps[base]}\n" for base in sorted(stamps)).encode("utf-8", "surrogateescape")
    ).hexdigest()


def small_tree_digests(prefix: str) -> tuple[str, str] | None:
    """The digest `stat_walk.tree_fingerprint` gives the tree at `prefix` and the `stamps_digest` of its stamps,
    when the tree is small enough to be walked here at once (its top walk leaves no folder waiting); None for a
    bigger one (the caller walks it with `stat_walk`, shared among the cores). An OSError is the caller's (a tree
    gone, unreadable)."""
    records, frontier = top_of_tree(prefix, settled_since(), None)
    if frontier:
        return None
    digest, _, _, stamps = digest_of(records)
    return digest, stamps_digest(stamps)


def trust_window_s() -> float:
    """How many seconds after a check read every byte its kept fingerprints and verdict may stand for reading
    (`LOCKGEN_STAT_TRUST_S`, default a day; 0: every check reads every byte)."""
    text = os.environ.get(TRUST_ENV, "").strip()
    if not text:
        return DEFAULT_TRUST_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise UserError(
            f"{TRUST_ENV}={text[:40]!r} is not a number of seconds",
            "set it to 0 or more seconds (0: every check reads every byte), or unset it for a day "
            f"({DEFAULT_TRUST_S:.0f})",
        )
    return value
