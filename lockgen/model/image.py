"""Values read from an OCI image: one `Digest` type (`sha256:` and 64 lowercase hex digits), descriptors, image
manifests, image indexes and image configs as typed, frozen models, and one layer's tar member (its path,
whether it is a folder, and what it removes when it is a whiteout).

Descriptors, manifests and indexes are closed as the image-spec defines them (unknown fields refused). An image
config is not: Docker-written configs carry fields the image-spec does not define (`container_config`,
`docker_version`, `Hostname`, …), which a base image's config keeps and export keeps after it, so the config
models type the fields lockgen reads and keep the rest as written (`extra="allow"`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from lockgen.model.base import Frozen
from lockgen.model.json_values import JsonObject

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"

Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class Descriptor(Frozen):
    """image-spec `descriptor.md`: what a manifest, index or layer is, by digest and size."""

    media_type: str = Field(alias="mediaType")
    digest: Digest
    size: int = Field(ge=0, le=2**63 - 1, strict=True)  # an int64, as the image-spec says: a number, never text
    urls: tuple[str, ...] | None = None
    annotations: dict[str, str] | None = None
    data: str | None = None
    artifact_type: str | None = Field(None, alias="artifactType")
    platform: JsonObject | None = None


class ImageManifest(Frozen):
    """image-spec `manifest.md` (and Docker's schema 2, the same fields): one image's config and layers."""

    schema_version: int = Field(alias="schemaVersion", strict=True)
    media_type: str | None = Field(None, alias="mediaType")
    artifact_type: str | None = Field(None, alias="artifactType")
    config: Descriptor
    layers: tuple[Descriptor, ...]
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


class ImageIndex(Frozen):
    """image-spec `image-index.md` (and Docker's manifest list), and a layout's `index.json`."""

    schema_version: int = Field(alias="schemaVersion", strict=True)
    media_type: str | None = Field(None, alias="mediaType")
    artifact_type: str | None = Field(None, alias="artifactType")
    manifests: tuple[Descriptor, ...]
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


class _Open(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)


class ContainerConfig(_Open):
    """The `config` of an image config: how the image runs."""

    user: str | None = Field(None, alias="User")
    env: tuple[str, ...] | None = Field(None, alias="Env")
    entrypoint: tuple[str, ...] | None = Field(None, alias="Entrypoint")
    cmd: tuple[str, ...] | None = Field(None, alias="Cmd")
    working_dir: str | None = Field(None, alias="WorkingDir")
    labels: dict[str, str] | None = Field(None, alias="Labels")

    def variable(self, name: str) -> str | None:
        """The value `Env` gives `name` (its last entry, as a runtime sets them in order), or None."""
        found = [line.split("=", 1)[1] for line in self.env or () if line.startswith(f"{name}=")]
        return found[-1] if found else None


class RootFs(Frozen):
    type: str
    diff_ids: tuple[Digest, ...]


class ImageConfig(_Open):
    """image-spec `config.md`: the platform, how the image runs, and its layers' uncompressed digests."""

    architecture: str | None = None
    os: str | None = None
    config: ContainerConfig = ContainerConfig()
    rootfs: RootFs


@dataclass(frozen=True)
class LayerEntry:
    """One tar member of a layer: the path it lands at when the layer is applied (relative, no leading `/`: its
    name with every symbolic link met in its folders resolved inside the root, as a runtime resolves them),
    whether it is a folder, a symbolic link's target as written (None for any other member), and for a
    character or block device its kind (None for any other member)."""

    path: str
    folder: bool
    link: str | None = None
    device: str | None = None

    @property
    def removes(self) -> str | None:
        """What a whiteout removes from the layers below: `D/NAME` for `D/.wh.NAME`, `D/` (the folder's content,
        the folder kept) for the opaque `D/.wh..wh..opq`; None for any other member."""
        folder, _, name = self.path.rpartition("/")
        if name == OPAQUE:
            return f"{folder}/"
        if name.startswith(WHITEOUT):
            return f"{folder}/{name.removeprefix(WHITEOUT)}".lstrip("/")
        return None
