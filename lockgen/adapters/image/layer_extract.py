"""Applies OCI image layers (uncompressed tars) to a root folder, every path resolved inside the root by
lockgen itself, never by the host's path resolution: `tarfile`'s filters check a `realpath` that
stops resolving at PATH_MAX (CVE-2025-4517, deep symlink chains, unpatched in Python 3.11 and 3.12).

The root is opened once as a folder fd; each path is walked one component at a time with
`os.open(part, O_DIRECTORY | O_NOFOLLOW, dir_fd=…)`. Rules, as containerd applies layers:
- Names lose a leading `/` and `./`, empty and `.` components; a name with a `..` component is refused.
- A symlink met in a parent component is resolved inside the root, as in the container: an absolute
  target starts again at the root and `..` stops at the root; more than 40 links in one walk is refused.
  Missing parent folders are created (0755). The last component is never followed.
- An entry replaces what an earlier entry left at its name (a file, a link, or a folder with all it
  holds), except that a folder over a folder keeps its content. Files are created with
  `O_CREAT | O_EXCL | O_NOFOLLOW`, so a write never goes through a link or into another hard link's inode.
- Symlinks are created with their target as text; it is never followed while unpacking.
- A hard link must name a regular file already in the root (earlier in the layer or in an earlier
  one), found by the same walk without following its last component; otherwise the layer is refused.
- FIFOs are created; character and block devices are never created (as root that would put a live device
  node in a tree that later readers open): what an earlier entry left at the name is removed, as the
  device a runtime makes there would replace it, and the device is recorded; any other member type is refused.
- Modes as a runtime keeps them (containerd, umoci): every permission bit the member states (`mode & 0o7777`:
  setuid, setgid, sticky, group and other write included), so a later layer that only adds setuid to a file is
  seen as the file a container runs; the root is a private temporary folder (0700), so a setuid file there runs
  only as its owner. mtimes on files and folders, folders' last, after every layer (a read-only folder of
  one layer stays writable for the next). Owners are not applied: nothing reads them.
- Whiteouts (OCI image spec, layer changesets) apply to what earlier layers left, before the layer's
  own entries: `.wh.NAME` removes NAME from its folder, `.wh..wh..opq` empties its folder; other
  `.wh..wh.` names are aufs metadata, ignored. No whiteout entry is created. Each removal is reported.
- Each member is recorded at the path where it landed (`LayerEntry`): a member named inside a folder but
  written through a link to elsewhere is judged where it is, not where its name says.
A layer that breaks a rule is one `LockFormatError` naming the layer and the member."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lockgen.adapters.tar_headers import AmbiguousTar, check_headers
from lockgen.model.names import shown
from lockgen.errors import HostError, LockFormatError
from lockgen.model.image import LayerEntry

MAX_LINKS = 40  # symlinks one walk may go through (Linux's MAXSYMLINKS)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPAQUE, _WHITEOUT, _META = ".wh..wh..opq", ".wh.", ".wh..wh."


class _Refused(Exception):
    """Why one member may not be unpacked (turned into a `LockFormatError` naming layer and member)."""


@dataclass(frozen=True)
class Removal:
    """A whiteout of layer `layer` (`member`) that removed `path` (as in the root) left by earlier layers."""

    layer: str
    member: str
    path: str


def _parts(name: str) -> list[str]:
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise _Refused("has a `..` component (it would leave the root)")
    return parts


@dataclass
class _Walk:
    """Folder fds from the root down to where a walk stands, with their names."""

    fds: list[int]
    names: list[str]

    def up(self) -> None:
        if self.names:  # `..` at the root stays at the root
            os.close(self.fds.pop())
            self.names.pop()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


def _step(walk: _Walk, part: str, pending: list[str], create: bool, links: int) -> int:
    """Goes into `part` of the current folder (creating it, or resolving a link inside the root); returns the
    number of links followed so far, -1 when it is missing and `create` is False."""
    try:
        walk.fds.append(os.open(part, _DIR, dir_fd=walk.fds[-1]))
        walk.names.append(part)
        return links
    except FileNotFoundError:
        if not create:
            return -1
        os.mkdir(part, 0o755, dir_fd=walk.fds[-1])
        pending.insert(0, part)
        return links
    except (NotADirectoryError, OSError) as exc:
        if not isinstance(exc, NotADirectoryError) and exc.errno != errno.ELOOP:
            raise
    if not stat.S_ISLNK(os.stat(part, dir_fd=walk.fds[-1], follow_symlinks=False).st_mode):
        raise _Refused(f"goes through `{shown('/'.join([*walk.names, part]))}`, which is not a folder")
    if links >= MAX_LINKS:
        raise _Refused(f"goes through more than {MAX_LINKS} symbolic links")
    target = os.readlink(part, dir_fd=walk.fds[-1])
    if target.startswith("/"):
        while walk.names:
            walk.up()
    pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
    return links + 1


def _folder(root: int, parts: list[str], create: bool) -> _Walk | None:
    """The walk to the folder `parts` inside the root (links resolved inside it), None when it is missing."""
    walk, pending, links = _Walk([os.dup(root)], []), list(parts), 0
    try:
        while pending:
            part = pending.pop(0)
            if part == "..":
                walk.up()
                continue
            links = _step(walk, part, pending, create, links)
            if links < 0:
                walk.close()
                return None
        return walk
    except BaseException:
        walk.close()
        raise


def _remove(parent: int, name: str) -> bool:
    """Removes what is at `name` in the folder `parent` (a folder with all it holds); False when nothing was."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)
    return True


class Tree:
    """A root folder being unpacked into, layer after layer."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = os.open(root, _DIR)
        self._folders: dict[tuple[str, ...], tuple[int, float]] = {}  # mode and mtime, set at the end
        self.removed: list[Removal] = []
        self.layers: list[tuple[LayerEntry, ...]] = []  # each layer's members where they landed, bottom first
        self._landed: list[LayerEntry] = []

    def apply(self, layer: IO[bytes], where: str) -> None:
        """Applies one layer (a seekable uncompressed tar, its headers first read the one way a runtime's tar
        reader cannot read otherwise: `tar_headers`); `where` names it in errors."""
        self._landed = []
        try:
            check_headers(layer)
        except AmbiguousTar as exc:
            raise LockFormatError(
                f"{where} is refused: {exc}",
                "tar readers would read this layer differently (lockgen one tree, a runtime another): nothing of "
                "the image was used",
            ) from None
        layer.seek(0)
        try:
            with tarfile.open(fileobj=layer, mode="r:") as tar:
                listed = tar.getmembers()
                for member in listed:
                    self._run(where, member, lambda: self._whiteout(where, member))
                for member in listed:
                    self._run(where, member, lambda: self._entry(tar, member))
            self.layers.append(tuple(self._landed))
        except (tarfile.TarError, EOFError) as exc:
            raise LockFormatError(
                f"{where} is not a readable tar: {shown(str(exc))}",
                "the image's layer is damaged or mislabelled: re-export or re-pull it",
            ) from None

    def _run(self, where: str, member: tarfile.TarInfo, step: Callable[[], None]) -> None:
        try:
            step()
        except _Refused as exc:
            raise LockFormatError(
                f"{where} is refused: member `{shown(member.name)}` {exc}",
                "the layer would write outside the image's root file system or holds what lockgen does not "
                "unpack: nothing of the image was used",
            ) from None
        except (OSError, ValueError, OverflowError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise HostError(f"unpacking {where} failed: {exc.strerror}", "free space where TMPDIR points") from None
            raise LockFormatError(
                f"{where} is refused: member `{shown(member.name)}` cannot be unpacked ({exc})",
                "the layer holds a name or entry no file system takes: nothing of the image was used",
            ) from None

    def _whiteout(self, where: str, member: tarfile.TarInfo) -> None:
        *folder, base = _parts(member.name) or [""]
        if not base.startswith(_WHITEOUT) or (base.startswith(_META) and base != _OPAQUE):
            return
        name = base.removeprefix(_WHITEOUT)
        if base != _OPAQUE and name in ("", ".", ".."):
            raise _Refused("is a whiteout of no name in its folder")
        walk = _folder(self._root, folder, create=False)
        self._landed.append(LayerEntry("/".join([*(walk.names if walk is not None else folder), base]), False))
        if walk is None:
            return
        try:
            names = sorted(os.listdir(walk.fds[-1])) if base == _OPAQUE else [name]
            for gone in names:
                if _remove(walk.fds[-1], gone):
                    self._forget((*walk.names, gone))
                    self.removed.append(Removal(where, member.name, "/".join([*walk.names, gone])))
        finally:
            walk.close()

    def _forget(self, path: tuple[str, ...]) -> None:
        for folder in [f for f in self._folders if f[: len(path)] == path]:
            del self._folders[folder]

    def _entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        parts = _parts(member.name)
        if not parts or parts[-1].startswith(_WHITEOUT):
            if not parts:  # the root itself
                self._landed.append(LayerEntry("", member.isdir()))
            return
        walk = _folder(self._root, parts[:-1], create=True)
        assert walk is not None  # created
        try:
            device = "character device" if member.ischr() else "block device" if member.isblk() else None
            self._landed.append(
                LayerEntry(
                    "/".join([*walk.names, parts[-1]]),
                    member.isdir(),
                    member.linkname if member.issym() else None,
                    device,
                )
            )
            if device is None:
                self._place(tar, member, walk, parts[-1])
            elif _remove(walk.fds[-1], parts[-1]):  # replaced by the device a runtime makes; none is made here
                self._forget((*walk.names, parts[-1]))
        finally:
            walk.close()

    def _place(self, tar: tarfile.TarFile, member: tarfile.TarInfo, walk: _Walk, name: str) -> None:
        parent, mode = walk.fds[-1], stat.S_IMODE(member.mode)
        if member.isdir():
            existing = _existing(parent, name)
            if existing is None or not stat.S_ISDIR(existing):
                _remove(parent, name)
                os.mkdir(name, 0o700, dir_fd=parent)
            self._folders[(*walk.names, name)] = (mode, member.mtime)
            return
        source = self._link_source(member) if member.islnk() else None
        try:
            if _remove(parent, name):
                self._forget((*walk.names, name))
            if member.issym():
                os.symlink(member.linkname, name, dir_fd=parent)
            elif member.isfifo():
                os.mkfifo(name, mode, dir_fd=parent)
            elif source is not None:
                os.link(source[1], name, src_dir_fd=source[0].fds[-1], dst_dir_fd=parent, follow_symlinks=False)
            elif member.isreg():
                _write(tar, member, parent, name, mode)
            else:
                raise _Refused(f"is of tar type {member.type!r}, which lockgen does not unpack")
        finally:
            if source is not None:
                source[0].close()

    def _link_source(self, member: tarfile.TarInfo) -> tuple[_Walk, str]:
        """The folder and name of the regular file a hard link names, inside the root."""
        *folder, base = _parts(member.linkname) or [""]
        walk = _folder(self._root, folder, create=False) if base else None
        mode = _existing(walk.fds[-1], base) if walk is not None else None
        if walk is not None and mode is not None and stat.S_ISREG(mode):
            return walk, base
        if walk is not None:
            walk.close()
        raise _Refused(f"is a hard link to `{shown(member.linkname)}`, not a file unpacked inside the root")

    def close(self) -> None:
        """Sets every folder's mode and mtime (deepest first), then lets the root go."""
        try:
            for path in sorted(self._folders, key=len, reverse=True):
                _set_folder(self._root, path, *self._folders[path])
        finally:
            os.close(self._root)


def _existing(parent: int, name: str) -> int | None:
    """The mode of what is at `name` (not followed), None when nothing is."""
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, parent: int, name: str, mode: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
    with os.fdopen(fd, "wb") as target:
        # a regular member: never None
        shutil.copyfileobj(tar.extractfile(member), target, 1 << 20)  # type: ignore[arg-type]
        os.fchmod(target.fileno(), mode)
        os.utime(target.fileno(), (member.mtime, member.mtime))


def _set_folder(root: int, path: tuple[str, ...], mode: int, mtime: float) -> None:
    """Mode and mtime of the folder at `path`, walked without following any link (skipped when it is gone)."""
    fds = [os.dup(root)]
    try:
        for part in path:
            fds.append(os.open(part, _DIR, dir_fd=fds[-1]))
        os.fchmod(fds[-1], mode)
        os.utime(fds[-1], (mtime, mtime))
    except OSError:
        return
    finally:
        for fd in fds:
            os.close(fd)


@contextmanager
def unpacking(root: Path) -> Iterator[Tree]:
    """A tree to apply layers to; folders get their modes and mtimes when it closes."""
    tree = Tree(root)
    try:
        yield tree
    finally:
        tree.close()
