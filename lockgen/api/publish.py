"""Use case `lockgen push`: an exported image goes to a registry through skopeo, or, a shallow layout
(`export --base docker://…`, its base layers absent), through lockgen's registry client: its own blobs
uploaded, the base's mounted from the base's repository on the same registry or streamed from the base's
registry. The registry must hold exactly the layout's manifest digest; with `--attest CERT --key KEY` its certificate
(and SBOM) is then
attached to the pushed digest as a signed attestation, made first for the layout's own image so that nothing is
pushed when attaching would be refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from lockgen.adapters.distribution import registry
from lockgen.adapters.image import oci_layout, registry_image
from lockgen.api.steps import attestation_steps
from lockgen.core.image.image_reference import parse_reference, refuse_credentials
from lockgen.errors import HostError, UserError
from lockgen.model.json_values import JsonObject
from lockgen.model.oci_documents import OciManifest
from lockgen.model.oci import MANIFEST_MEDIA_TYPE


def push(
    layout: Path,
    reference: str,
    insecure: bool,
    progress: Callable[[str], None] = lambda _: None,
    attest: tuple[Path, Path] | None = None,
    sbom: Path | None = None,
) -> str:
    """Pushes `layout` to `reference` (docker://HOST/REPO:TAG) and returns the digest the registry holds; with
    `attest` (certificate, key) the certificate (and `sbom`) is then attached to the pushed image by its digest."""
    refuse_credentials(reference)
    manifest, config, local = oci_layout.read_image(layout)
    if attest is not None:  # everything attaching would refuse, refused before the first byte is pushed
        _attestable(layout, local, manifest, cast(JsonObject, config), reference, attest, sbom)  # JSON it holds
    layers = manifest.get("layers", [])
    size = sum(int(layer.get("size", 0)) for layer in layers)
    progress(f"pushing {len(layers)} layers ({size / 1e6:,.1f} MB compressed) to {reference}")
    source, absent = oci_layout.base_source(layout), oci_layout.missing_blobs(layout, manifest)
    if absent:  # a shallow layout (export --base docker://…): skopeo cannot read it, lockgen puts it itself
        if source is None:
            raise UserError(
                f"{layout} lacks {len(absent)} layer blobs and records no base registry they live in",
                "copy the layout whole, or export it again",
            )
        progress(f"{len(absent)} base layers are not in the layout: mounted or streamed from {source}")
        pushed = registry_image.push(
            layout,
            oci_layout.blob_bytes(layout, local),
            manifest,
            manifest.get("mediaType", MANIFEST_MEDIA_TYPE),
            reference,
            source,
            insecure,
            progress,
        )
    else:
        pushed = registry.push(layout, oci_layout.tag_of(layout), reference, insecure, progress)
    if pushed != local:
        raise HostError(
            f"the registry holds {pushed}, not the layout's {local}",
            "the registry rewrote the manifest; push to another",
        )
    if attest is not None:
        repository = reference.removeprefix("docker://").rsplit("@", 1)[0]
        name = repository.rsplit(":", 1)[0] if ":" in repository.rsplit("/", 1)[-1] else repository
        attestation_steps.attest(f"docker://{name}@{pushed}", attest[0], attest[1], sbom, insecure, progress)
    return pushed


def _attestable(
    layout: Path,
    digest: str,
    manifest: OciManifest,
    config: JsonObject,
    reference: str,
    attest: tuple[Path, Path],
    sbom: Path | None,
) -> None:
    """The attestations `push --attest` attaches, made for the layout's own image (the one the registry must then
    hold, by digest), so a certificate, key or SBOM that would be refused is refused before anything is pushed."""
    image = attestation_steps.AttestedImage.of(
        oci_layout.blob_bytes(layout, digest), manifest.get("mediaType", MANIFEST_MEDIA_TYPE), config
    )
    attestation_steps.attestations(parse_reference(reference), image, attest[0], attest[1], sbom)
