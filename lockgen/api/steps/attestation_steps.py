"""A step below the attestation use cases (`lockgen attest`, `lockgen push --attest`, `lockgen certs
docker://REF`, `lockgen fleet status docker://REF`): a certificate attached to its image as an in-toto
Statement v1 in a DSSE envelope (an OCI 1.1 referrer artifact; the fallback tag `sha256-<hex>` where the
registry has no referrers API), and the attestations attached to an image listed, each verified: the
artifact's own subject, the envelope's signature (with a key), the statement's subject against the image,
the certificate body against lockgen's model. A refused attestation is returned with its reason, never
dropped; everything that can be refused is checked before the first byte is pushed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from lockgen.adapters import user_files
from lockgen.adapters.node import signing
from lockgen.adapters.distribution.oci_distribution import MAX_BLOB, Registry
from lockgen.api.steps.certificate_steps import read_certificate, validated_body
from lockgen.core import nesting
from lockgen.core.certificate.attestation import (
    Descriptor,
    artifact_manifest,
    certificate_annotations,
    certificate_referrers,
    certificate_subject,
    descriptor,
    envelope,
    merged_referrers,
    pae,
    read_envelope,
    read_statement,
    referrer_entry,
    referrers_tag,
    statement,
    statement_binding,
)
from lockgen.core.image.image_reference import ImageReference, parse_reference
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError, LockgenError, UserError
from lockgen.model.attestation import (
    CYCLONEDX_MEDIA_TYPE,
    DSSE_MEDIA_TYPE,
    IN_TOTO_PAYLOAD_TYPE,
    AttachedCertificate,
    PushedReferrer,
)
from lockgen.model.json_values import JsonObject, object_at, text_at
from lockgen.model.oci import (
    DOCKER_LIST_MEDIA_TYPE,
    EMPTY_BLOB,
    ENVIRONMENT_LABEL,
    INDEX_MEDIA_TYPE,
    LOCK_LABEL,
    MANIFEST_MEDIA_TYPE,
)


@dataclass(frozen=True)
class AttestedImage:
    """The image an attestation is about: its manifest's descriptor and the labels of its config."""

    subject: Descriptor
    labels: JsonObject

    @property
    def digest(self) -> str:
        return self.subject["digest"]

    @classmethod
    def of(cls, manifest: bytes, media_type: str, config: JsonObject | None) -> AttestedImage:
        """The image whose manifest is these bytes (an image index: `config` None, no labels)."""
        labels = object_at(object_at(config or {}, "config"), "Labels")
        return cls(descriptor(media_type, manifest), labels)


def image_of(registry: Registry, reference: ImageReference, progress: Callable[[str], None]) -> AttestedImage:
    found = registry.manifest(reference.reference)
    if found is None:
        raise UserError(
            f"there is no image at {reference}", "push it first: lockgen push LAYOUT docker://HOST/REPO:TAG"
        )
    data, media_type = found
    progress(f"{reference} is {descriptor(media_type, data)['digest']}")
    if media_type in (INDEX_MEDIA_TYPE, DOCKER_LIST_MEDIA_TYPE):
        return AttestedImage.of(data, media_type, None)  # several platforms: no one config, so no labels
    try:
        config = json.loads(registry.blob(json.loads(data)["config"]["digest"], 1 << 22))
        return AttestedImage.of(data, media_type, config if isinstance(config, dict) else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LockFormatError(
            f"{reference} is not an image manifest with a JSON config",
            "attest an image (a manifest with a config), e.g. one pushed by lockgen push",
        ) from None


def attached_certificates(
    image_reference: str, public_keys: Sequence[Path], insecure: bool, progress: Callable[[str], None] = lambda _: None
) -> tuple[str, list[AttachedCertificate]]:
    """(the image's digest, every lockgen certificate attestation attached to it, each checked: with
    `public_keys`, its envelope must be signed by one of them)."""
    reference = parse_reference(image_reference)
    registry = Registry(reference, insecure)
    image = image_of(registry, reference, progress)
    index = registry.referrers(image.digest)
    if index is None:
        fallback = registry.manifest(referrers_tag(image.digest))
        try:  # the distribution-spec: a tag that is not an index means no referrers
            index = json.loads(fallback[0]) if fallback else {}
        except ValueError:
            index = {}
    fingerprints = {signing.public_fingerprint(key): key for key in public_keys}
    return image.digest, [
        _checked(registry, artifact, image, fingerprints) for artifact in certificate_referrers(index)
    ]


def _checked(
    registry: Registry, artifact: str, image: AttestedImage, fingerprints: dict[str, Path]
) -> AttachedCertificate:
    signature = "signature not checked (no --key)"
    try:
        envelope_ = read_envelope(_envelope_bytes(registry, artifact, image))
        if fingerprints:
            message = pae(envelope_.payload_type, envelope_.payload)
            signer = next(
                (
                    f
                    for f, key in fingerprints.items()
                    for _, sig in envelope_.signatures
                    if signing.verify_message(message, sig, key)
                ),
                None,
            )
            if signer is None:
                named = sorted({k[:16] for k, _ in envelope_.signatures if k and k not in fingerprints})
                raise LockFormatError(
                    f"its signature does not verify with key {', '.join(f[:16] for f in fingerprints)}"
                    + (f" (it names key {', '.join(named)})" if named else ": the envelope was changed"),
                    "pass the signer's public key, or attest the certificate again",
                )
            signature = f"signature valid (key {signer[:16]})"
        document = read_statement(envelope_)
        binding = statement_binding(document, image.digest, text_at(image.labels, LOCK_LABEL))
        body = validated_body(document["predicate"], f"attestation {artifact[:19]}…")
    except LockgenError as refused:
        return AttachedCertificate(registry.reference.at(artifact), None, "", signature, refused.message)
    return AttachedCertificate(registry.reference.at(artifact), body, binding, signature, None)


def _envelope_bytes(registry: Registry, artifact: str, image: AttestedImage) -> bytes:
    """The envelope layer of an artifact listed as the image's, whose own `subject` must be the image."""
    found = registry.manifest(artifact)
    if found is None:
        raise LockFormatError("it is listed, but the registry has no such manifest", "attest the certificate again")
    try:
        manifest = json.loads(found[0])
        subject = manifest.get("subject", {}).get("digest")
        layers = [layer for layer in manifest["layers"] if layer.get("mediaType") == DSSE_MEDIA_TYPE]
        single = len(layers) == 1 and isinstance(layers[0]["digest"], str) and 0 < int(layers[0]["size"]) <= MAX_BLOB
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LockFormatError("its manifest is not an OCI artifact manifest", "attest the certificate again") from None
    if subject != image.digest:
        raise LockFormatError(
            f"its manifest's subject is {subject}, not this image",
            "the referrers index lists another image's artifact; attest again",
        )
    if not single:
        raise LockFormatError("its manifest has no single DSSE envelope layer", "attest the certificate again")
    return registry.blob(layers[0]["digest"])


def _sbom_of(path: Path, image: AttestedImage, reference: ImageReference) -> bytes:
    """The SBOM file, refused unless it names the lock and environment the image's labels record."""
    try:
        data = user_files.read_bytes(path, MAX_BLOB, "SBOM")
        document = nesting.loads(data)
        properties = {p["name"]: p["value"] for p in document["metadata"].get("properties", [])}
        environment = document["metadata"]["component"]["version"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"`{path}` is not a CycloneDX SBOM written by lockgen export",
            "pass the sbom.cdx.json export wrote beside the image's layout",
        ) from None
    lock, labelled = image.labels.get(LOCK_LABEL), str(image.labels.get(ENVIRONMENT_LABEL, "")).removeprefix("sha256:")
    if properties.get("lockgen:lock.sha256") != lock or str(environment).removeprefix("sha256:") != labelled:
        raise UserError(
            f"`{path}` is not the SBOM of {reference}: it names another lock or environment than the image's labels",
            "pass the sbom.cdx.json export wrote beside this image's layout",
        )
    return data


def _artifact(
    image: AttestedImage, artifact_type: str, blob: bytes, annotations: dict[str, str]
) -> tuple[bytes, bytes]:
    """(the blob, the artifact manifest attaching it to the image)."""
    return blob, artifact_manifest(artifact_type, descriptor(artifact_type, blob), image.subject, annotations)


def attestations(
    reference: ImageReference, image: AttestedImage, certificate_path: Path, key: Path, sbom: Path | None
) -> list[tuple[bytes, bytes]]:
    """The artifacts (blob, manifest) attaching the certificate (and the SBOM) to `image`, each checked: the
    certificate read and its signer's key, its subject bound to the image's digest and lock label, the SBOM to
    its labels. Nothing is read from or written to a registry: `push --attest` runs it on the layout's own image
    before the first byte is pushed, `attest` on the image the registry holds."""
    document, _ = read_certificate(certificate_path, None)
    if document.get("signature"):
        signing.require_signed_by(document, key)
    body = object_at(document, "certificate")  # an object: `read_certificate` validated it as a certificate
    lock_path = text_at(object_at(body, "subject"), "lock_path")
    name, sha256 = certificate_subject(
        body,
        reference.name,
        image.digest,
        text_at(image.labels, LOCK_LABEL),
        PurePath(lock_path).name if lock_path else "_",
    )
    payload = canonical_json(statement(name, sha256, body))
    keyid, signature = signing.sign_message(pae(IN_TOTO_PAYLOAD_TYPE, payload), key)
    artifacts = [_artifact(image, DSSE_MEDIA_TYPE, envelope(payload, keyid, signature), certificate_annotations())]
    if sbom is not None:
        artifacts.append(_artifact(image, CYCLONEDX_MEDIA_TYPE, _sbom_of(sbom, image, reference), {}))
    return artifacts


def attest(
    image_reference: str,
    certificate_path: Path,
    key: Path,
    sbom: Path | None,
    insecure: bool,
    progress: Callable[[str], None] = lambda _: None,
) -> list[PushedReferrer]:
    """Attaches the certificate (and the SBOM) to the image as referrers; returns what was attached."""
    reference = parse_reference(image_reference)
    read_certificate(certificate_path, None)  # a file that is no certificate is refused before the registry is asked
    registry = Registry(reference, insecure)
    image = image_of(registry, reference, progress)
    artifacts = attestations(reference, image, certificate_path, key, sbom)
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
    if (
        not all(taken) and index is not None and index != before
    ):  # no OCI-Subject answer: the client keeps the tag's index
        registry.push_manifest(tag, index, INDEX_MEDIA_TYPE)
    for digest, artifact_type in pushed:
        progress(f"attached {digest[:19]}… ({artifact_type}), listed by the {listed_by}")
    return [PushedReferrer(digest, artifact_type, listed_by) for digest, artifact_type in pushed]
