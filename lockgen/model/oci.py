"""OCI image constants lockgen writes and reads: media types, the environment's path inside an image,
the labels that name the lock and environment, and the image architecture of each platform."""

from __future__ import annotations

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"

IMAGE_PREFIX = "/opt/env"
LOCK_LABEL = "dev.lockgen.lock.sha256"
ENVIRONMENT_LABEL = "dev.lockgen.environment.digest"
PREFIX_LABEL = "dev.lockgen.prefix"
ARCHITECTURE = {"linux-64": "amd64", "linux-aarch64": "arm64"}
FORMATS = ("oci-layout", "oci-archive", "docker-archive")
