"""OCI image constants lockgen writes and reads: media types (images, indexes, the empty config of an
artifact, layers per compression and the levels each allows), the environment's path inside an image, the labels that
name the lock and environment,
the image architecture of each platform, and the distribution-spec's tag grammar."""

from __future__ import annotations

import re

_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def is_tag(text: str) -> bool:
    """Whether `text` is a tag (what a layout's index.json may name and a registry takes): letters, digits, `_`,
    `.` and `-`, at most 128, not starting with `.` or `-`."""
    return bool(_TAG.fullmatch(text))


LAYER_MEDIA_TYPES = {
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}  # compression -> layer media type
COMPRESSION_LEVELS = {"gzip": range(1, 10), "zstd": range(1, 20)}  # zstd 20-22 need a decoder's large window
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
IMAGE_CONFIG_MEDIA_TYPES = (
    CONFIG_MEDIA_TYPE,
    "application/vnd.docker.container.image.v1+json",
)  # an image's config: OCI's, Docker's
# the layers a runtime unpacks (containerd's list): OCI's, its nondistributable ones, Docker's schema 2
READABLE_LAYER_MEDIA_TYPES = (
    *(
        f"application/vnd.oci.image.layer.{kind}v1.tar{compression}"
        for kind in ("", "nondistributable.")
        for compression in ("", "+gzip", "+zstd")
    ),
    *(f"application/vnd.docker.image.rootfs.diff.tar{compression}" for compression in ("", ".gzip", ".zstd")),
    *(f"application/vnd.docker.image.rootfs.foreign.diff.tar{compression}" for compression in ("", ".gzip")),
)
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.list.v2+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"  # image-spec 1.1: the config of an artifact with none
EMPTY_BLOB = b"{}"

IMAGE_PREFIX = "/opt/env"
LOCK_LABEL = "dev.lockgen.lock.sha256"
ENVIRONMENT_LABEL = "dev.lockgen.environment.digest"
PREFIX_LABEL = "dev.lockgen.prefix"
LOCK_INSIDE = ".lockgen/lock.conda-lock.yml"  # an image's own lock, byte for byte: its sha256 is LOCK_LABEL
BASE_DIGEST_ANNOTATION = "org.opencontainers.image.base.digest"  # in the manifest: the base image, by digest
REF_NAME = "org.opencontainers.image.ref.name"  # on index.json's descriptor: the image's tag
BASE_MANIFEST_INSIDE = ".lockgen/base-manifest.json"  # in the environment: the base's manifest, byte for byte
BASE_CONFIG_INSIDE = ".lockgen/base-config.json"  # and its config: they hash to the digests the manifest pins
BASE_SOURCE_ANNOTATION = (
    "org.opencontainers.image.base.name"  # on index.json's descriptor: where absent base blobs live
)
SERVICE_LAUNCHER = ".lockgen/service_launcher.py"  # in the environment: an image's `[image] services` launcher
SERVICES_FILE = ".lockgen/services.json"  # beside it: the services it starts (name -> command)
ARCHITECTURE = {"linux-64": "amd64", "linux-aarch64": "arm64"}
FORMATS = ("oci-layout", "oci-archive", "docker-archive")
