"""Ed25519 signing of certificates (the `cryptography` library), over canonical JSON, and of the DSSE
envelopes that carry them as attestations (over their PAE bytes).

A certificate file is exactly the canonical rendering of `{certificate, signature}`: verifying
re-renders it, so any changed byte (content or layout) fails, and checks the signature over the
canonical JSON of the certificate body. A key's id is the sha256 of its raw public key: certificates
carry its first 16 hex digits, DSSE envelopes all 64.

A fleet's folder holds thousands of certificates: `signed_and_canonical` proves one with keys loaded once and
`rendered`, which makes `render`'s bytes in a third of the time (json's indenting encoder is its pure-Python
one); a certificate it does not prove is left to `verify_file`, whose refusal names the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockgen.adapters import user_files
from lockgen.model.json_values import JsonObject, object_at, text_at
from lockgen.model.names import shown
from lockgen.core import nesting
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError, UserError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def render(document: JsonObject) -> str:
    """The file text of a certificate: sorted keys, two-space indent, ASCII, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def rendered(document: Any) -> str:
    """`render(document)`, byte for byte, for a document as `json.loads` returns it (dicts with text keys, lists,
    text, numbers, booleans, None); the tests hold it to `render` on any such document."""
    return _laid_out(_rendered(document, _NEWLINE)) + "\n"


def rendered_nested(value: Any, depth: int) -> str:
    """`json.dumps(value, indent=2, sort_keys=True)` with its lines after the first indented `depth` levels more,
    byte for byte: a value written inside another document one item at a time (`fleet status --json`'s rows)
    at the speed of `rendered`. A value that is not JSON (another type, a key not text) is a TypeError."""
    return _laid_out(_rendered(value, _NEWLINE + _LEVEL * depth))


# `_rendered` writes a key's `: ` as KEY_END and each level's indent as LEVEL: neither can be in its output
# otherwise (control characters are escaped), so one pass of C makes the file's text of it, and another the
# canonical JSON (no layout, `:` alone) that the signature is over, without encoding the document twice.
_KEY_END, _LEVEL = "\x00", "\x01"
_NEWLINE = "\n"
_LAYOUT = str.maketrans({_KEY_END: ": ", _LEVEL: "  "})
_COMPACT = bytes.maketrans(b"\x00", b":")


def _laid_out(marked: str) -> str:
    return marked.replace(_KEY_END, ": ").replace(_LEVEL, "  ")


def _compact(marked: str) -> bytes:
    return marked.encode("ascii").translate(_COMPACT, b"\n\x01")


def _float(value: float) -> str:
    return float.__repr__(value) if value - value == 0.0 else json.dumps(value)  # NaN, Infinity: json's own spelling


_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii,
    float: _float,
    int: int.__repr__,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): lambda _: "null",
}


def _rendered(value: Any, newline: str) -> str:
    kind = type(value)
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar(value)
    inner = newline + _LEVEL
    if kind is dict:
        if not value:
            return "{}"
        scalars = _SCALARS
        return (
            "{"
            + inner
            + ("," + inner).join(
                [
                    encode_basestring_ascii(key)
                    + _KEY_END
                    + (scalars[type(item)](item) if type(item) in scalars else _rendered(item, inner))
                    for key, item in sorted(value.items())
                ]
            )
            + newline
            + "}"
        )
    if kind is list:
        if not value:
            return "[]"
        return "[" + inner + ("," + inner).join([_rendered(item, inner) for item in value]) + newline + "]"
    raise TypeError(f"{kind.__name__} is not JSON")


def public_keys(paths: Sequence[Path]) -> dict[str, Ed25519PublicKey]:
    """The public keys at `paths`, loaded once, by the key id a certificate's signature names."""
    loaded = [_load(path, private=False) for path in paths]
    return {key_id(key): key for key in loaded}


def signed_and_canonical(text: str, document: Any, keys: Mapping[str, Any]) -> bool:
    """Whether `text` (which parsed to `document`) is a certificate file `verify_file` accepts with the key its
    signature names, one of `keys` (none given: whether it is canonical, its signature, if any, well formed).
    False says only that this quick proof failed: `verify_file` then says why, or accepts what this cannot."""
    if (
        type(document) is not dict
        or type(document.get("certificate")) is not dict
        or not set(document) <= {"certificate", "signature"}
    ):
        return False
    signature = document.get("signature")
    indent = _NEWLINE + _LEVEL
    body = _rendered(document["certificate"], indent)
    marked = (
        "{"
        + indent
        + '"certificate"'
        + _KEY_END
        + body
        + ","
        + indent
        + '"signature"'
        + _KEY_END
        + _rendered(signature, indent)
        + "\n}"
    )
    if _laid_out(marked) + "\n" != text:
        return False
    if signature is None:
        return not keys
    if (
        type(signature) is not dict
        or signature.get("algorithm") != "ed25519"
        or type(signature.get("value")) is not str
        or type(signature.get("key_id")) is not str
    ):
        return False
    if not keys:
        return True
    key = keys.get(signature["key_id"])
    if key is None:
        return False
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(base64.b64decode(signature["value"]), _compact(body))
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


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
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
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
    return UserError(
        f"`{path}` already exists; keygen never overwrites a key",
        f"choose another --out, or move `{path}` aside deliberately",
    )


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Creates `path` with `data`, refusing (O_EXCL) a file made there since the check, and removing it if writing
    fails."""
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

    if not isinstance(
        key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)
    ):  # RSA, EC: certificates are signed with Ed25519 alone
        raise UserError(
            f"key `{path}` is a "
            f"{type(key).__name__.removeprefix('_').replace('PublicKey', '').replace('PrivateKey', '')} key, not "
            "Ed25519",
            "make one with `lockgen keygen --out KEY`",
        )
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


def require_signed_by(document: JsonObject, private_key_path: Path) -> None:
    """Refuses a signed certificate document unless its signature is the one `private_key_path` makes (an
    attestation re-signs a certificate: it must not lend one key's name to another key's certificate)."""
    key = _load(private_key_path, private=True).public_key()
    signed_by = object_at(document, "signature").get("key_id")
    if signed_by != key_id(key):
        raise LockFormatError(
            f"the certificate is signed by key {signed_by}, but `{private_key_path}` is key {key_id(key)}",
            "pass --key with the private key that signed the certificate",
        )
    _check_signature(document, key)


def sign(body: JsonObject, private_key_path: Path) -> JsonObject:
    key = _load(private_key_path, private=True)
    return {
        "algorithm": "ed25519",
        "key_id": key_id(key.public_key()),
        "value": base64.b64encode(key.sign(canonical_json(body))).decode(),
    }


def verify_file(text: str, public_key_path: Path | None) -> JsonObject:
    """The parsed certificate document, after checking its bytes and (with a key) its signature."""
    try:
        document = nesting.loads(text)
    except nesting.TooDeepError as exc:
        raise LockFormatError(
            f"certificate is JSON {exc}", "it is not a certificate lockgen wrote; use the original file"
        ) from None
    except ValueError as exc:
        raise LockFormatError(f"certificate is not JSON: {exc}", "it was damaged; use the original file") from None
    if render(document) != text:
        raise LockFormatError(
            "certificate bytes differ from their canonical form: the file was edited",
            "certificates are tamper-evident; re-run lockgen verify",
        )
    if not isinstance(document, dict):
        raise LockFormatError("certificate is not a JSON object", "it was damaged; use the original file")
    signature = document.get("signature")
    if signature is not None and (
        not isinstance(signature, dict)
        or signature.get("algorithm") != "ed25519"
        or not isinstance(signature.get("value"), str)
        or not isinstance(signature.get("key_id"), str)
    ):
        raise LockFormatError(
            "certificate signature is malformed (lockgen signs with ed25519: algorithm, key_id, value)",
            "the file was edited; use the original certificate",
        )
    if public_key_path is None:
        return document
    if not signature:
        raise LockFormatError("certificate is not signed", "sign with `lockgen verify --key KEY`")
    _check_signature(document, _load(public_key_path, private=False))
    return document


def _check_signature(document: JsonObject, key: Ed25519PublicKey) -> None:
    from cryptography.exceptions import InvalidSignature

    signature = object_at(document, "signature")  # its form checked by `verify_file`
    if signature.get("key_id") != key_id(key):
        raise LockFormatError(
            f"certificate was signed by key {shown(str(signature.get('key_id')))}, not {key_id(key)}",
            "pass the public key that matches the signing key",
        )
    try:
        key.verify(base64.b64decode(text_at(signature, "value") or ""), canonical_json(document["certificate"]))
    except (InvalidSignature, ValueError, KeyError):
        raise LockFormatError(
            "certificate signature does not verify: its content was changed",
            "certificates are tamper-evident; re-run lockgen verify",
        ) from None
