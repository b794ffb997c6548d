"""Use cases `lockgen attest` and `lockgen certs docker://REF`: a certificate becomes an in-toto Statement v1
in a DSSE envelope signed with the certificate key, attached to its image as an OCI 1.1 referrer artifact
(the registry's referrers API, else the distribution-spec's fallback tag `sha256-<hex>` holding an index of
referrers); and the attestations attached to an image are listed, each verified: its signature (with a
key), its statement's subject against the image, its certificate body against lockgen's model.

Everything that can be refused (the certificate, the key, the SBOM, what the fallback tag holds) is
checked before the first byte is pushed; attesting again pushes the same bytes and adds nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path, PurePath

from lockgen.adapters import signing
from lockgen.adapters.oci_distribution import Registry
from lockgen.api.attestation_steps import AttestedImage, attached_certificates, image_of
from lockgen.api.certificate_steps import read_certificate
from lockgen.core.attestation import (artifact_manifest, certificate_annotations, certificate_subject, descriptor,
                                      envelope, merged_referrers, pae, referrer_entry, referrers_tag, statement)
from lockgen.core.image_reference import ImageReference, parse_reference
from lockgen.digests import canonical_json
from lockgen.errors import UserError
from lockgen.model.attestation import CYCLONEDX_MEDIA_TYPE, DSSE_MEDIA_TYPE, IN_TOTO_PAYLOAD_TYPE, PushedReferrer
from lockgen.model.oci import EMPTY_BLOB, ENVIRONMENT_LABEL, INDEX_MEDIA_TYPE, LOCK_LABEL, MANIFEST_MEDIA_TYPE

__all__ = ["attest", "attached_certificates"]  # listing is the step's, shared with `lockgen fleet status`


def _sbom_of(path: Path, image: AttestedImage, reference: ImageReference) -> bytes:
    """The SBOM file, refused unless it names the lock and environment the image's labels record."""
    try:
        data = path.read_bytes()
        document = json.loads(data)
        properties = {p["name"]: p["value"] for p in document["metadata"].get("properties", [])}
        environment = document["metadata"]["component"]["version"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"`{path}` is not a CycloneDX SBOM written by lockgen export",
                        "pass the sbom.cdx.json export wrote beside the image's layout") from None
    lock, labelled = image.labels.get(LOCK_LABEL), str(image.labels.get(ENVIRONMENT_LABEL, "")).removeprefix("sha256:")
    if properties.get("lockgen:lock.sha256") != lock or str(environment).removeprefix("sha256:") != labelled:
        raise UserError(f"`{path}` is not the SBOM of {reference}: it names another lock or environment than the image's labels",
                        "pass the sbom.cdx.json export wrote beside this image's layout")
    return data


def _artifact(image: AttestedImage, artifact_type: str, blob: bytes, annotations: dict[str, str]) -> tuple[bytes, bytes]:
    """(the blob, the artifact manifest attaching it to the image)."""
    return blob, artifact_manifest(artifact_type, descriptor(artifact_type, blob), image.subject, annotations)


def attest(image_reference: str, certificate_path: Path, key: Path, sbom: Path | None, insecure: bool,
           progress: Callable[[str], None] = lambda _: None) -> list[PushedReferrer]:
    """Attaches the certificate (and the SBOM) to the image as referrers; returns what was attached."""
    reference = parse_reference(image_reference)
    document, _ = read_certificate(certificate_path, None)
    if document.get("signature"):
        signing.require_signed_by(document, key)
    registry = Registry(reference, insecure)
    image = image_of(registry, reference, progress)
    lock_path = (document["certificate"].get("subject") or {}).get("lock_path")
    name, sha256 = certificate_subject(document["certificate"], reference.name, image.digest, image.labels.get(LOCK_LABEL),
                                       PurePath(lock_path).name if lock_path else "_")
    payload = canonical_json(statement(name, sha256, document["certificate"]))
    keyid, signature = signing.sign_message(pae(IN_TOTO_PAYLOAD_TYPE, payload), key)
    artifacts = [_artifact(image, DSSE_MEDIA_TYPE, envelope(payload, keyid, signature), certificate_annotations())]
    if sbom is not None:
        artifacts.append(_artifact(image, CYCLONEDX_MEDIA_TYPE, _sbom_of(sbom, image, reference), {}))
    tag = referrers_tag(image.digest)  # the fallback index, read and merged before anything is pushed
    existing = registry.manifest(tag)
    before = index = existing[0] if existing else None
    for _, manifest in artifacts:
        index = merged_referrers(index, referrer_entry(manifest), tag) or index
    pushed, taken = [], []
    for blob, manifest in artifacts:
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        registry.push_blob(EMPTY_BLOB)
        registry.push_blob(blob)
        taken.append(bool(registry.push_manifest(digest, manifest, MANIFEST_MEDIA_TYPE)))
        pushed.append((digest, json.loads(manifest)["artifactType"]))
    listed_by = "referrers API" if all(taken) else f"index at tag {tag}"
    if not all(taken) and index != before:  # no OCI-Subject answer: the client keeps the tag's index
        registry.push_manifest(tag, index, INDEX_MEDIA_TYPE)
    for digest, artifact_type in pushed:
        progress(f"attached {digest[:19]}… ({artifact_type}), listed by the {listed_by}")
    return [PushedReferrer(digest, artifact_type, listed_by) for digest, artifact_type in pushed]
