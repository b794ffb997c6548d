"""The scrub and repair of lockgen's store (its uv cache and rattler cache): every byte of the files kept there
read again against the sha256 its proof keeps (`lockgen store verify`, as `nix store verify --check-contents`
does), a damaged folder moved out of the store into `$LOCKGEN_HOME/quarantine/` (never deleted unseen: it
is named, and kept for a look), and the environments that link its damaged inodes named with the command that
makes each again. The prefixes lockgen made are listed for that (`$LOCKGEN_HOME/proven/prefixes.jsonl`: a
line per build, the prefix, its lock and platform), beside the store's own environments."""

from __future__ import annotations

import glob
import json
import os
import shlex
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import parallel
from lockgen.adapters.store import file_guard
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home, store_envs

if TYPE_CHECKING:  # loaded where a damaged file is named (the results' module: about 12 ms a build does without)
    from lockgen.model.results import SharingEnvironment

QUARANTINE = "quarantine"
MOST_NOTES_BYTES = 1 << 20  # about 5,000 environments noted


def _prefixes() -> Path:
    return lockgen_home() / "proven" / "prefixes.jsonl"


def remember(prefix: Path, lock: Path, platform: str) -> None:
    """Notes an environment lockgen just made (one appended line), so that a damaged store file can name it; past
    `MOST_NOTES_BYTES` the notes are written again with the environments still there (one writer at a time)."""
    notes = _prefixes()
    notes.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"prefix": str(prefix), "lock": str(lock.absolute()), "platform": platform}) + "\n"
    with file_guard.held(notes.with_name(f"{notes.name}.lock")):
        with open(notes, "a", encoding="utf-8") as kept:
            kept.write(line)
        if notes.stat().st_size > MOST_NOTES_BYTES:
            write_bytes_atomic(
                notes,
                "".join(
                    json.dumps(note) + "\n" for note in _noted().values() if os.path.isdir(note["prefix"])
                ).encode(),
            )


def _noted() -> dict[str, dict[str, str]]:
    """The environments the notes name, by prefix (the latest line of each wins)."""
    made: dict[str, dict[str, str]] = {}
    try:
        lines = (
            _prefixes().read_bytes().decode("utf-8", "surrogateescape").splitlines()
        )  # a prefix is any bytes but NUL
    except OSError:
        lines = []
    for line in lines:
        try:
            note = json.loads(line)
        except ValueError:  # a line cut short by a run that was killed
            continue
        if isinstance(note, dict) and all(isinstance(note.get(key), str) for key in ("prefix", "lock", "platform")):
            made[note["prefix"]] = note
    return made


def _made() -> dict[str, dict[str, str]]:
    """The environments lockgen made that are still there, by prefix: those noted, and the store's own (an older
    one, made before the notes, is named with `LOCK` for its lock)."""
    made = _noted()
    for folder in sorted(store_envs().iterdir()) if store_envs().is_dir() else []:
        if not folder.name.startswith(".") and str(folder) not in made:
            made[str(folder)] = {"prefix": str(folder), "lock": "LOCK", "platform": ""}
    return {prefix: note for prefix, note in made.items() if os.path.isdir(prefix)}


def repair_command(note: Mapping[str, str]) -> str:
    """The shell command that makes an environment again from its lock: removed, then materialized at its prefix."""
    prefix = shlex.quote(note["prefix"])
    platform = f" --platform {shlex.quote(note['platform'])}" if note["platform"] else ""
    return f"rm -rf -- {prefix} && lockgen materialize {shlex.quote(note['lock'])} --prefix {prefix}{platform}"


def sharing(
    store: str, inodes: Iterable[tuple[int, int]], relatives: Iterable[str], besides: Path | None = None
) -> list[SharingEnvironment]:
    """The environments lockgen made (but `besides`, one being built) whose file at one of `relatives` is one of
    `inodes`: a conda package's files lie at the same path in a prefix (`store` "conda"), a wheel's under its
    site-packages ("wheel")."""
    from lockgen.model.results import SharingEnvironment

    wanted, paths = set(inodes), sorted(set(relatives))
    found = []
    for prefix, note in _made().items():
        if besides is not None and prefix == str(besides):
            continue
        tops = [prefix] if store == "conda" else glob.glob(f"{glob.escape(prefix)}/lib/python*/site-packages")
        if any(_inode(f"{top}/{relative}") in wanted for top in tops for relative in paths):
            found.append(SharingEnvironment(Path(prefix), repair_command(note)))
    return found


def _inode(path: str) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def damaged_files(folder: Path, proven: Mapping[str, str]) -> tuple[list[str], set[tuple[int, int]]]:
    """The files of `folder` (relative -> the sha256 proven) that are missing or hold other bytes, and the inodes of
    those still there; every file is read."""
    here: list[tuple[str, int]] = []
    missing: list[str] = []
    for relative in proven:
        try:
            info = os.lstat(folder / relative)
        except OSError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            here.append((str(folder / relative), info.st_size))
        else:  # gone, or a link or folder now: no proven file
            missing.append(relative)
    digests = parallel.hash_files(here)
    changed = [
        relative for relative in proven if digests.get(str(folder / relative), proven[relative]) != proven[relative]
    ]
    inodes = {inode for relative in changed if (inode := _inode(str(folder / relative))) is not None}
    return sorted(changed + missing), inodes


def quarantine(folder: Path, store: str) -> Path:
    """Moves a damaged store folder into `$LOCKGEN_HOME/quarantine/` (the same file system: a rename) and returns
    where it now is; the files keep their bytes for a look, and the store fetches the package again."""
    aside = lockgen_home() / QUARANTINE
    aside.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = aside / f"{stamp}-{store}-{folder.name}"
    count = 1
    while target.exists():
        count += 1
        target = aside / f"{stamp}-{store}-{folder.name}.{count}"
    os.rename(folder, target)
    return target
