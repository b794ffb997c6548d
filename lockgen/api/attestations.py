"""Use cases `lockgen attest` and `lockgen certs docker://REF`: a certificate becomes an in-toto Statement v1
in a DSSE envelope signed with the certificate key, attached to its image as an OCI 1.1 referrer artifact
(the registry's referrers API, else the distribution-spec's fallback tag `sha256-<hex>` holding an index of
referrers); and the attestations attached to an image are listed, each verified: its signature (with a
key), its statement's subject against the image, its certificate body against lockgen's model.

Everything that can be refused (the certificate, the key, the SBOM, what the fallback tag holds) is
checked before the first byte is pushed; attesting again pushes the same bytes and adds nothing."""

from __future__ import annotations

from lockgen.api.attestation_steps import attached_certificates, attest

__all__ = ["attest", "attached_certificates"]  # the work is the step's, shared with push --attest and fleet status
