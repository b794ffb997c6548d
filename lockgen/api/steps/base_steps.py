"""The base image of an export: a local OCI layout (`--base DIR`, its blobs copied into the new layout) or a
registry image read shallow (`--base docker://HOST/REPO@sha256:…`, or `:TAG`, resolved to its digest): only
its manifest and config are read, and its layers are referenced by digest without their blobs. Either may
name an image index; the lock's platform's image is taken (linux/amd64 for linux-64, linux/arm64 for
linux-aarch64). A venv runs on the base's Python, which export proves is a file of the base (`base_file`):
the layers are read top down, and only until one decides (locally the blobs are at hand; remotely each is
streamed, and named in progress).

Where the absent blobs live, read before choosing:
- OCI image-spec `image-layout.md` (blobs): "The blobs directory MAY be missing referenced blobs, in which
  case the missing blobs SHOULD be fulfilled by an external blob store." A shallow layout is such a layout.
- image-spec `descriptor.md` `urls` and the non-distributable layer media types (deprecated in 1.1): a
  descriptor may name URLs to fetch a blob from, and containers/image's OCI layout source
  (`oci/layout/oci_src.go`, `GetBlob`) fetches from them. Not used: URLs (or another media type) in the
  manifest change its digest, so the image would not be the one exported on a local copy of the base,
  and a registry's blob URL needs its token, which plain URL fetching does not get.
- image-spec `annotations.md`: `org.opencontainers.image.base.digest` / `.base.name` name the base. The
  manifest keeps only `base.digest` (the platform image's), which is the same wherever the base was read
  from; `base.name` (the registry and repository, `HOST/REPO@sha256:…`) is on index.json's descriptor of a
  shallow layout, outside the manifest digest: it says where the missing blobs are.
skopeo cannot copy a layout with absent blobs (containers/image opens each blob file), so `lockgen push`
puts a shallow layout itself (mount or stream, `adapters.image.registry_image`), and the commands that need
every blob (`check --image`, `verify --image`, archives: `adapters/image/image_tree.place`) refuse it with one error
saying to push it first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, NamedTuple, cast

from lockgen.adapters.image import oci_layout, registry_image
from lockgen.adapters.image.layer_members import LayerOpener
from lockgen.adapters.distribution.oci_distribution import Registry
from lockgen.core.image.image_reference import ImageReference, parse_reference, refuse_credentials
from lockgen.core.image.layer_lookup import file_at
from lockgen.errors import LockFormatError, UserError
from lockgen.model.oci_documents import OciConfig, OciDescriptor, OciManifest
from lockgen.model.base_image import RegistryBase
from lockgen.model.oci import ARCHITECTURE, BASE_DIGEST_ANNOTATION, BASE_SOURCE_ANNOTATION

Base = Path | RegistryBase


class BaseRead(NamedTuple):
    """A base image as read for one platform: its manifest, its config and the manifest's digest."""

    manifest: OciManifest
    config: OciConfig
    digest: str


Layers = list[tuple[OciDescriptor, str]]  # (descriptor, diff_id), base first


def base_manifest(base: Base, platform: str, progress: Callable[[str], None]) -> BaseRead:
    """The base image's manifest, config and manifest digest for the lock's platform, refused for another
    architecture. A registry base is read once per run (a tag resolves to one digest for the whole export)."""
    architecture = ARCHITECTURE[platform]
    if isinstance(base, RegistryBase):
        image = _registry_image(base, architecture, progress)
        manifest, config, digest = image.manifest, image.config, image.digest
    else:
        manifest, config, digest = oci_layout.read_image(base, architecture)
    if config.get("architecture") != architecture:
        raise UserError(
            f"the base image is for {config.get('architecture')}, the lock's platform is {platform}",
            "pass a base image of the lock's architecture",
        )
    return BaseRead(manifest, config, digest)


class BaseLayers(NamedTuple):
    """What an export builds on: the base image's layers, its config, and the manifest annotations that pin it."""

    layers: Layers
    config: OciConfig
    annotations: dict[str, str]


def base_image(base: Base, layout: Path, platform: str, progress: Callable[[str], None]) -> BaseLayers:
    """The base image's layers (a local base's blobs checked against their digests and hard-linked into
    `layout`, or copied across file systems; a registry base's referenced only), its config, and the
    manifest annotations that pin it by digest."""
    manifest, config, digest = base_manifest(base, platform, progress)
    if isinstance(base, RegistryBase):
        progress(
            f"base {_registry_image(base, ARCHITECTURE[platform], progress).pinned}: {len(manifest['layers'])} "
            "layers referenced by digest, their blobs left in the registry"
        )
    layers = []
    for descriptor, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
        if not isinstance(base, RegistryBase):
            source = oci_layout.blob_path(base, descriptor["digest"])
            linked = oci_layout.link_cached_blob(layout, source, descriptor["digest"]) if source.is_file() else None
            if linked is None:
                raise LockFormatError(
                    f"the base image's layer blob {descriptor['digest']} is missing or was changed",
                    "export or copy the base image again",
                )
            descriptor = {**descriptor, **linked}
        layers.append((descriptor, diff_id))
    return BaseLayers(layers, config, {BASE_DIGEST_ANNOTATION: digest})


def base_documents(base: Base, platform: str, progress: Callable[[str], None]) -> tuple[bytes, bytes]:
    """The base image's manifest and config, byte for byte (what the digest the new manifest pins covers): an
    export keeps them in the environment's `.lockgen/`, so `check --image --lock` can tell the base's layers."""
    if isinstance(base, RegistryBase):
        return _registry_image(base, ARCHITECTURE[platform], progress).documents
    manifest, _, digest = base_manifest(base, platform, progress)
    return (
        oci_layout.blob_bytes(base, digest),
        oci_layout.blob_bytes(base, manifest["config"]["digest"]),
    )


def _registry_image(
    base: RegistryBase, architecture: str, progress: Callable[[str], None]
) -> registry_image.RemoteImage:
    return registry_image.read_once(_reference(base), architecture, base.insecure, progress)


def layer_opener(base: Base) -> LayerOpener:
    """How to read a base layer's blob: from the layout, or streamed from the registry (left when the reader
    stops, so only what is read is downloaded)."""
    if isinstance(base, RegistryBase):
        client = Registry(_reference(base), base.insecure)
        # a CheckedStream reads as IO[bytes] (read, readinto, close); its base io.RawIOBase's stub is not IO
        return lambda layer: cast(AbstractContextManager[IO[bytes]], client.blob_stream(layer["digest"]))
    return lambda layer: oci_layout.open_blob(base, layer["digest"])


def index_annotations(base: Base | None, manifest: OciManifest) -> dict[str, str]:
    """What index.json's descriptor records of a shallow layout: where its absent base blobs live."""
    if not isinstance(base, RegistryBase):
        return {}
    reference = _reference(base)
    pinned = (manifest.get("annotations") or {})[BASE_DIGEST_ANNOTATION]  # `base_image` put it there
    return {BASE_SOURCE_ANNOTATION: f"{reference.name}@{pinned}"}


def base_file(base: Base, platform: str, paths: Sequence[str], progress: Callable[[str], None]) -> str | None:
    """The first of `paths` (absolute) that is a file in the base image's file system for `platform`, links
    followed and whiteouts applied (`core.image.layer_lookup`), or None: its layers are read top down, each once and
    only as far as a decision needs (a registry's streamed, and named in progress)."""
    architecture = ARCHITECTURE[platform]
    if isinstance(base, RegistryBase):
        count, layer = registry_image.layer_reader(
            _registry_image(base, architecture, progress), base.insecure, " or ".join(paths), progress
        )
    else:
        count, layer = oci_layout.layer_reader(base, architecture)
    return next((path for path in paths if file_at(path, layer, count) is not None), None)


def _reference(base: RegistryBase) -> ImageReference:
    """The base's reference; one with credentials in it is refused without repeating it (`refuse_credentials`)."""
    refuse_credentials(base.reference, "the --base reference")
    return parse_reference(base.reference)
