"""What each layer of an OCI image puts where, read from its tar (names, kinds and link targets, no content;
a whiteout entry as the path it removes). `check --image --lock` reads the layers here to tell what lies outside the
environment, in which layer, and which whiteouts touch it. The image's final file system itself (whiteouts
applied as a runtime mounts the layers) is made by the unpack (`layer_extract`)."""

from __future__ import annotations

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
                    layers.append(tuple(LayerEntry(m.name.removeprefix("./").strip("/"), m.isdir(), m.linkname if m.issym() else None) for m in tar))
        except (tarfile.TarError, OSError, EOFError, zstandard.ZstdError) as exc:  # gzip's errors are OSError
            raise LockFormatError(f"layer {layer.digest[:19]}… of {layout} is not a readable tar: {exc}", "the image was damaged or crafted: re-export it") from None
    return layers
