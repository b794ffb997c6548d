"""A step below the certificate use cases (`cert verify`, `certs`, `attest`): reading a certificate file,
or a certificate body that came inside an attestation, into its model, refusing anything lockgen would not
have written (changed bytes, a bad signature, a body whose `passed` contradicts its checks).

A file signed over its own bytes (`signing.framed`), read with a key, is read one way wherever it is read
(`cert verify`, `cert compare`, every fleet format, and a fleet's quick proof): its frame and signature first,
then its body validated from its JSON text (`framed_certificate`; a fleet's quick proof validates it by the same
rules into plain values, `certificate_proof.proven_facts`, and leaves what that refuses to the models); a file of
the older form, or read without a key, is proven canonical by `signing.verify_file` and its document validated."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from lockgen.adapters import user_files
from lockgen.adapters.node import signing
from lockgen.api.steps.certificate_proof import Signers, certificate_files
from lockgen.core import nesting
from lockgen.core.certificate.numerics import NumericsReference
from lockgen.core.certificate.numerics_votes import key_text
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import Certificate, CertificateBody, Numerics, NumericsKey, Signature
from lockgen.model.certificate_time import CREATED_FORM, CREATED_PATTERN
from lockgen.model.fingerprint import fingerprint_of
from lockgen.model.json_values import JsonObject, object_at, text_at
from lockgen.model.names import shown

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def read_certificate(path: Path, public_key: Path | None) -> tuple[JsonObject, Certificate]:
    """(the file's JSON document, its model), its bytes checked and, with a key, its signature."""
    return _certificate_of(path, _certificate_bytes(path), public_key)


def _certificate_of(path: Path, data: bytes, public_key: Path | None) -> tuple[JsonObject, Certificate]:
    """`read_certificate` of the file at `path` whose bytes, read once, are `data`."""
    found = signing.framed(data)
    if found is not None and public_key is not None:
        signing.check_framed(found, signing.public_key(public_key))
        certificate = framed_certificate(found, f"`{path}`")
        return {"certificate": json.loads(found.body), "signature": found.signature_json()}, certificate
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockFormatError(
            f"`{path}` is not UTF-8 text (byte {exc.start}): it was damaged",
            "certificates are written by `lockgen verify`; use the original file",
        ) from None
    document = signing.verify_file(text, public_key)
    certificate = _validated(Certificate, document, f"`{path}`")
    _require_consistent(certificate.certificate, f"`{path}`")
    return document, certificate


def _certificate_bytes(path: Path) -> bytes:
    try:
        return user_files.read_bytes(path, user_files.CERTIFICATE_LIMIT, "certificate")
    except OSError as exc:
        raise UserError(f"cannot read certificate `{path}`: {exc}", "pass the path of a .cert.json") from None


def framed_certificate(found: signing.FramedFile, where: str) -> Certificate:
    """The certificate of a framed file whose signature was verified: its body validated from its JSON text as
    the file holds it (pydantic's JSON mode, in Rust: no `json.loads`, and no rendering again, since the signer
    rendered it), refused as `read_certificate` refuses a body (the field named, or `passed` contradicted)."""
    try:
        body = CertificateBody.model_validate_json(found.body)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            raise _not_a_certificate(exc, where, ("certificate",)) from None
        body = _python_parsed_body(found.body, exc, where)
    _require_consistent(body, where)
    return Certificate(certificate=body, signature=Signature.model_validate(found.signature_json()))


def _python_parsed_body(text: bytes, refusal: ValidationError, where: str) -> CertificateBody:
    """A signed body pydantic's JSON parser refuses, read as the older form's is (json's parser, then the models):
    json takes what `render` writes and pydantic's parser does not, a lone surrogate's escape (`\\udcff`, from a
    path or variable that is not UTF-8); anything json refuses too keeps pydantic's refusal."""
    try:
        document = nesting.loads(text)
    except ValueError:
        raise _not_a_certificate(refusal, where, ("certificate",)) from None
    return _validated(CertificateBody, document, where, ("certificate",))


def validated_body(body: Any, where: str) -> CertificateBody:
    """A certificate body from elsewhere (an attestation's predicate) as its model, checked the same way."""
    certificate = _validated(CertificateBody, body, where)
    _require_consistent(certificate, where)
    return certificate


def _validated(model: Any, document: Any, where: str, within: tuple[str, ...] = ()) -> Any:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise _not_a_certificate(exc, where, within) from None


def _not_a_certificate(error: ValidationError, where: str, within: tuple[str, ...] = ()) -> LockFormatError:
    """The refusal of a document the models do not accept, naming the first field they refused (`within`: where
    in the file the document validated lies)."""
    return LockFormatError(
        f"{where} is not a lockgen certificate: {_refused_field(error, within)}",
        "certificates are written by `lockgen verify`; use the original file",
    )


def _require_consistent(body: CertificateBody, where: str) -> None:
    if body.passed != all(c.passed for c in body.checks):
        raise LockFormatError(
            f"{where} says passed={body.passed} while {len(body.failures())} of its checks failed: it was edited",
            "certificates are tamper-evident; use the original file",
        )


def certificate_paths(folder: Path) -> list[Path]:
    """The certificate files under `folder` (a stack folder, its certs/ folder, or any folder), by path."""
    return sorted({Path(path) for path in certificate_files(folder)})


def read_signed(path: Path, keys: dict[str, Path]) -> Certificate:
    """A certificate read as `read_certificate` does and, when `keys` were given (`signers`), signed by one of
    them with a signature that verifies: unsigned, signed by another key or changed, it is refused."""
    data = _certificate_bytes(path)  # read once: each reading below judges these bytes
    if keys:
        found = signing.framed(data)
        if found is not None:  # read by its frame and signature first, as a fleet's quick proof reads it
            return _certificate_of(path, data, _signer_of(path, found.key_id, keys))[1]
    document, certificate = _certificate_of(path, data, None)
    if not keys:
        return certificate
    signed_by = text_at(object_at(document, "signature"), "key_id")  # text: `signing.verify_file` checked it
    if signed_by is None:
        raise LockFormatError(
            f"`{shown(str(path))}` is not signed, so no --key can prove its figures",
            "read it without --key (its figures are then unproven), or sign it: lockgen verify --key",
        )
    signing.check_signed(document, _signer_of(path, signed_by, keys))  # the file proven canonical once, above
    return certificate


def _signer_of(path: Path, signed_by: str, keys: dict[str, Path]) -> Path:
    key = keys.get(signed_by)
    if key is None:
        tried = ", ".join(f"{key_id} of `{shown(str(given))}`" for key_id, given in keys.items())
        raise LockFormatError(
            f"`{shown(str(path))}` is signed by key {shown(str(signed_by))}, which no --key given is (keys tried: "
            f"{tried})",
            "pass --key with the signer's public key (KEY.pub); repeat --key for two signers",
        )
    return key


DEEP_LINE = "\n" + " " * 2 * (
    nesting.MAX_DEPTH - 4
)  # in a canonical file, a line this indented lies near the nesting bound


def proven_certificate(data: bytes, keys: Signers) -> Certificate | None:
    """The certificate whose file's bytes are `data`, when the quick proof (the keys loaded once) accepts exactly
    these bytes, as `read_signed` would; None when it cannot prove them: then `read_signed` says why, or accepts
    what this cannot. A framed file (signed over its own bytes) is proven as `read_signed` reads it: its frame,
    its signature, `framed_certificate`; one of the older form by `signing.signed_and_canonical`."""
    found = signing.framed(data) if keys.loaded else None
    if found is not None:
        key = keys.loaded.get(found.key_id)
        if key is None or not signing.verifies(found, key):
            return None
        try:
            return framed_certificate(found, "")
        except LockFormatError:
            return None
    try:
        text = data.decode("utf-8")
        document = json.loads(text) if DEEP_LINE not in text else None
    except (ValueError, RecursionError):
        document = None
    # a document nested past the renderer's recursion (not canonical, or DEEP_LINE would be in it) is read by
    # read_signed
    try:
        proven = document is not None and signing.signed_and_canonical(text, document, keys.loaded)
    except RecursionError:
        proven = False
    if proven:
        try:
            certificate = Certificate.model_validate(document)
        except ValidationError:
            certificate = None
        if certificate is not None and certificate.certificate.passed == all(
            check.passed for check in certificate.certificate.checks
        ):
            return certificate
    return None


def list_certificates(folder: Path) -> list[tuple[Path, CertificateBody]]:
    """The certificates under `folder` (a stack folder, its certs/ folder, or any folder), oldest first."""
    found = []
    for path in certificate_paths(folder):
        try:
            found.append((path, read_certificate(path, None)[1].certificate))
        except LockFormatError:
            continue
    return sorted(found, key=lambda item: item[1].created)


def read_numerics_references(
    path: Path, keys: Mapping[str, Ed25519PublicKey], key_hint: str
) -> tuple[NumericsReference, ...]:
    """The fingerprints `verify --expect-numerics FILE` pins: FILE is a certificate (its fingerprint, and its
    stack to name what differs), one fingerprint `{"key": {...}, "digests": {...}}`, or a list of either, each
    key's digests given once. A certificate among them is proven as `cert verify` proves one: with `keys` (by key
    id), signed by one of them; without, unsigned, since a signature no key can check would prove nothing of a
    fingerprint changed by hand (`key_hint` says how to give the key where the reference is read)."""
    where = f"`{shown(str(path))}`"
    try:
        text = user_files.read_bytes(path, user_files.CERTIFICATE_LIMIT, "numerics reference").decode("utf-8")
        document = nesting.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"cannot read the numerics reference {where}: {shown(str(exc))}", _REFERENCE_HINT) from None
    if isinstance(document, dict) and "certificate" in document:
        try:
            signing.verify_file(text, None)  # a certificate file: its bytes canonical, its signature well formed
        except LockFormatError as exc:
            raise _not_a_reference(where, exc.message) from None
    if not isinstance(document, list):
        return (_entry_reference(document, where, keys, key_hint),)
    if not document:
        raise UserError(f"the numerics reference {where} holds no fingerprint", _REFERENCE_HINT)
    references = tuple(
        _entry_reference(entry, f"{where} (entry {index})", keys, key_hint) for index, entry in enumerate(document)
    )
    _refuse_ambiguous(references, where)
    return references


_REFERENCE_HINT = (
    "pass a certificate of a node known to be good, or its `numerics` object ({key, digests}), or a list of them"
)


def _not_a_reference(where: str, why: str) -> UserError:
    return UserError(f"{where} is not a numerics reference: {why}", _REFERENCE_HINT)


def _entry_reference(entry: Any, where: str, keys: Mapping[str, Ed25519PublicKey], key_hint: str) -> NumericsReference:
    """One fingerprint of the reference: a certificate's document (proven as a file's is, from its parsed JSON:
    a list holds no file's bytes) or a `numerics` object."""
    if isinstance(entry, dict) and "certificate" in entry:
        try:
            certificate = Certificate.model_validate(entry)
        except ValidationError as exc:
            raise _not_a_reference(where, f"a certificate {_refused_field(exc)}") from None
        if certificate.certificate.passed != all(check.passed for check in certificate.certificate.checks):
            raise _not_a_reference(where, "a certificate whose `passed` contradicts its checks: it was edited")
        return _proven_reference(entry, certificate, where, keys, key_hint)
    try:
        numerics = Numerics.model_validate(entry)
    except ValidationError as exc:
        raise _not_a_reference(where, f"neither a certificate nor a `numerics` object: {_refused_field(exc)}") from None
    return NumericsReference(numerics, None, where)


def _refused_field(error: ValidationError, within: tuple[str, ...] = ()) -> str:
    """The first field the models refused and why (`within`: where in the file the document validated lies): a
    certificate's time said as the rule, not as its regular expression."""
    first = error.errors()[0]
    at = ".".join(str(part) for part in (*within, *first["loc"])) or "the top level"
    said = first["msg"].lower()
    if first.get("ctx", {}).get("pattern") == CREATED_PATTERN:
        said = f"`{shown(str(first['input']), 40)}` is not {CREATED_FORM} (UTC, a real date and time)"
    return f"at {shown(at)}, {said}"


def _proven_reference(
    document: JsonObject,
    certificate: Certificate,
    where: str,
    keys: Mapping[str, Ed25519PublicKey],
    key_hint: str,
) -> NumericsReference:
    """A certificate's fingerprint, once its signature is proven under `keys` (`signing.check_signed_with`, what
    `cert verify` checks). An unsigned certificate is taken as a bare `numerics` object is, as trustworthy as the
    file it is in (refusing it would protect nothing: the same file could hold its `numerics` object); a signed one
    must verify, so a fingerprint changed by hand in a signed reference is never taken."""
    signature = certificate.signature
    if signature is not None and not keys:
        raise UserError(
            f"the numerics reference {where} is a certificate signed by key {shown(signature.key_id)}, but no "
            "key was given to check it: a fingerprint changed by hand could not be told",
            key_hint,
        )
    if signature is not None:
        key = keys.get(signature.key_id)
        if key is None:
            raise UserError(
                f"the numerics reference {where} is signed by key {shown(signature.key_id)}, which no key given is",
                key_hint,
            )
        try:
            signing.check_signed_with(document, key)
        except LockFormatError:
            raise UserError(
                f"the numerics reference {where} is a certificate whose signature does not verify: its content "
                "was changed",
                "pin the good node's original certificate",
            ) from None
    body = certificate.certificate
    if body.numerics is None:
        raise UserError(
            f"the numerics reference {where} is a certificate without a numerics fingerprint (made before lockgen "
            "computed one)",
            "certify a good node again and pin that certificate",
        )
    return NumericsReference(body.numerics, body.stack, where)


def _refuse_ambiguous(references: Sequence[NumericsReference], where: str) -> None:
    """Refuses two entries of one key whose digests differ: which would judge a node would be chosen by order."""
    first_of: dict[NumericsKey, NumericsReference] = {}
    for reference in references:
        earlier = first_of.setdefault(reference.numerics.key, reference)
        if earlier.numerics.digests != reference.numerics.digests:
            raise UserError(
                f"the numerics reference {where} is ambiguous: {earlier.source} and {reference.source} are for the "
                f"same key ({shown(key_text(fingerprint_of(reference.numerics).key), 300)}) with other digests",
                "keep one reference per key: the certificate of the node known to be good",
            )
