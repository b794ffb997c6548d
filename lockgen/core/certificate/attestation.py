"""Certificates as attestations, pure: the in-toto Statement v1 of a certificate, the DSSE envelope that
signs it (PAE as in the DSSE protocol), the OCI 1.1 artifact manifest that attaches it to an image, the
referrers index of the fallback tag, and what binds a statement to an image.

Every document is canonical JSON (sorted keys, no spaces) and Ed25519 is deterministic, so attesting the
same certificate to the same image gives the same envelope, manifest and index bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError
from lockgen.model.attestation import (
    CERTIFICATE_PREDICATE_TYPE,
    DSSE_MEDIA_TYPE,
    IN_TOTO_PAYLOAD_TYPE,
    PREDICATE_ANNOTATION,
    STATEMENT_TYPE,
)
from lockgen.model.oci import EMPTY_BLOB, EMPTY_MEDIA_TYPE, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE

_DAMAGED = "the attestation was damaged or forged; attest the certificate again with `lockgen attest`"


def statement(subject_name: str, subject_sha256: str, predicate: dict[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 of a certificate body: its subject is an image manifest or a lock, by sha256."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": subject_sha256}}],
        "predicateType": CERTIFICATE_PREDICATE_TYPE,
        "predicate": predicate,
    }


def certificate_subject(
    body: dict[str, Any], image_name: str, image_digest: str, image_lock_sha256: str | None, lock_name: str
) -> tuple[str, str]:
    """(name, sha256 hex) a certificate body's statement names: the image when the certificate records one
    (it must be `image_digest`), else the lock it covers (a bare-metal certificate), which must be the lock
    the image's label says it was exported from."""
    subject = body.get("subject") or {}
    if subject.get("image_digest"):
        if subject["image_digest"] != image_digest:
            raise LockFormatError(
                f"the certificate covers image {subject['image_digest']}, not {image_digest}",
                "attest it to the image it certified (its subject.image_digest)",
            )
        return image_name, image_digest.removeprefix("sha256:")
    if not subject.get("lock_sha256"):
        raise LockFormatError(
            "the certificate records neither an image nor a lock, so nothing binds it to an image",
            "certify with `lockgen verify --lock L` or `--image IMG`",
        )
    if subject["lock_sha256"] != image_lock_sha256:
        came_from = f"lock sha256 {image_lock_sha256[:16]}…" if image_lock_sha256 else "a lock it does not name"
        raise LockFormatError(
            f"the certificate covers lock sha256 {subject['lock_sha256'][:16]}…, but the image was exported from "
            f"{came_from}",
            "attest a certificate of the lock this image was exported from",
        )
    return lock_name, subject["lock_sha256"]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: `DSSEv1 LEN(type) type LEN(body) body`, lengths in ASCII decimal."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def envelope(payload: bytes, keyid: str, signature: bytes) -> bytes:
    """The DSSE JSON envelope of an in-toto payload and one signature over its PAE, as canonical bytes."""
    return canonical_json(
        {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}],
        }
    )


@dataclass(frozen=True)
class Envelope:
    """A parsed DSSE envelope: the payload bytes its signatures cover (with the type), and (keyid, sig) pairs."""

    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]


def _b64(text: Any, what: str) -> bytes:
    """Standard or URL-safe base64, padded or not (DSSE verifiers must accept either)."""
    if not isinstance(text, str):
        raise LockFormatError(f"the envelope's {what} is not a base64 string", _DAMAGED)
    normal = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise LockFormatError(f"the envelope's {what} is not base64", _DAMAGED) from None


def read_envelope(data: bytes) -> Envelope:
    """The envelope in `data`, or one error naming what is missing (unknown fields are ignored, as DSSE says)."""
    try:
        document = json.loads(data)
    except ValueError:
        raise LockFormatError("the attestation is not a JSON DSSE envelope", _DAMAGED) from None
    if (
        not isinstance(document, dict)
        or not isinstance(document.get("payloadType"), str)
        or not isinstance(document.get("signatures"), list)
        or not document["signatures"]
    ):
        raise LockFormatError("the attestation is not a DSSE envelope (payload, payloadType, signatures)", _DAMAGED)
    signatures = []
    for entry in document["signatures"]:
        if not isinstance(entry, dict):
            raise LockFormatError("the envelope's signatures are not objects", _DAMAGED)
        keyid = entry.get("keyid") or ""
        signatures.append((keyid if isinstance(keyid, str) else "", _b64(entry.get("sig"), "signature")))
    return Envelope(document["payloadType"], _b64(document.get("payload"), "payload"), tuple(signatures))


def read_statement(envelope_: Envelope) -> dict[str, Any]:
    """The certificate statement an envelope carries (read only after its signature was checked, when it was)."""
    if envelope_.payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise LockFormatError(
            f"the envelope's payloadType is `{envelope_.payload_type}`, not {IN_TOTO_PAYLOAD_TYPE}", _DAMAGED
        )
    try:
        document: dict[str, Any] = json.loads(envelope_.payload)
    except ValueError:
        raise LockFormatError("the envelope's payload is not JSON", _DAMAGED) from None
    subjects = document.get("subject") if isinstance(document, dict) else None
    if (
        not isinstance(subjects, list)
        or not subjects
        or not all(isinstance(s, dict) and isinstance(s.get("digest"), dict) for s in subjects)
    ):
        raise LockFormatError("the payload is not an in-toto statement with subjects and digests", _DAMAGED)
    if document.get("_type") != STATEMENT_TYPE:
        raise LockFormatError(f"the statement's _type is `{document.get('_type')}`, not {STATEMENT_TYPE}", _DAMAGED)
    if document.get("predicateType") != CERTIFICATE_PREDICATE_TYPE or not isinstance(document.get("predicate"), dict):
        raise LockFormatError(
            f"the statement's predicate is not a lockgen certificate ({CERTIFICATE_PREDICATE_TYPE})", _DAMAGED
        )
    return document


def statement_binding(document: dict[str, Any], image_digest: str, image_lock_sha256: str | None) -> str:
    """How a verified statement binds to the image: "image" when a subject is its manifest digest (and the
    certificate records that image), "lock" when the subject is the lock the image's label names and the
    certificate is a bare-metal one of that lock; anything else is one error saying whose it is."""
    wanted = image_digest.removeprefix("sha256:")
    digests = [s["digest"].get("sha256") for s in document["subject"]]
    recorded = document["predicate"].get("subject")
    recorded = recorded if isinstance(recorded, dict) else {}
    if wanted in digests:
        if recorded.get("image_digest") != image_digest:
            raise LockFormatError(
                f"the statement names this image but its certificate covers image {recorded.get('image_digest')}",
                _DAMAGED,
            )
        return "image"
    if image_lock_sha256 and image_lock_sha256 in digests:
        if recorded.get("image_digest") is not None or recorded.get("lock_sha256") != image_lock_sha256:
            raise LockFormatError(
                "the statement names this image's lock but its certificate covers something else", _DAMAGED
            )
        return "lock"
    named = ", ".join(f"sha256:{d[:16]}…" for d in digests if isinstance(d, str)) or "no sha256 digest"
    raise LockFormatError(
        f"the statement's subject is {named}, not this image ({image_digest[:23]}…) nor its lock",
        "it was copied from another image: attest this image's own certificate",
    )


def descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


def artifact_manifest(
    artifact_type: str, layer: dict[str, Any], subject: dict[str, Any], annotations: dict[str, str]
) -> bytes:
    """An OCI 1.1 artifact: an image manifest with `artifactType`, the empty config, one layer, and `subject`."""
    return canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "config": descriptor(EMPTY_MEDIA_TYPE, EMPTY_BLOB),
            "layers": [layer],
            "subject": subject,
            **({"annotations": annotations} if annotations else {}),
        }
    )


def certificate_annotations() -> dict[str, str]:
    return {PREDICATE_ANNOTATION: CERTIFICATE_PREDICATE_TYPE}


def referrer_entry(manifest: bytes) -> dict[str, Any]:
    """An artifact manifest's descriptor as a referrers list holds it: its artifactType and annotations copied."""
    document = json.loads(manifest)
    entry = {
        **descriptor(MANIFEST_MEDIA_TYPE, manifest),
        "artifactType": document.get("artifactType") or document["config"]["mediaType"],
    }
    return {**entry, **({"annotations": document["annotations"]} if document.get("annotations") else {})}


def referrers_tag(digest: str) -> str:
    """The distribution-spec's referrers tag of a digest: `<algorithm[:32]>-<encoded[:64]>`, other characters `-`."""
    algorithm, _, encoded = digest.partition(":")
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{algorithm[:32]}-{encoded[:64]}")


def merged_referrers(existing: bytes | None, entry: dict[str, Any], tag: str) -> bytes | None:
    """The fallback tag's index with `entry` appended (every entry already there kept), or None when it
    already lists it; an index that is not one is refused rather than overwritten."""
    index: dict[str, Any] = (
        {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}
        if existing is None
        else _referrers_index(existing, tag)
    )
    if any(isinstance(e, dict) and e.get("digest") == entry["digest"] for e in index["manifests"]):
        return None
    return canonical_json({**index, "manifests": [*index["manifests"], entry]})


def _referrers_index(data: bytes, tag: str) -> dict[str, Any]:
    try:
        index = json.loads(data)
    except ValueError:
        index = None
    if (
        not isinstance(index, dict)
        or not isinstance(index.get("manifests"), list)
        or index.get("mediaType", INDEX_MEDIA_TYPE) != INDEX_MEDIA_TYPE
    ):
        raise LockFormatError(
            f"the tag `{tag}` holds something other than an image index of referrers",
            "it is the image's referrers tag (distribution-spec): move what it holds elsewhere",
        )
    return index


def certificate_referrers(index: dict[str, Any]) -> list[str]:
    """The digests of a referrers index's lockgen certificate attestations (DSSE, lockgen's predicate type)."""
    entries = index.get("manifests") if isinstance(index, dict) else None
    return [
        e["digest"]
        for e in entries or []
        if isinstance(e, dict)
        and e.get("artifactType") == DSSE_MEDIA_TYPE
        and (e.get("annotations") or {}).get(PREDICATE_ANNOTATION) == CERTIFICATE_PREDICATE_TYPE
        and isinstance(e.get("digest"), str)
        and re.fullmatch(r"^sha256:[0-9a-f]{64}$", e["digest"])
    ]
