"""Wheels placed into a fresh venv by lockgen itself, in one pass, as uv placed them before: no `uv pip install`.

uv installs a wheel from lockgen's store by hard-linking the files of its cache folder into the prefix and writing
a few of its own (the installed RECORD, INSTALLER, REQUESTED, direct_url.json, uv_cache.json, launchers, the
`.data/scripts` it copies, the prefix's `.lock`). Once uv has installed a lock's wheels into a fresh venv and every
file it linked is proven (`wheel_store`), what that install added to the venv is kept as the lock's placement
(`$LOCKGEN_HOME/proven/placed/<key>.json`, `LAYOUT`), keyed by the wheels (sha256 and URL, in the lock's order), the
uv binary (path, size, mtime), this process's umask and the layout: the folders it made, for each wheel the
prefix path of each proven file of its proof record (in the record's order, bound to the record's paths by their
sha256), and the bytes and mode of every file uv wrote. It is kept only when the install changed nothing of the
venv, made no link, special file or link to a file no proof names, wrote no file naming the prefix, and made its
folders with the umask's modes: what is kept is then all it did.

A later install of the same wheels into a fresh venv places the same tree (`placing`, `Placing.finish`): while
uv makes the venv, one thread makes the placement's folders beside it and another links each proven file into its
folder as soon as the folder is made, each store file judged by its proof (`wheel_store.stands`, the check uv's path
makes before uv links: its lstat right before its link; in a create -> remove -> create loop, the link's own lstat,
`_linked`) and the new link's lstat after, which must show the proof's device, inode, size, mtime and mode (a store
file replaced since the check is never taken) and is at once the environment's stat entry and the proof's
fingerprint to renew; once the venv is made (its `pyvenv.cfg` the one the placement was kept in), the top folders are
renamed into it, the rest linked, and the written files written from their kept bytes and modes. The caller holds
every file a wheel's RECORD states to the sha256 the plan places (`Plan.found`). Any doubt (no placement that holds,
a fingerprint moved, a path already there or under a link of the venv, a link across filesystems, an error) leaves
nothing of the pass in the venv, and uv installs as before.
`LOCKGEN_INSTALLER=uv` always leaves it to uv: the tests' oracle (tests/test_wheel_links.py compares both trees,
byte for byte)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, eq
from pathlib import Path
from typing import NamedTuple, cast

from lockgen.adapters import user_files
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.home import lockgen_home
from lockgen.adapters.pypi import wheel_store
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.adapters.store import env_manifest, file_guard
from lockgen.core.env.confined import child

LAYOUT = 1
INSTALLER = "LOCKGEN_INSTALLER"  # `uv`: every wheel installed by uv, none placed by lockgen (the tests' oracle)
WRITTEN_LIMIT = 16 << 20  # the bytes uv wrote that a placement keeps (RECORDs, launchers: kilobytes a wheel)
VENV_CONFIG = "pyvenv.cfg"
_CHECKED = attrgetter("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_mode")  # what a new link must show
_LINKS = attrgetter("st_nlink")
_IDENTITY = attrgetter("st_mode", "st_ino", "st_size", "st_mtime_ns")  # a venv file uv's install must leave alone


def by_uv() -> bool:
    """Whether every wheel is to be installed by uv (`LOCKGEN_INSTALLER=uv`)."""
    return os.environ.get(INSTALLER) == "uv"


def _umask() -> int:
    """This process's umask (uv's folders and files take their modes from it), read without changing it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return -1


def key(wheels: Sequence[tuple[str, str]], python: str) -> str:
    """The name a placement of these wheels (sha256, URL; in the lock's order) into a venv of Python `python` (the
    lock's X.Y: the same pure wheels under two Pythons keep two placements) is kept under: with the uv binary
    (another uv may place otherwise), the umask, and the `UV_*` settings uv is given besides lockgen's own (e.g.
    `UV_COMPILE_BYTECODE` makes uv write byte code a placement kept without it would not)."""
    uv = uv_binary()
    info = os.stat(uv)
    ours = wheel_store.uv_environment().keys() - os.environ.keys() | {"UV_CACHE_DIR", "UV_LINK_MODE"}
    settings = sorted(
        (name, value) for name, value in os.environ.items() if name.startswith("UV_") and name not in ours
    )
    bound = [LAYOUT, [list(wheel) for wheel in wheels], python, uv, info.st_size, info.st_mtime_ns, _umask(), settings]
    return hashlib.sha256(json.dumps(bound).encode()).hexdigest()


def _record_path(placement_key: str) -> Path:
    return child(lockgen_home() / "proven" / "placed", f"{placement_key}.json", "a lock's kept placement")


def _paths_digest(paths: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(paths).encode()).hexdigest()


class Written(NamedTuple):
    """A file uv wrote (prefix-relative), its mode and bytes."""

    path: str
    mode: int
    data: bytes


@dataclass(frozen=True)
class Placement:
    """A kept placement: the venv's `pyvenv.cfg` it was made in, the folders uv made (sorted: each after its parent),
    the site-packages folder, each wheel's (sha256, cache folder, sha256 of its proof's paths, prefix path of each
    proven file: "" for `site/<its path in the cache folder>`) and the files uv wrote."""

    venv: str
    folders: list[str]
    site: str
    wheels: list[tuple[str, str, str, list[str]]]
    written: list[Written]
    sha256: str = ""  # of the record's bytes, as read


def kept(placement_key: str) -> Placement | None:
    """The placement kept under this key; None where there is none, or one of another form, naming a path out of the
    prefix or a written file's mode no install gives it (`_allowed`). What a placement of
    this form says is trusted as the proofs beside it are (`$LOCKGEN_HOME` is written by lockgen alone): every file a
    wheel's RECORD states must be placed, with the sha256 the RECORD gives it (`Plan.found`), but the bytes of a
    launcher uv wrote are taken as kept."""
    try:
        raw = user_files.read_bytes(_record_path(placement_key))  # a FIFO there is refused, not waited on
        record = json.loads(raw)
        placement = Placement(
            record["venv"],
            record["folders"],
            record["site"],
            [(wheel, folder, digest, targets) for wheel, folder, digest, targets in record["wheels"]],
            [Written(path, mode, data.encode("latin-1")) for path, mode, data in record["written"]],
            hashlib.sha256(raw).hexdigest(),
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none, not JSON, not of this shape
        return None
    if not (record.get("layout") == LAYOUT and _typed(placement)):
        return None
    named = [*placement.folders, placement.site, *(written.path for written in placement.written)]
    if wheel_store.climbing(named + [target for *_, targets in placement.wheels for target in targets if target]):
        return None
    return placement


def _typed(placement: Placement) -> bool:
    """Whether a placement read is made of what it should be: texts, lists of them, modes of a file."""
    if not (isinstance(placement.folders, list) and isinstance(placement.written, list)):
        return False
    texts = [placement.venv, placement.site, *placement.folders, *(written.path for written in placement.written)]
    wheels = [text for wheel in placement.wheels for text in wheel[:3]]
    targets = [target for *_, each in placement.wheels for target in (each if isinstance(each, list) else [None])]
    modes = [written.mode for written in placement.written]
    return (
        set(map(type, texts + wheels + targets)) <= {str}
        and set(map(type, modes)) <= {int}
        and _allowed(placement.written)
    )


def _allowed(written: Sequence[Written]) -> bool:
    """Whether each written file's mode is permission bits only (no setuid, setgid or sticky bit) and lets no other
    user write it unless it is empty (uv's `.lock` is `rw-rw-rw-`): a file anyone may change is no file a placement
    can vouch for."""
    return all(0 <= entry.mode <= 0o777 and (not entry.mode & 0o002 or not entry.data) for entry in written)


def keep(
    placement_key: str,
    prefix: Path,
    venv: env_manifest.Tree,
    tree: env_manifest.Tree,
    site: str,
    proofs: Mapping[str, wheel_store.Proof],
) -> None:
    """Keeps what uv's install into the fresh venv at `prefix` did (`venv`: the venv's walk before it, `tree`: after
    it; `site`: its site-packages folder; `proofs`: each wheel's proof, just recorded), when that is all it did and
    every proven file of each wheel was linked once; else keeps nothing."""
    (before, folders_before), (files, folders) = venv, tree
    if any(path not in files or _IDENTITY(files[path]) != _IDENTITY(info) for path, info in before.items()):
        return
    if any(path not in folders or folders[path].st_mode != info.st_mode for path, info in folders_before.items()):
        return
    made = sorted(folders.keys() - folders_before.keys())
    if any(stat.S_IMODE(folders[path].st_mode) != 0o777 & ~_umask() for path in made):
        return
    new = {path: files[path] for path in files.keys() - before.keys()}
    by_inode = {(info.st_dev, info.st_ino): path for path, info in new.items() if info.st_nlink > 1}
    wheels: list[tuple[str, str, str, list[str]]] = []
    linked: set[str] = set()
    for wheel, proof in proofs.items():
        kept_fields = iter(proof.fingerprints)
        keys = [(device, inode) for device, inode, *_ in zip(*[kept_fields] * wheel_store.WIDTH)]
        targets = [target for inode_key in keys if (target := by_inode.pop(inode_key, None)) is not None]
        if len(targets) != len(keys):  # a proven file not linked (uv copied it)
            return
        linked.update(targets)
        short = ["" if target == f"{site}/{path}" else target for target, path in zip(targets, proof.paths)]
        wheels.append((wheel, proof.folder, _paths_digest(proof.paths), short))
    written = _written(prefix, {path: info for path, info in new.items() if path not in linked}, by_inode)
    if written is None or not wheels or not _allowed(written):
        return
    config = (prefix / VENV_CONFIG).read_text(errors="replace")
    record = {"layout": LAYOUT, "venv": config, "folders": made, "site": site, "wheels": wheels}
    record["written"] = [[entry.path, entry.mode, entry.data.decode("latin-1")] for entry in written]
    _record_path(placement_key).parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(_record_path(placement_key), json.dumps(record, separators=(",", ":")).encode())


def _written(
    prefix: Path, new: Mapping[str, os.stat_result], unproven: Mapping[tuple[int, int], str]
) -> list[Written] | None:
    """The files uv wrote among the new ones that are not links to proven files: plain files of one link, not naming
    the prefix, within `WRITTEN_LIMIT`; None where any new file is not so, or a link to a file no proof names."""
    if unproven:
        return None
    written, size, top = [], 0, str(prefix).encode()
    for path, info in sorted(new.items()):
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return None
        data = (prefix / path).read_bytes()
        size += len(data)
        if top in data or size > WRITTEN_LIMIT:
            return None
        written.append(Written(path, stat.S_IMODE(info.st_mode), data))
    return written


@dataclass
class Plan:
    """A placement bound to the proofs of now, ready to be made: the store files to link (absolute) with the prefix
    path of each and its proof's fingerprint (`WIDTH` integers), the sha256 of every file it places (the proof's for
    a link, the kept bytes' for a written file) and each wheel's span of the links."""

    placement: Placement
    sources: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    fingerprints: list[tuple[int, ...]] = field(default_factory=list)
    found: dict[str, str] = field(default_factory=dict)
    spans: list[tuple[str, wheel_store.Proof, int, int]] = field(default_factory=list)


def plan(placement: Placement, proofs: Mapping[str, wheel_store.Proof]) -> Plan | None:
    """What the placement links, when every wheel's proof is the one it was kept with (its folder and paths); else
    None."""
    made = Plan(placement)
    top, site, width = str(wheel_store.cache_dir()), placement.site, wheel_store.WIDTH
    for wheel, folder, digest, targets in placement.wheels:
        proof = proofs.get(wheel)
        if proof is None or proof.folder != folder or len(targets) != len(proof.paths):
            return None
        if _paths_digest(proof.paths) != digest:
            return None
        start = len(made.targets)
        made.sources += [f"{top}/{folder}/{path}" for path in proof.paths]
        made.targets += [target or f"{site}/{path}" for target, path in zip(targets, proof.paths)]
        made.fingerprints += zip(*(proof.fingerprints[at::width] for at in range(width)))
        digests = (proof.sha256[at : at + 64] for at in range(0, 64 * len(targets), 64))
        made.found.update(zip(made.targets[start:], digests))
        made.spans.append((wheel, proof, start, len(made.targets)))
    made.found.update((written.path, hashlib.sha256(written.data).hexdigest()) for written in placement.written)
    return made


def made_in(placement: Placement, prefix: Path) -> bool:
    """Whether the venv at `prefix` is the one the placement was kept in (its `pyvenv.cfg`: the Python and uv)."""
    try:
        return (prefix / VENV_CONFIG).read_text(errors="replace") == placement.venv
    except OSError:
        return False


class Placed(NamedTuple):
    """What a plan made: the prefix's whole tree with the lstat of each path (the venv's and all it placed), and the
    lstat of each link made, in the plan's order (the proofs' files now: the same inodes)."""

    tree: env_manifest.Tree
    links: list[os.stat_result]


class _Doubt(Exception):
    """A store file whose fingerprint is not its proof's, or a link that does not show it."""


class Placing:
    """A placement made while the venv is, in a folder beside it, then moved into it (`finish`). Two threads (mkdir
    and link wait in the kernel, not on the GIL; a torch's 1,100 folders cost 0.1-1 s of kernel time on a filesystem
    whose inodes were just freed, uv's as well): one makes the folders as soon as the placement is read, then the
    files uv wrote into them; the other, once the plan is given (`link`), links each store file into its folder as
    soon as that folder is made, its lstat checked against its proof (`wheel_store.stands`) right before the link
    and the new link's lstat after. What is left beside the venv is removed as the block of `placing` ends."""

    def __init__(self, placement: Placement, scratch: Path) -> None:
        self.placement, self.scratch = placement, scratch
        self.rank = {folder: at for at, folder in enumerate(placement.folders)}  # sorted: a parent before its child
        self.tops = [folder for folder in placement.folders if folder.rpartition("/")[0] not in self.rank]
        self.planned: Plan | None = None
        self.under: list[int] = []  # the links made beside the venv (those under a folder of the placement)
        self.infos: list[os.stat_result] = []
        self.folders: dict[str, os.stat_result] = {}
        self.wrote: dict[str, os.stat_result] = {}
        self.failed: list[Exception] = []
        self._made = 0  # how many folders are made (-1: the folders' thread failed)
        self._stopped = False  # nothing more to make: no plan, or a link failed
        self._progress = threading.Condition()
        self._given = threading.Event()
        self.threads = [threading.Thread(target=work, daemon=True) for work in (self._make_folders, self._link)]
        for thread in self.threads:
            thread.start()

    def link(self, planned: Plan | None) -> None:
        """Gives the plan to link (None: nothing to link, the placement does not hold: the folders stop)."""
        self.planned = planned
        self._stopped = self._stopped or planned is None
        self._given.set()

    def _made_up_to(self, count: int) -> None:
        with self._progress:
            self._made = count
            self._progress.notify_all()

    def _make_folders(self) -> None:
        top, made = str(self.scratch), 0
        try:
            for parent in sorted({folder.rpartition("/")[0] for folder in self.tops}):
                os.makedirs(f"{top}/{parent}", exist_ok=True)
            for made, folder in enumerate(self.placement.folders, 1):
                os.mkdir(f"{top}/{folder}")
                if made % 32 == 0:
                    if self._stopped:
                        return
                    self._made_up_to(made)
            self._made_up_to(len(self.placement.folders))
            self.folders = {folder: os.lstat(f"{top}/{folder}") for folder in self.placement.folders}
            inside = [written for written in self.placement.written if written.path.rpartition("/")[0] in self.rank]
            self.wrote = {written.path: _write(f"{top}/{written.path}", written) for written in inside}
        except Exception as exc:  # any failure is a doubt: `finish` says None, and uv installs
            self.failed.append(exc)
            self._made_up_to(-1)

    def _link(self) -> None:
        self._given.wait()
        planned = self.planned
        if planned is None:
            return
        rank, targets = self.rank, planned.targets
        where = [rank.get(target.rpartition("/")[0], -1) for target in targets]
        self.under = sorted((at for at in range(len(targets)) if where[at] >= 0), key=where.__getitem__)
        top, made = str(self.scratch), 0
        try:
            for start in range(0, len(self.under), 256):  # a share at a time, once its folders are made
                share = self.under[start : start + 256]
                needed = where[share[-1]] + 1
                if made < needed:
                    with self._progress:
                        self._progress.wait_for(lambda: self._made >= needed or self._made < 0)
                        made = self._made
                    if made < 0:
                        return
                self.infos += _linked(
                    [planned.sources[at] for at in share],
                    [f"{top}/{targets[at]}" for at in share],
                    [planned.fingerprints[at] for at in share],
                )
        except Exception as exc:  # any failure is a doubt: `finish` says None, and uv installs
            self.failed.append(exc)
            self._stopped = True

    def vouched(self) -> wheel_store.Trusted:
        """The store files this pass linked beside the venv, each found standing by its proof right before its link
        (as `wheel_store.trusted` finds them) and shown by the link after: where the pass is dropped, uv's install
        trusts them as it would have before the links moved their ctime."""
        planned = self.planned
        if planned is None:
            return {}
        return {
            (info.st_dev, info.st_ino): (info.st_size, info.st_mtime_ns, planned.found[planned.targets[at]])
            for at, info in zip(self.under, self.infos)
        }

    def join(self) -> None:
        """Waits for both threads (the links' given none first, where no plan was given)."""
        if not self._given.is_set():
            self.link(None)
        for thread in self.threads:
            thread.join()

    def finish(self, prefix: Path) -> Placed | None:
        """The plan moved into the fresh venv at `prefix` (the one the placement was kept in: `made_in`, judged before
        the plan was given to `link`) and the rest placed (links and written files straight in the venv's own
        folders); None, with nothing of it left in the venv, where a store file did not stand, a path it places is
        there already, or anything failed (another filesystem: uv copies then)."""
        self.join()
        planned, placement = self.planned, self.placement
        if self.failed or planned is None:
            return None
        files, folders = env_manifest.scan_tree(prefix)  # a venv just made: a few dozen paths
        placed = [*planned.targets, *(written.path for written in placement.written)]
        if not files.keys().isdisjoint([*placed, *placement.folders]) or not folders.keys().isdisjoint(
            placement.folders
        ):
            return None
        if not {path.rpartition("/")[0] for path in [*placed, *self.tops]} <= {"", *folders, *placement.folders}:
            return None  # under a link of the venv, or a file
        top, moved = str(prefix), []
        rest = sorted(set(range(len(planned.targets))) - set(self.under))
        written = [entry for entry in placement.written if entry.path not in self.wrote]
        try:
            for folder in self.tops:
                os.rename(f"{self.scratch}/{folder}", f"{top}/{folder}")
                moved.append(folder)
            direct = _linked(
                [planned.sources[at] for at in rest],
                [f"{top}/{planned.targets[at]}" for at in rest],
                [planned.fingerprints[at] for at in rest],
            )
            wrote = {**self.wrote, **{entry.path: _write(f"{top}/{entry.path}", entry) for entry in written}}
            walked = {**self.folders, **{path: os.lstat(f"{top}/{path}") for path in [*folders, *self.tops]}}
        except (OSError, _Doubt):
            _undo(top, moved, [planned.targets[at] for at in rest], written)
            return None
        infos: list[os.stat_result | None] = [None] * len(planned.targets)
        for at, info in chain(zip(self.under, self.infos), zip(rest, direct)):
            infos[at] = info
        links = cast("list[os.stat_result]", infos)  # every link's
        return Placed(({**files, **dict(zip(planned.targets, links)), **wrote}, walked), links)


def _linked(sources: Sequence[str], paths: Sequence[str], kept: Sequence[tuple[int, ...]]) -> list[os.stat_result]:
    """Each store file, found standing by its proof's fingerprint (`kept`), linked at its path; the lstat of each new
    link, which must show the proven file (its device, inode, size, mtime and mode). Where the first file's link count
    is not the one its proof recorded (the environment it was recorded with removed since, as in a create -> remove ->
    create loop), the new link's lstat alone judges each file, as `wheel_store.stands` would have before the link: its
    five fields the proof's, and its link count not one above the recorded (a file at its recorded count must show its
    recorded ctime, which only a look before a link sees: the pass is dropped then); else each file is looked at before
    its link too."""
    infos, link, lstat = [], os.link, os.lstat
    if sources and lstat(sources[0]).st_nlink != kept[0][5]:  # one lstat a file: the link's
        for source, path in zip(sources, paths):
            link(source, path, follow_symlinks=False)
            infos.append(lstat(path))
        if any(map(eq, map(_LINKS, infos), [fingerprint[5] + 1 for fingerprint in kept])):
            raise _Doubt("a store file at its recorded link count, its ctime before the link unseen")
    else:
        stands = wheel_store.stands
        for source, path, fingerprint in zip(sources, paths, kept):
            if not stands(lstat(source), *fingerprint):
                raise _Doubt(source)
            link(source, path, follow_symlinks=False)
            infos.append(lstat(path))
    if list(map(_CHECKED, infos)) != [fingerprint[:5] for fingerprint in kept]:
        raise _Doubt("a link that is not its proven file")
    return infos


def _write(path: str, written: Written) -> os.stat_result:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(written.data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fchmod(descriptor, written.mode)
        return os.fstat(descriptor)
    finally:
        os.close(descriptor)


def _undo(top: str, moved: Sequence[str], linked: Sequence[str], written: Sequence[Written]) -> None:
    """Removes from the venv what a `finish` that failed placed there: its links and written files, and the folders
    it moved in (the venv's own paths it never touched: a path there already failed before anything was made)."""
    for path in chain(linked, (entry.path for entry in written)):
        with contextlib.suppress(OSError):
            os.unlink(f"{top}/{path}")
    for folder in moved:
        shutil.rmtree(f"{top}/{folder}", ignore_errors=True)


@contextlib.contextmanager
def placing(placement: Placement | None, prefix: Path) -> Iterator[Placing | None]:
    """The placement's folders, then the links of the plan given (`Placing.link`), made beside the venv at `prefix`
    while the block runs (None without a placement); the thread is waited for and whatever is left of its work
    removed as the block ends."""
    if placement is None:
        yield None
        return
    with file_guard.folder_beside(prefix, "placing") as scratch:
        work = Placing(placement, scratch)
        try:
            yield work
        finally:
            work.join()
