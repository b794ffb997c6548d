"""A step below the certificate use cases (`cert verify`, `certs`, `attest`): reading a certificate file,
or a certificate body that came inside an attestation, into its model, refusing anything lockgen would not
have written (changed bytes, a bad signature, a body whose `passed` contradicts its checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lockgen.adapters import signing, user_files
from lockgen.core.stack_layout import CERT_SUFFIX
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import Certificate, CertificateBody


def read_certificate(path: Path, public_key: Path | None) -> tuple[dict[str, Any], Certificate]:
    """(the file's JSON document, its model), its bytes checked and, with a key, its signature."""
    try:
        text = user_files.read_bytes(path, user_files.CERTIFICATE_LIMIT, "certificate").decode("utf-8")
    except OSError as exc:
        raise UserError(f"cannot read certificate `{path}`: {exc}", "pass the path of a .cert.json") from None
    except UnicodeDecodeError as exc:
        raise LockFormatError(f"`{path}` is not UTF-8 text (byte {exc.start}): it was damaged", "certificates are written by `lockgen verify`; use the original file") from None
    document = signing.verify_file(text, public_key)
    certificate = _validated(Certificate, document, f"`{path}`")
    _require_consistent(certificate.certificate, f"`{path}`")
    return document, certificate


def validated_body(body: Any, where: str) -> CertificateBody:
    """A certificate body from elsewhere (an attestation's predicate) as its model, checked the same way."""
    certificate = _validated(CertificateBody, body, where)
    _require_consistent(certificate, where)
    return certificate


def _validated(model: Any, document: Any, where: str) -> Any:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise LockFormatError(f"{where} is not a lockgen certificate: at {at}, {first['msg'].lower()}", "certificates are written by `lockgen verify`; use the original file") from None


def _require_consistent(body: CertificateBody, where: str) -> None:
    if body.passed != all(c.passed for c in body.checks):
        raise LockFormatError(f"{where} says passed={body.passed} while {len(body.failures())} of its checks failed: it was edited", "certificates are tamper-evident; use the original file")


def list_certificates(folder: Path) -> list[tuple[Path, CertificateBody]]:
    """The certificates under `folder` (a stack folder, its certs/ folder, or any folder), oldest first."""
    root = folder.parent if folder.is_file() else folder
    paths = sorted(set(root.rglob(f"*{CERT_SUFFIX}")))
    found = []
    for path in paths:
        try:
            found.append((path, read_certificate(path, None)[1].certificate))
        except LockFormatError:
            continue
    return sorted(found, key=lambda item: item[1].created)
