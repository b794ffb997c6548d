"""The manifest entries of a placement's files, kept beside the placement (`wheel_links`) by the first environment
lockgen places from it and taken whole by the record of each one after (`env_manifest.built`'s `taken`).

An environment's manifest gives each file its path, size, mode (755 or 644) and sha256. For the files a placement
places, those are the same in every environment made from it: the links are the proven store files (each new link
shows its proof's size and mode, `wheel_links._linked`, and its sha256 is the proof's), the written files are the
placement's kept bytes and modes, and none of them names the prefix (`wheel_links.keep`). So the canonical JSON of
their entries (a torch's 15,000: 0.08 s of work per environment) is kept, under
`$LOCKGEN_HOME/proven/placed/<key>.entries` (`LAYOUT`: a JSON header with the binding and the sha256 of the rest, the
paths as a JSON list, then one entry's text a line), bound (`binding`) to what they are made of: the rules they were
made by (`kept_runs.rules_stamp`), the placement's record (its paths, its written files' bytes and modes, each wheel's
paths' digest) and, of each wheel's proof, its sha256 column and each file's size and mode, never its inodes or times
(a proof renewed by every link keeps them). The venv's own files (whose bytes name the prefix) are worked out
per environment, as before. The entries are written aside (`keep`, `<key>.pending`) and kept (`vouch`) only once the
environment they were made from passed the checks after its placing: every file its wheels' RECORDs state placed
with the RECORD's sha256 (`wheel_steps._Work.agrees`), nothing unstated (`shared_steps._nothing_unstated`); both are
functions of what the binding binds (the RECORDs are the locked wheels', which the placement's key names), so an
environment that takes the entries takes that verdict with them and reads no RECORD (`Vouched`). Trusted as the
placement beside them is (`$LOCKGEN_HOME` is written by lockgen alone); entries of another binding, of another
form, cut short or changed (the header's sha256 of the rest), out of order, or naming a path the placement does not
place are not taken, and the environment is checked and recorded in full again; the file is read only if it is a
regular one (`user_files`: a FIFO put there is not waited on)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from array import array
from pathlib import Path
from typing import NamedTuple

from lockgen.adapters import user_files
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.adapters.proof import kept_runs
from lockgen.adapters.pypi import wheel_store
from lockgen.adapters.pypi.wheel_links import Plan
from lockgen.adapters.store import env_manifest
from lockgen.core.env.confined import child
from lockgen.errors import UserError

LAYOUT = 2


def binding(planned: Plan) -> str:
    """What the manifest entries of the files the plan places are made of (see the module's docstring); "" where a
    proof holds a size or mode no file has (no entries are then kept or taken)."""
    bound = hashlib.sha256(f"{LAYOUT} {kept_runs.rules_stamp()} {planned.placement.sha256}".encode())
    width = wheel_store.WIDTH
    try:
        for _, proof, _, _ in planned.spans:
            bound.update(f"\n{proof.sha256}\n".encode())
            bound.update(array("q", proof.fingerprints[2::width] + proof.fingerprints[4::width]).tobytes())
    except OverflowError:
        return ""
    return bound.hexdigest()


def _path(placement_key: str, suffix: str = "entries") -> Path:
    return child(lockgen_home() / "proven" / "placed", f"{placement_key}.{suffix}", "a placement's manifest entries")


class Vouched(NamedTuple):
    """A placement's kept entries, and of the files its wheels' RECORDs state, how many it places and how many of
    those are files uv wrote (hashed from their kept bytes: the rest are links to proven store files)."""

    entries: env_manifest.Entries
    stated: int
    hashed: int


def kept(placement_key: str, planned: Plan, bound: str) -> Vouched | None:
    """The entries kept for the placement under `bound` (`binding`), when they are of this form, sorted, each path
    once and placed by the plan; else None."""
    if not bound:
        return None
    try:
        head, rest = user_files.read_bytes(_path(placement_key)).split(b"\n", 1)
        header = json.loads(head)
        stated, hashed, digest = header.pop("stated"), header.pop("hashed"), header.pop("sha256")
        paths_json, body = rest.split(b"\n", 1)
        paths, texts = json.loads(paths_json), body.decode().split("\n")
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # none, not a file, cut short, not its header
        return None
    if header != {"layout": LAYOUT, "binding": bound} or digest != hashlib.sha256(rest).hexdigest():
        return None  # of another form or binding, or its paths and entries cut short or changed since written
    if not isinstance(paths, list) or len(paths) != len(texts):
        return None
    if type(stated) is not int or type(hashed) is not int:
        return None
    if set(map(type, paths)) - {str} or not all(map(str.__lt__, paths, paths[1:])):
        return None  # a path not a text, or out of order (sorted, each once: `env_manifest.built` merges them so)
    placed = planned.found  # every path the plan places: its links' and written files'
    return Vouched(env_manifest.Entries(paths, texts), stated, hashed) if all(map(placed.__contains__, paths)) else None


def keep(
    placement_key: str, planned: Plan, bound: str, stated: int, hashed: int, entries: env_manifest.Entries
) -> None:
    """Writes aside, under `bound`, the entries of an environment's manifest (`entries`: all of them, as
    `env_manifest.built` made them) that are of files the plan placed (`stated`, `hashed`: as `Vouched` counts them);
    `vouch` keeps them once that environment passed its checks. Nothing where they cannot be written (the next
    environment works them out again)."""
    if not bound:
        return
    placed = planned.found  # every path the plan places: its links' and written files'
    mine = [at for at, path in enumerate(entries.paths) if path in placed]
    paths = json.dumps([entries.paths[at] for at in mine], separators=(",", ":"))
    rest = "\n".join([paths, *(entries.texts[at] for at in mine)]).encode()
    header = {"layout": LAYOUT, "binding": bound, "stated": stated, "hashed": hashed}
    header["sha256"] = hashlib.sha256(rest).hexdigest()
    with contextlib.suppress(OSError, UserError):  # UserError: a folder or other non-file where it would be written
        write_bytes_atomic(
            _path(placement_key, "pending"), json.dumps(header, separators=(",", ":")).encode() + b"\n" + rest
        )


def vouch(placement_key: str) -> None:
    """Keeps the entries `keep` wrote aside: the environment they were made from passed the checks that follow its
    placing (every file its wheels' RECORDs state placed with their sha256, nothing unstated), so the next one made
    from the same placement under the same binding takes their verdict with them (`kept`)."""
    with contextlib.suppress(OSError):
        _path(placement_key, "pending").replace(_path(placement_key))
