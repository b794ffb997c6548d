"""Ed25519 signing of certificates (the `cryptography` library), over canonical JSON, and of the DSSE
envelopes that carry them as attestations (over their PAE bytes).

A certificate file is exactly the canonical rendering of `{certificate, signature}`: verifying
re-renders it, so any changed byte (content or layout) fails, and checks the signature over the
canonical JSON of the certificate body. A key's id is the sha256 of its raw public key: certificates
carry its first 16 hex digits, DSSE envelopes all 64.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lockgen.adapters import user_files
from lockgen.model.names import shown
from lockgen.core import nesting
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError, UserError


def render(document: dict[str, Any]) -> str:
    """The file text of a certificate: sorted keys, two-space indent, ASCII, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def keygen(path: Path) -> tuple[Path, Path]:
    """Writes a private key (PEM, mode 0600) at `path` and its public key at `path.pub`; neither file is
    ever overwritten (a lost private key cannot be made again), and neither is left without the other."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pub = path.with_name(path.name + ".pub")
    for existing in (path, pub):
        if os.path.lexists(existing):
            raise _exists(existing)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_new(path, private, 0o600)
    try:
        _write_new(pub, public, 0o644)
    except BaseException:
        path.unlink()
        raise
    return path, pub


def _exists(path: Path) -> UserError:
    return UserError(f"`{path}` already exists; keygen never overwrites a key", f"choose another --out, or move `{path}` aside deliberately")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Creates `path` with `data`, refusing (O_EXCL) a file made there since the check, and removing it if writing fails."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise _exists(path) from None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _load(path: Path, private: bool) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        data = user_files.read_bytes(path, user_files.KEY_LIMIT, "key")
        key = serialization.load_pem_private_key(data, None) if private else serialization.load_pem_public_key(data)
    except (OSError, ValueError, TypeError) as exc:
        kind = "private" if private else "public"
        raise UserError(f"cannot read {kind} key `{path}`: {exc}", "make one with `lockgen keygen --out KEY`") from None
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if not isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):  # RSA, EC: certificates are signed with Ed25519 alone
        raise UserError(f"key `{path}` is a {type(key).__name__.removeprefix('_').replace('PublicKey', '').replace('PrivateKey', '')} key, not Ed25519", "make one with `lockgen keygen --out KEY`")
    return key


def fingerprint(public_key: Any) -> str:
    """The sha256 (hex) of the raw public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def key_id(public_key: Any) -> str:
    return fingerprint(public_key)[:16]


def sign_message(message: bytes, private_key_path: Path) -> tuple[str, bytes]:
    """(the key's fingerprint, the Ed25519 signature of `message`): deterministic for one key and message."""
    key = _load(private_key_path, private=True)
    return fingerprint(key.public_key()), key.sign(message)


def public_fingerprint(public_key_path: Path) -> str:
    return fingerprint(_load(public_key_path, private=False))


def verify_message(message: bytes, signature: bytes, public_key_path: Path) -> bool:
    """Whether `signature` is the public key's Ed25519 signature of `message`."""
    from cryptography.exceptions import InvalidSignature

    try:
        _load(public_key_path, private=False).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def require_signed_by(document: dict[str, Any], private_key_path: Path) -> None:
    """Refuses a signed certificate document unless its signature is the one `private_key_path` makes (an
    attestation re-signs a certificate: it must not lend one key's name to another key's certificate)."""
    key = _load(private_key_path, private=True).public_key()
    if document["signature"].get("key_id") != key_id(key):
        raise LockFormatError(
            f"the certificate is signed by key {document['signature'].get('key_id')}, but `{private_key_path}` is key {key_id(key)}", "pass --key with the private key that signed the certificate"
        )
    _check_signature(document, key)


def sign(body: dict[str, Any], private_key_path: Path) -> dict[str, str]:
    key = _load(private_key_path, private=True)
    return {"algorithm": "ed25519", "key_id": key_id(key.public_key()), "value": base64.b64encode(key.sign(canonical_json(body))).decode()}


def verify_file(text: str, public_key_path: Path | None) -> dict[str, Any]:
    """The parsed certificate document, after checking its bytes and (with a key) its signature."""
    try:
        document = nesting.loads(text)
    except nesting.TooDeepError as exc:
        raise LockFormatError(f"certificate is JSON {exc}", "it is not a certificate lockgen wrote; use the original file") from None
    except ValueError as exc:
        raise LockFormatError(f"certificate is not JSON: {exc}", "it was damaged; use the original file") from None
    if render(document) != text:
        raise LockFormatError("certificate bytes differ from their canonical form: the file was edited", "certificates are tamper-evident; re-run lockgen verify")
    if not isinstance(document, dict):
        raise LockFormatError("certificate is not a JSON object", "it was damaged; use the original file")
    signature = document.get("signature")
    if signature is not None and (
        not isinstance(signature, dict) or signature.get("algorithm") != "ed25519" or not isinstance(signature.get("value"), str) or not isinstance(signature.get("key_id"), str)
    ):
        raise LockFormatError("certificate signature is malformed (lockgen signs with ed25519: algorithm, key_id, value)", "the file was edited; use the original certificate")
    if public_key_path is None:
        return document
    if not signature:
        raise LockFormatError("certificate is not signed", "sign with `lockgen verify --key KEY`")
    _check_signature(document, _load(public_key_path, private=False))
    return document


def _check_signature(document: dict[str, Any], key: Any) -> None:
    from cryptography.exceptions import InvalidSignature

    signature = document["signature"]
    if signature.get("key_id") != key_id(key):
        raise LockFormatError(f"certificate was signed by key {shown(str(signature.get('key_id')))}, not {key_id(key)}", "pass the public key that matches the signing key")
    try:
        key.verify(base64.b64decode(signature["value"]), canonical_json(document["certificate"]))
    except (InvalidSignature, ValueError, KeyError):
        raise LockFormatError("certificate signature does not verify: its content was changed", "certificates are tamper-evident; re-run lockgen verify") from None
