"""Use cases `lockgen attest` and `lockgen certs docker://REF`: a certificate becomes an in-toto Statement v1
in a DSSE envelope signed with the certificate key, attached to its image as an OCI 1.1 referrer artifact
(the registry's referrers API, else the distribution-spec's fallback tag `sha256-<hex>` holding an index of
referrers); and the attestations attached to an image are listed, each verified: its signature (with a
key), its statement's subject against the image, its certificate body against lockgen's model.

Everything that can be refused (the certificate, the key, the SBOM, what the fallback tag holds) is
checked before the first byte is pushed; attesting again pushes the same bytes and adds nothing.

The gate (`certs --require-pass`, `admitting`) counts a statement bound to the image's digest. A statement
bound to a lock names the image only through the image's own lock label, which anyone can copy onto another
image with the envelope; it counts only once the image is proven that lock's, whole, in the same run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.api.steps.attestation_steps import attached_certificates, attest
from lockgen.api.steps.conformance_steps import read_manifests
from lockgen.api.steps.image_proof_steps import prove_image
from lockgen.core.image.image_reference import parse_reference
from lockgen.model.attestation import AttachedCertificate
from lockgen.model.results import Conformance

__all__ = [
    "Admission",
    "admitting",
    "attached_certificates",
    "attest",
]  # the work is the step's, shared with push --attest and fleet status


@dataclass(frozen=True)
class Admission:
    """An image's attestations (each checked), those the gate counts, and, with a lock, the proof that the
    image is that lock's (which lock-bound statements need)."""

    digest: str
    found: list[AttachedCertificate]
    counted: list[AttachedCertificate]
    proof: Conformance | None


def admitting(
    image_reference: str,
    public_key: Path | None,
    insecure: bool,
    lock: Path | None,
    progress: Callable[[str], None] = lambda _: None,
) -> Admission:
    """The image's attestations and those that count: bound to its digest, or, with `lock`, bound to that lock
    once the image at that digest is proven the lock's (`check --image --lock` passing)."""
    digest, found = attached_certificates(
        image_reference, [public_key] if public_key is not None else [], insecure, progress
    )
    counted = [a for a in found if a.verified and a.binding == "image"]
    lock_bound = [a for a in found if a.verified and a.binding == "lock"]
    if lock is None or not lock_bound:
        return Admission(digest, found, counted, None)
    pinned = parse_reference(image_reference).at(digest)  # the very image whose attestations were read
    progress(f"proving {pinned} the image of {lock} (its lock-bound attestations count only then)")
    loaded = read_lock(lock)
    read_manifests(loaded, None, None, progress)
    proof = prove_image(loaded, pinned, None, None, insecure, None, progress, None, ())
    if proof.clean:
        counted += [a for a in lock_bound if a.body is not None and a.body.subject.lock_sha256 == loaded.sha256]
    return Admission(digest, found, counted, proof)
