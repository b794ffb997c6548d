"""A base image read from a registry without pulling it (`export --base docker://…`, "shallow"): its manifest
(through an image index to the lock's platform's image) and its config, both checked against their
digests (read once per process: `read_once`), and, only when asked, its layers' file names read top layer down,
streamed, until a path is
found; and the blobs of a shallow layout put into a registry (mounted from the base's repository when it
is the same registry, else streamed from the base's registry: one blob at a time, never held whole).
Credentials and `insecure` are `oci_distribution`'s."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.image import oci_layout
from lockgen.core import nesting
from lockgen.adapters.distribution.oci_distribution import Registry
from lockgen.core.image.image_platform import choose_manifest
from lockgen.core.image.image_reference import ImageReference, parse_reference
from lockgen.errors import LockFormatError, UserError
from lockgen.model.json_values import JsonObject
from lockgen.model.oci_documents import OciConfig, OciManifest
from lockgen.model.image import LayerEntry
from lockgen.model.oci import DOCKER_LIST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE

INDEXES = (INDEX_MEDIA_TYPE, DOCKER_LIST_MEDIA_TYPE)
IMAGES = (MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE)


@dataclass(frozen=True)
class RemoteImage:
    reference: ImageReference  # as given (a tag, or a digest)
    digest: str  # the platform's image manifest's digest: what the export is based on
    manifest: OciManifest
    config: OciConfig
    documents: tuple[bytes, bytes] = (b"", b"")  # the manifest's and the config's bytes, as their digests cover them

    @property
    def pinned(self) -> str:
        """`HOST/REPO@sha256:…`: the image's name and digest in the distribution reference form."""
        return f"{self.reference.name}@{self.digest}"


def _document(data: bytes, where: str) -> JsonObject:
    try:
        document = nesting.loads(data)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise LockFormatError(f"{where} is not a JSON object", "pass an OCI or Docker image or image index")
    return document


def read(reference: ImageReference, architecture: str, insecure: bool, progress: Callable[[str], None]) -> RemoteImage:
    """The image `reference` names (its linux/`architecture` image when it names an index): manifest and
    config only, each checked against its digest; no layer is read."""
    client = Registry(reference, insecure)
    got = client.manifest(reference.reference)
    if got is None:
        raise UserError(f"the registry has no image {reference}", "check the repository, tag and digest")
    data, media_type = got
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if media_type in INDEXES:
        entry = choose_manifest(_document(data, str(reference)), architecture, str(reference))
        digest = str(entry["digest"])  # `choose_manifest` checked it: a sha256 digest
        progress(f"base {reference}: an image index; its linux/{architecture} image is {digest}")
        got = client.manifest(digest)
        if got is None:
            raise UserError(
                f"the registry lacks the linux/{architecture} image {digest} its index {reference} names",
                "the index is incomplete in that registry; copy it there whole (skopeo copy --all)",
            )
        data, media_type = got
    if media_type not in IMAGES:
        raise UserError(
            f"{reference} is a {media_type or 'document of no media type'}, not an image",
            "pass an OCI or Docker image, or an image index of them",
        )
    manifest = _document(data, f"the manifest of {reference}")
    config_bytes = client.blob(oci_layout.digest_at(str(reference), manifest.get("config"), "the manifest's config"))
    config = _document(config_bytes, f"the config of {reference}")
    checked_manifest, checked_config = oci_layout.checked_documents(str(reference), manifest, config)
    if reference.digest is None or reference.digest != digest:
        progress(f"base {reference} is {reference.name}@{digest}")
    return RemoteImage(reference, digest, checked_manifest, checked_config, (data, config_bytes))


_READ: dict[tuple[ImageReference, str, bool], RemoteImage] = {}


def read_once(
    reference: ImageReference, architecture: str, insecure: bool, progress: Callable[[str], None]
) -> RemoteImage:
    """`read`, once per process for each reference, architecture and `insecure`: an export reads its base
    several times (manifest, layers, documents, a Python), and a tag must resolve to one digest for all."""
    key = (reference, architecture, insecure)
    if key not in _READ:
        _READ[key] = read(reference, architecture, insecure, progress)
    return _READ[key]


def layer_reader(
    image: RemoteImage, insecure: bool, looking_for: str, progress: Callable[[str], None]
) -> tuple[int, Callable[[int], dict[str, LayerEntry]]]:
    """(how many layers the image has, a reader of layer N's members, bottom layer 0): each layer streamed once,
    only when asked, checked against its digest, and named in progress with what is `looking_for`."""
    client = Registry(image.reference, insecure)
    layers, read = image.manifest["layers"], {}

    def layer(index: int) -> dict[str, LayerEntry]:
        if index not in read:
            descriptor = layers[index]
            progress(
                f"reading base layer {index + 1} of {len(layers)} ({int(descriptor.get('size', 0)) / 1e6:,.1f} "
                f"MB, {descriptor['digest'][:19]}…) for {looking_for}"
            )
            with client.blob_stream(descriptor["digest"]) as stream:
                with oci_layout.uncompressed(stream, descriptor["mediaType"]) as tar_stream:  # type: ignore[arg-type]
                    read[index] = oci_layout.members(tar_stream)
                stream.verify()
        return read[index]

    return len(layers), layer


def push(
    layout: Path,
    manifest_bytes: bytes,
    manifest: OciManifest,
    media_type: str,
    target_text: str,
    base_text: str,
    insecure: bool,
    progress: Callable[[str], None],
) -> str:
    """Puts a shallow layout into `target_text` (docker://HOST/REPO[:TAG]): the blobs it holds uploaded from
    its files, the base's blobs it lacks mounted from `base_text`'s repository (same registry) or streamed
    from its registry, then the manifest, byte for byte; returns the manifest's digest."""
    target_ref = parse_reference(target_text if "://" in target_text else f"docker://{target_text}")
    base_ref = parse_reference(f"docker://{base_text}")
    target, base = Registry(target_ref, insecure), Registry(base_ref, insecure)
    same_registry = target_ref.host == base_ref.host
    mounted = streamed = uploaded = 0
    for descriptor in [manifest["config"], *manifest["layers"]]:
        digest, size = descriptor["digest"], int(descriptor.get("size", 0))
        held = oci_layout.held_blob(layout, digest)  # a FIFO is refused by name, not waited on
        if held is not None:
            with held as stream:
                target.push_blob_stream(digest, os.fstat(stream.fileno()).st_size, stream)
            uploaded += 1
        elif target.has_blob(digest):
            continue
        elif same_registry and target.mount_blob(digest, base_ref.repository):
            mounted += 1
        else:
            progress(
                f"streaming base blob {digest[:19]}… ({size / 1e6:,.1f} MB) from {base_ref.name} to {target_ref.name}"
            )
            with base.blob_stream(digest) as stream:
                target.push_blob_stream(digest, size, stream)
                stream.verify()
            streamed += 1
    digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    if target_ref.digest not in (None, digest):
        raise UserError(
            f"{target_text} names digest {target_ref.digest}, the layout's is {digest}",
            "push to a tag, or to the layout's own digest",
        )
    target.push_manifest(target_ref.digest or target_ref.tag or "latest", manifest_bytes, media_type)
    progress(
        f"pushed {digest}: {uploaded} blobs uploaded, {mounted} base blobs mounted from {base_ref.repository}, "
        f"{streamed} streamed from {base_ref.host}"
    )
    return digest
