"""Certificates as attestations: the in-toto Statement v1 and DSSE names lockgen writes, the media types
of the OCI 1.1 referrer artifacts that carry them, and what `lockgen attest` and `lockgen certs
docker://REF` return."""

from __future__ import annotations

from dataclasses import dataclass

from lockgen.model.certificate import CertificateBody

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"  # the DSSE payloadType of an in-toto Statement
CERTIFICATE_PREDICATE_TYPE = (
    "https://lockgen.dev/certificate/v1"  # predicate: a certificate body, lockgen.certificate/1
)
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"  # the artifact type and the layer holding the envelope
CYCLONEDX_MEDIA_TYPE = "application/vnd.cyclonedx+json"  # the artifact type and the layer of an attached SBOM
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"  # on the artifact manifest, so a referrers listing shows it


@dataclass(frozen=True)
class PushedReferrer:
    """One artifact `lockgen attest` attached to an image: its manifest digest, its type, and what lists it:
    the registry's `referrers API`, or the `index at tag sha256-<hex>` lockgen keeps where there is none."""

    digest: str
    artifact_type: str
    listed_by: str


@dataclass(frozen=True)
class AttachedCertificate:
    """One attestation found on an image and what checking it showed: `reason` is None when it holds (its
    statement names the image, or the lock the image was exported from, and with a key its signature
    verifies); `signature` says what was checked of the signature."""

    location: str  # docker://HOST/REPO@<the artifact manifest digest>
    body: CertificateBody | None
    binding: str  # "image" or "lock" (a bare-metal certificate of the image's lock), "" when refused
    signature: str
    reason: str | None

    @property
    def verified(self) -> bool:
        return self.reason is None
