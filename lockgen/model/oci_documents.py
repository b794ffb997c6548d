"""OCI documents as JSON objects, as lockgen writes them and as it keeps an image's own (beside their typed
models in `model/image.py`, which check them): descriptors, image manifests and image configs. The fields lockgen
reads or writes are named; a document read from an image may hold others (a Docker config's `container_config`,
`docker_version`, …), which pass through untouched and are written back as they were."""

from __future__ import annotations

from typing import Required, TypedDict

from lockgen.model.json_values import JsonObject


class BlobRef(TypedDict):
    """A blob put into a layout: its digest and size, what a descriptor adds its media type to."""

    digest: str
    size: int


class OciDescriptor(TypedDict, total=False):
    """image-spec `descriptor.md`: a manifest, config or layer by digest and size."""

    mediaType: str
    digest: Required[str]
    size: Required[int]
    annotations: dict[str, str] | None
    platform: JsonObject | None
    urls: list[str] | None


class OciManifest(TypedDict, total=False):
    """image-spec `manifest.md` (and Docker's schema 2): one image's config and layers."""

    schemaVersion: int
    mediaType: str
    config: Required[OciDescriptor]
    layers: Required[list[OciDescriptor]]
    annotations: dict[str, str] | None
    subject: OciDescriptor | None


class OciIndex(TypedDict, total=False):
    """image-spec `image-index.md`: one manifest per platform, or a layout's `index.json`."""

    schemaVersion: int
    mediaType: str
    manifests: Required[list[OciDescriptor]]
    annotations: dict[str, str] | None


class RunSettings(TypedDict, total=False):
    """The `config` of an image config: how the image runs (null where an image's own config says so)."""

    User: str | None
    Env: list[str] | None
    Entrypoint: list[str] | None
    Cmd: list[str] | None
    WorkingDir: str | None
    Labels: dict[str, str] | None
    ExposedPorts: dict[str, JsonObject]
    Volumes: dict[str, JsonObject]


class RootFs(TypedDict):
    """An image config's layers by the sha256 of their uncompressed tars, bottom first."""

    type: str
    diff_ids: list[str]


class OciConfig(TypedDict, total=False):
    """image-spec `config.md`: the platform, how the image runs, its layers' diff_ids and history."""

    architecture: str | None
    os: str | None
    created: str
    config: RunSettings
    rootfs: Required[RootFs]
    history: list[JsonObject]
