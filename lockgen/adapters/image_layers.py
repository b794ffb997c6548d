"""What each layer of an OCI image puts where, read from its tar (names and kinds, no content), and the image's
final file system: OCI whiteouts (`D/.wh.NAME` removes NAME of the layers below, `D/.wh..wh..opq` everything
below in D) applied to a root that every layer was extracted into, in order, as plain files.

`check --image --lock` reads the layers here to tell what lies outside the environment (and in which layer)
and to judge the image as a runtime mounts it: a file that a later layer's whiteout removed is gone, so it is
missing against the lock, not proven by the copy an earlier layer holds."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import zstandard

from lockgen.adapters import oci_layout
from lockgen.errors import LockFormatError
from lockgen.model.image import ImageManifest, LayerEntry


def layer_entries(layout: Path, manifest: ImageManifest) -> list[tuple[LayerEntry, ...]]:
    """Every layer's members, bottom layer first (the blobs were checked against their digests by the unpack)."""
    layers = []
    for layer in manifest.layers:
        try:
            with oci_layout.uncompressed_stream(oci_layout.blob_path(layout, layer.digest), layer.media_type) as stream:
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    layers.append(tuple(LayerEntry(m.name.removeprefix("./").strip("/"), m.isdir()) for m in tar))
        except (tarfile.TarError, OSError, EOFError, zstandard.ZstdError) as exc:  # gzip's errors are OSError
            raise LockFormatError(f"layer {layer.digest[:19]}… of {layout} is not a readable tar: {exc}",
                                  "the image was damaged or crafted: re-export it") from None
    return layers


def _removed_by(path: str, target: str) -> bool:
    if target.endswith("/"):  # opaque: the folder stays, what lower layers put in it goes
        return target == "/" or path.startswith(target)
    return path == target or path.startswith(target + "/")


def removed_paths(layers: list[tuple[LayerEntry, ...]]) -> list[str]:
    """The paths a plain extraction of every layer leaves that the image does not have: what a later layer's
    whiteout removed (unless a layer after it put it back), and the whiteout files themselves."""
    last: dict[str, int] = {}
    whiteouts: list[tuple[int, str]] = []
    markers = set()
    for number, entries in enumerate(layers):
        for entry in entries:
            target = entry.removes
            if target is None:
                last[entry.path] = number
            else:
                whiteouts.append((number, target))
                markers.add(entry.path)
    gone = {path for path, number in last.items()
            if any(later > number and _removed_by(path, target) for later, target in whiteouts)}
    return sorted(gone | (markers - set(last)))


def apply_removals(root: Path, paths: list[str]) -> None:
    """Removes `paths` from the extracted `root`: files and links, then the folders left empty, deepest first; a
    path whose folder resolves outside `root` is not touched (the extraction's filter put nothing there)."""
    real_root = os.path.realpath(root)
    folders = []
    for relative in paths:
        folder = os.path.realpath(os.path.dirname(os.path.join(real_root, relative)))
        if os.path.commonpath([real_root, folder]) != real_root:
            continue
        placed = os.path.join(folder, os.path.basename(relative))
        if os.path.isdir(placed) and not os.path.islink(placed):
            folders.append(placed)
        elif os.path.lexists(placed):
            os.unlink(placed)
    for folder in sorted(folders, key=len, reverse=True):
        try:
            os.rmdir(folder)
        except OSError:  # a later layer put something in it
            pass
