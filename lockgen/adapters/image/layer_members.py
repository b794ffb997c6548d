"""Chosen files read out of an image's layers (a layout's blobs, or a registry's, streamed) without applying
them: a team export on its base image needs the base's conda-meta records and its recorded environment
manifest, a few kilobytes among gigabytes, so each layer is streamed and left as soon as its sorted
members are past the wanted region.

lockgen writes every layer's members sorted by path (`oci_layout.write_layer_tar`), so `.lockgen/` and
`conda-meta/` come before `lib/`, `share/` and `site-packages`: a package's layer is decompressed only as
far as its record. A layer whose members are not sorted (another tool's) is read to its end. Upper
layers win, as when the image is unpacked; whiteouts are not applied (lockgen's layers have none).

Two reads are named here: a base environment's record (its manifest, and the conda-meta records of a conda
base) for a team export, and the lock an image carries (`.lockgen/lock.conda-lock.yml` in its last layer)
with its sha256, for a team stack that extends the image."""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import IO

from lockgen.adapters.conda import conda_meta
from lockgen.adapters.store import env_manifest
from lockgen.adapters.image.oci_layout import uncompressed
from lockgen.errors import LockFormatError
from lockgen.model.oci_documents import OciDescriptor
from lockgen.model.oci import LOCK_INSIDE

MAX_MEMBER = 256 << 20  # a recorded manifest, a conda-meta record or a lock: megabytes, even for a CUDA torch stack
LayerOpener = Callable[[OciDescriptor], AbstractContextManager[IO[bytes]]]  # a layer descriptor -> its blob's bytes


def read_members(
    open_layer: LayerOpener,
    layers: list[OciDescriptor],
    prefix: str,
    wanted: Callable[[str], bool],
    past: Callable[[str], bool],
    limit: int = MAX_MEMBER,
) -> dict[str, bytes]:
    """The regular files under `prefix` (relative to it) that `wanted` accepts, from every layer in order,
    each at most `limit` bytes (by its tar header, before any is read: a larger one is refused).
    `past(relative)` says that, in sorted order, no wanted file can follow: a sorted layer is left there.
    The blobs are not checked against their digests (most are left part read): what is read must be
    checked by what it is (the caller binds it to the image's config, which is)."""
    top = prefix.strip("/") + "/"
    found: dict[str, bytes] = {}
    for layer in layers:
        try:
            with (
                open_layer(layer) as raw,
                uncompressed(raw, layer["mediaType"]) as stream,
                tarfile.open(fileobj=stream, mode="r|") as tar,
            ):
                previous, in_order = "", True
                for member in tar:  # bounded by the layer; sorted layers are left early
                    name = member.name.removeprefix("./")
                    in_order, previous = in_order and name >= previous, name
                    if not name.startswith(top):
                        continue
                    relative = name[len(top) :]
                    if member.isreg() and wanted(relative):
                        if member.size > limit:
                            raise LockFormatError(
                                f"base layer {layer['digest']} holds `{name}` of {member.size} bytes, more than "
                                f"the {limit} lockgen reads of it",
                                "this is not an image lockgen exported; extend its stack or lock instead",
                            )
                        data = tar.extractfile(member)
                        found[relative] = data.read() if data is not None else b""
                    elif in_order and past(relative):
                        break
        except (OSError, tarfile.TarError, EOFError, ValueError) as exc:
            raise LockFormatError(
                f"base layer {layer['digest']} cannot be read: {exc}",
                "the base image is damaged: export or pull it again",
            ) from None
    return found


_RECORDS = f"{conda_meta.FOLDER}/"


def environment_record(
    open_layer: LayerOpener, layers: list[OciDescriptor], prefix: str, records: bool
) -> dict[str, bytes]:
    """The environment manifest under `prefix` and, with `records`, every conda-meta record there, by
    prefix-relative path. Without `records` (a Python environment's base has none to gather) only the
    topmost layer holding a manifest is read, from the top down, so a vendor's layers under lockgen's, which
    are not sorted and would be read to their ends, are not read at all."""
    if records:
        return read_members(open_layer, layers, prefix, _manifest_or_record, _past_records)
    for layer in reversed(layers):  # bounded by the layers
        found = read_members(
            open_layer, [layer], prefix, lambda relative: relative == env_manifest.MANIFEST, _past_records
        )
        if found:
            return found
    return {}


def _manifest_or_record(relative: str) -> bool:
    return relative == env_manifest.MANIFEST or conda_meta.is_record(relative)


def _past_records(relative: str) -> bool:
    return relative > _RECORDS and not relative.startswith(_RECORDS)


def carried_lock(open_layer: LayerOpener, layers: list[OciDescriptor], prefix: str) -> tuple[bytes, str] | None:
    """The lock an image of lockgen's carries in the last of its `layers`, and its sha256; None when it carries none."""
    found = read_members(
        open_layer,
        layers[-1:],
        prefix,
        lambda relative: relative == LOCK_INSIDE,
        lambda relative: relative > ".lockgen/" and not relative.startswith(".lockgen/"),
    )
    data = found.get(LOCK_INSIDE)
    return None if data is None else (data, hashlib.sha256(data).hexdigest())
