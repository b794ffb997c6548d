"""A fleet's quick proof of its certificates (`fleet status`): the certificate files under a folder, the public
keys given, loaded once, and each file's proof as the plain facts a status reads and keeps (`proven_facts`).

It imports neither pydantic nor the models: a status whose every certificate has a kept verdict
(`adapters.node.kept_verdicts`) proves none of them and needs neither; a framed file's body is validated by the
kept plain validator (`adapters.node.kept_schema`: pydantic-core alone), and only a file that validation refuses,
or one of the older form, is read by the models (`certificate_steps`), which word the reason."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockgen.adapters import user_files
from lockgen.adapters.node import signing
from lockgen.core.fleet.fleet_status import FAILED, certificate_facts, plain_facts
from lockgen.core.stack.stack_layout import CERT_SUFFIX
from lockgen.errors import LockFormatError, UserError
from lockgen.model.names import shown

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def certificate_files(folder: Path) -> Iterator[str]:
    """The certificate files under `folder` (a stack folder, its certs/ folder, or any folder) as text, in the order
    they are found (a fleet's 100,000 are never one list)."""
    return user_files.names_ending(str(folder.parent if folder.is_file() else folder), CERT_SUFFIX)


def named_certificate_files(source: str) -> Iterator[str]:
    """The certificate files a `fleet status` FOLDER argument names: those under the folder, or the one certificate
    file given; UserError for anything else (nothing there, another file, an empty argument), never its parent folder
    (`certificate_files` of `k.pub` reads a whole tree of unrelated certificates) nor, for "", the current one."""
    folder = Path(source)
    if source.endswith(CERT_SUFFIX) and folder.is_file():
        return iter([source])
    if source and folder.is_dir():
        return certificate_files(folder)
    hint = "pass folders holding *.cert.json (lockgen fleet slurm's --certs), a *.cert.json, or image references"
    if not source:
        raise UserError("an empty argument is not a folder of certificates", hint)
    if not folder.exists():
        raise UserError(f"`{shown(source)}` is neither a folder of certificates nor docker://REF", hint)
    raise UserError(f"`{shown(source)}` is not a folder of certificates", hint)


def signers(keys: Sequence[Path]) -> dict[str, Path]:
    """The public keys given (`--key`, repeatable) by the key id a signature names."""
    return {signing.public_fingerprint(key)[:16]: key for key in keys}


@dataclass(frozen=True)
class Signers:
    """The public keys given (`--key`, repeatable), by the key id a signature names: their paths (for the
    refusals `read_signed` words) and the keys loaded once (for the quick proof of a fleet's certificates)."""

    paths: dict[str, Path]
    loaded: dict[str, Ed25519PublicKey]


def loaded_signers(keys: Sequence[Path]) -> Signers:
    loaded = signing.public_keys(keys)
    return Signers(signers(keys), loaded)


@dataclass(frozen=True)
class ProvenFacts:
    """Of a certificate the quick proof accepted, what a fleet's status reads and keeps: its facts as plain values
    (`CertificateFacts.plain`'s) and the id of the key that signed it (None: not signed)."""

    plain: list[Any]
    key_id: str | None


def proven_facts(data: bytes, keys: Signers) -> ProvenFacts | None:
    """`certificate_steps.proven_certificate`'s verdict on `data` as the facts a fleet's status reads: a framed
    file's body validated as plain values (`kept_schema.plain_body`, `CertificateBody`'s rules without its records:
    a fleet's 10,000 bodies in half the time), else by the models (`framed_certificate`: what that validation
    refused, such as a repeated key or a lone surrogate's escape, may still be a certificate); a file of the older
    form by `proven_certificate`. None when it cannot prove them: then `read_signed` says why, or accepts what this
    cannot."""
    found = signing.framed(data) if keys.loaded else None
    if found is None:
        from lockgen.api.steps.certificate_steps import proven_certificate

        certificate = proven_certificate(data, keys)
        if certificate is None:
            return None
        signed_by = certificate.signature.key_id if certificate.signature is not None else None
        return ProvenFacts(certificate_facts(certificate.certificate).plain(), signed_by)
    key = keys.loaded.get(found.key_id)
    if key is None or not signing.verifies(found, key):
        return None
    from pydantic_core import ValidationError  # imported with the validator: once

    from lockgen.adapters.node.kept_schema import plain_body

    try:
        body = plain_body(found.body)
    except ValidationError:
        from lockgen.api.steps.certificate_steps import framed_certificate

        try:
            return ProvenFacts(certificate_facts(framed_certificate(found, "").certificate).plain(), found.key_id)
        except LockFormatError:
            return None
    plain = plain_facts(body)
    if body["passed"] == bool(plain[FAILED]):  # `passed` contradicting its checks: edited, `read_signed` says so
        return None
    return ProvenFacts(plain, found.key_id)
